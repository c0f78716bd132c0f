"""What a step's process agrees on with whoever launches it (a local subprocess or a
pod, docs/contracts.md): exit codes, environment variable names, the shipped styles."""

from __future__ import annotations

# Exit codes: whether Airflow retries the task (docs/adr/0105, docs/adr/0131).
EXIT_DONE = 0  # the summary is the XCom
EXIT_RETRYABLE = 1  # a RetryableError (a retry may cure it), or an unforeseen error
EXIT_USAGE = 2  # argparse's own code for a bad command line
EXIT_PERMANENT = 3  # a SynthfactoryError (the default): the same argv fails the same way
NOT_RETRYABLE = frozenset({EXIT_USAGE, EXIT_PERMANENT})

# Environment variables a step reads.
RESULT_FILE_ENV = "SYNTHFACTORY_RESULT_FILE"  # where the summary goes besides stdout
CATALOG_URI_ENV = "SYNTHFACTORY_CATALOG_URI"  # a URI with a password travels here, not argv
# The endpoint engine (rephrase --engine endpoint): URL and served model may be argv too;
# the API key only ever travels here (a connection's password, or a Kubernetes Secret).
ENDPOINT_URL_ENV = "SYNTHFACTORY_ENDPOINT_URL"
ENDPOINT_MODEL_ENV = "SYNTHFACTORY_ENDPOINT_MODEL"
ENDPOINT_API_KEY_ENV = "SYNTHFACTORY_ENDPOINT_API_KEY"
DEBUG_ENV = "SYNTHFACTORY_DEBUG"  # 1: tracebacks instead of one-line errors
HOME_ENV = "SYNTHFACTORY_HOME"  # the embedded catalog, models and data live under it
GPU_HOUR_USD_ENV = "SYNTHFACTORY_GPU_HOUR_USD"  # the report's device-hour price
PROGRESS_SECONDS_ENV = "SYNTHFACTORY_PROGRESS_SECONDS"  # rephrase's progress log period
# A step's Prometheus labels, set by its runner from the task instance (synthfactory/metrics/)
METRIC_LABEL_ENV = {"dag_id": "SYNTHFACTORY_DAG_ID", "run_id": "SYNTHFACTORY_RUN_ID",
                    "task": "SYNTHFACTORY_TASK_ID", "map_index": "SYNTHFACTORY_MAP_INDEX"}
PUSHGATEWAY_ENV = "SYNTHFACTORY_PUSHGATEWAY"  # host:port or URL: where steps push metrics
# The Pushgateway job of every group the steps and the capacity sensor push; write_report
# deletes a run's groups of this job
METRICS_JOB = "synthfactory"
TRY_NUMBER_ENV = "SYNTHFACTORY_TRY_NUMBER"  # the task's attempt, a metric's value (not a label)
# A pod's step serves its metrics on this port (the kubernetes runner sets it, with the
# pod's named port `metrics`); a local step never has it: one host, many steps, no port
METRICS_PORT_ENV = "SYNTHFACTORY_METRICS_PORT"
METRICS_ADDR_ENV = "SYNTHFACTORY_METRICS_ADDR"  # the address to serve on; 0.0.0.0 unset
PAUSE_AT_ENV = "SYNTHFACTORY_PAUSE_AT"  # fault tests: stop at a named point...
PAUSE_MARKER_ENV = "SYNTHFACTORY_PAUSE_MARKER"  # ...announce it in this file...
PAUSE_RELEASE_ENV = "SYNTHFACTORY_PAUSE_RELEASE"  # ...and wait for this one

# The prompt styles shipped in synthfactory/templates/, in the trigger form's order: the
# web-prose ones, the Nemotron-CC tasks for high-quality web text, then code and math.
STYLES = ("encyclopedic", "easy", "qa", "tutorial", "summary", "faq", "distill",
          "knowledge_list", "code_tutorial", "code_commented", "math_solution", "math_textbook")
DEFAULT_GPU_HOUR_USD = 2.50  # an on-demand H100-class hour, order of magnitude
DEFAULT_CATALOG_NAME = "synthfactory"  # the pyiceberg catalog name steps use by default
MAX_KEYS_CAP = 1000  # S3's ListObjectsV2 returns at most 1,000 keys a request

# the Hugging Face token of `export --hub-repo`: what huggingface_hub itself reads; set
# from the DAG's hub_conn_id (local runner) or the worker Secret (Kubernetes)
HUB_TOKEN_ENV = "HF_TOKEN"
