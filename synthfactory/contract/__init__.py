"""The contract between the steps, and the one thing both sides of the wall import.

The engine (``synthfactory``) and the Airflow layer (dags/, operators/, plugins/) run
in different environments and never import each other, except this package: standard
library only, so the Airflow image carries it without the engine. It holds what each
side would otherwise spell on its own (docs/contracts.md):

- ``paths``: the run folder's layout and file names;
- ``shapes``: TypedDicts of every JSON file the steps write and of the plan's summary;
- ``report_shapes``: TypedDicts of report.json and the Run report's view of it;
- ``names``: exit codes, environment variable names, the shipped styles;
- ``catalog_uri``: the default catalog and the "no password in a URI" rule;
- ``run_folder``: the one reader of a run folder's JSON files (the caller brings I/O);
- ``run_format``: the run folder's format version, and the one upgrade of an older
  folder's files to the current shape, which that reader applies.

Report arithmetic is not here: ``synthfactory.report_figures``, the library both sides
may also import, computes report.json's figures from these shapes (docs/adr/0146).
"""

from synthfactory.contract import paths
from synthfactory.contract.catalog_uri import (
    DEFAULT_CATALOG_DB,
    DEFAULT_WAREHOUSE,
    NO_PASSWORD_PATTERN,
    default_catalog_uri,
    has_password,
)
from synthfactory.contract.names import (
    CATALOG_URI_ENV,
    DEBUG_ENV,
    ENDPOINT_API_KEY_ENV,
    ENDPOINT_MODEL_ENV,
    ENDPOINT_URL_ENV,
    EXIT_DONE,
    EXIT_PERMANENT,
    EXIT_RETRYABLE,
    EXIT_USAGE,
    GPU_HOUR_USD_ENV,
    HOME_ENV,
    METRIC_LABEL_ENV,
    METRICS_JOB,
    NOT_RETRYABLE,
    PAUSE_AT_ENV,
    PAUSE_MARKER_ENV,
    PAUSE_RELEASE_ENV,
    PROGRESS_SECONDS_ENV,
    PUSHGATEWAY_ENV,
    RESULT_FILE_ENV,
    STYLES,
    TRY_NUMBER_ENV,
)
from synthfactory.contract.report_shapes import (
    ReportCost,
    ReportDomainYield,
    ReportExample,
    ReportJson,
    ReportLengths,
    ReportManifest,
    ReportProgress,
    ReportPrompts,
    ReportQuality,
    ReportRejectedExample,
    ReportRephrase,
    ReportShard,
    ReportSlowShard,
    ReportStitch,
    ReportTemplateYield,
    ReportTokens,
    ReportView,
)
from synthfactory.contract.run_folder import RunFiles, RunFolder, ShardFiles, not_written
from synthfactory.contract.run_format import RUN_FORMAT
from synthfactory.contract.shapes import (
    CommitAttempts,
    CommitPart,
    CommittedJson,
    CommitTimings,
    JoinedJson,
    JoinedTemplate,
    LengthStats,
    ManifestSummary,
    PlanGroup,
    QualityCounts,
    QuarantinePart,
    RoutingEntry,
    ShardEntry,
    ShardsJson,
    TemplateEntry,
    TemplateYield,
    ValidationFlags,
    ValidationJson,
)

__all__ = [
    "CATALOG_URI_ENV", "DEBUG_ENV", "DEFAULT_CATALOG_DB", "DEFAULT_WAREHOUSE", "EXIT_DONE",
    "ENDPOINT_API_KEY_ENV", "ENDPOINT_MODEL_ENV", "ENDPOINT_URL_ENV",
    "EXIT_PERMANENT", "EXIT_RETRYABLE", "EXIT_USAGE", "GPU_HOUR_USD_ENV", "HOME_ENV",
    "METRIC_LABEL_ENV", "NOT_RETRYABLE", "NO_PASSWORD_PATTERN", "PAUSE_AT_ENV",
    "PAUSE_MARKER_ENV", "PAUSE_RELEASE_ENV", "PROGRESS_SECONDS_ENV",
    "METRICS_JOB", "PUSHGATEWAY_ENV",
    "RESULT_FILE_ENV", "STYLES", "TRY_NUMBER_ENV", "CommitAttempts", "CommitPart",
    "CommitTimings", "CommittedJson", "LengthStats", "ManifestSummary", "PlanGroup",
    "QualityCounts", "QuarantinePart", "ReportCost", "ReportExample", "ReportJson", "ReportLengths",
    "ReportProgress", "ReportSlowShard",
    "ReportManifest", "ReportPrompts", "ReportQuality", "ReportRejectedExample",
    "ReportRephrase", "ReportShard", "ReportStitch", "ReportTemplateYield",
    "ReportDomainYield", "ReportTokens", "ReportView", "RunFiles", "RunFolder", "ShardEntry",
    "ShardFiles", "RoutingEntry", "ShardsJson", "TemplateEntry", "TemplateYield",
    "ValidationFlags", "ValidationJson",
    "JoinedJson", "JoinedTemplate",
    "RUN_FORMAT", "default_catalog_uri", "has_password", "not_written", "paths",
]
