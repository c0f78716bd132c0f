"""report/report.json (the report step) and the Run report's view of it, as TypedDicts.

Split from ``shapes`` (the files the steps write for each other) at the one seam in
it: these shapes are read by people, through the report and the Run report, and change
with the report's sections; the run's own files change with the steps. Both modules
obey the same rules (test_contract.py checks report.json against these, and
docs/contracts.md against both).

No ``from __future__ import annotations`` here: TypedDict needs real annotations
to tell ``NotRequired`` keys apart.
"""

from typing import Any, NotRequired, TypedDict

from synthfactory.contract.shapes import JoinedGrounding, LengthStats, ValidationFlags

# -- report/report.json (report) -------------------------------------------------------


class ReportManifest(TypedDict):
    objects: int | None
    bytes: int | None
    partitions: int | None
    source: str | None
    interval_start: str | None
    interval_end: str | None


class ReportPrompts(TypedDict):
    rows: int | None
    shards: int
    shard_tokens: int | None
    styles_per_doc: int | None
    templates: list[str]


class ReportStitch(TypedDict):
    documents_in: int | None
    documents_quarantined: int | None
    quarantined_by_reason: dict[str, int]  # by kind (reason_kind)
    prompt_rows: int | None
    # seeds selected by quality (--min-quality): counted from the quarantine reasons
    documents_below_min_quality: int | None
    documents_without_quality: int | None
    documents_stitched: int | None  # documents_in - documents_quarantined


class ReportRephrase(TypedDict):
    shards_committed: int
    rows_in: int
    rows_generated: int
    rows_quarantined: int
    quarantined_by_reason: dict[str, int]  # by kind; {} where parts were not read
    rows_flagged: int
    rows_truncated: int | None  # validated rows that stopped at their budget; None: none yet
    truncated_share: float | None  # rows_truncated / rows of the validated shards


class ReportTokens(TypedDict):
    prompt: int | None  # None where the prompt shards were not read
    output: int
    generation_s: float
    tokens_per_s: float | None
    device_seconds: float
    devices: list[str]
    # distinct engine choices of the committed shards (dtype and why, engine core,
    # hardware, the sweep winner's fate), each with its shard count; [] for other engines
    engines: list[dict[str, Any]]
    # the committed shards' time: engine start-up, and the share spent generating
    startup_s: float
    engine_starts: int  # shards that started an engine (the others found it running)
    wall_s: float
    generating_fraction: float | None  # generation_s / wall_s


class ReportSlowShard(TypedDict):
    name: str
    wall_s: float
    tokens_per_s: float | None


class ReportProgress(TypedDict):
    rows_planned: int | None  # shards.json's prompt rows
    rows_done: int  # rows of the committed shards (generated + quarantined)
    done_share: float | None  # rows_done / rows_planned
    output_tokens: int  # of the committed shards
    window_s: float | None  # first committed shard's start to the last one's end
    rows_per_s: float | None  # rows_done / window_s: every shard group together
    tokens_per_s: float | None  # output_tokens / window_s
    eta_s: float | None  # rows left / rows_per_s, from the last commit (None: no rate yet)
    slowest: list[ReportSlowShard]  # the committed shards with the longest wall time


class ReportCost(TypedDict):
    gpu_hour_usd: float
    device_hours: float
    usd: float
    usd_per_1b_output_tokens: float | None
    usd_per_1b_usable_tokens: float | None  # the gated shards' cost over their usable tokens


class ReportShard(TypedDict):
    name: str
    committed: bool
    rows_in: int | None
    rows_generated: int
    rows_quarantined: int
    output_tokens: int
    generation_s: float | None
    tokens_per_s: float | None
    device_seconds: float | None
    device: str | None
    wall_s: float | None  # the commit's timings (None uncommitted, or before they existed)
    startup_s: float | None
    generating_fraction: float | None
    rows_flagged: int | None
    flags: ValidationFlags | None
    usable: int | None  # rows the quality gate let through (None before it ran)


class ReportLengths(TypedDict):
    prompt_tokens: LengthStats
    output_tokens: LengthStats


class ReportExample(TypedDict):
    template_id: str
    style: str | None
    document_id: str
    shard: str
    source_excerpt: str
    rephrasing: str


# "yield" is a keyword: these two shapes use TypedDict's functional form.
ReportTemplateYield = TypedDict("ReportTemplateYield", {
    "generated": int,
    "usable": int,
    "yield": float | None,  # usable / generated
    # from the join (None before it): the template's joined rows, their seed tokens, the
    # usable ones' output tokens, and usable tokens / seed tokens
    "joined": int | None,
    "source_tokens": int | None,
    "usable_tokens": int | None,
    "token_yield": float | None,
})

# A domain's joined rows (documents x templates) and tokens: usable / joined rows, and
# usable output tokens / the seed tokens they rephrase.
ReportDomainYield = TypedDict("ReportDomainYield", {
    "joined": int,
    "usable": int,
    "yield": float | None,  # usable / joined
    "source_tokens": int,
    "usable_tokens": int,
    "token_yield": float | None,  # usable_tokens / source_tokens
})

# The corpus in, the usable synthetic tokens out: what a team plans the next run with.
ReportTokenYield = TypedDict("ReportTokenYield", {
    "seed_documents": int | None,  # documents stitch read
    "seed_tokens": int | None,  # their tokens (shards.json)
    "chunked_documents": int | None,  # documents cut into chunks to fit the window
    "chunks": int | None,
    "covered_tokens": int | None,  # seed tokens in prompt rows (whole or chunked)
    "covered_share": float | None,  # covered / seed tokens
    "joined_rows": int | None,  # one per document and template (None before the join)
    "usable_rows": int | None,
    "usable_tokens": int | None,  # output tokens of the usable joined rows
    "yield": float | None,  # usable tokens / seed tokens
})


class ReportAttempts(TypedDict):
    """What a usable token cost (docs/adr/0141): every attempt the engine made counts."""

    max_attempts: int | None  # the --max-attempts of the committed shards (the largest)
    rows: int  # prompt rows of committed shards
    made: int  # attempts made: generations, retries included
    per_row: float | None  # made / rows
    chosen_at: dict[str, int]  # attempt -> rows whose output is that attempt's
    # joined rows usable by attempt k (their chunks' latest), cumulative, over joined rows
    usable_share_after: dict[str, float | None]
    chunked_usable: int | None  # usable joined rows of chunked documents
    chunked_saved: int | None  # of them, usable only thanks to a later attempt
    trimmed: int | None  # usable joined rows with a trimmed chunk
    generated_tokens: int  # every attempt's output tokens (committed shards)
    usable_tokens: int | None  # what the usable joined rows keep
    generated_per_usable: float | None  # generated / usable tokens: the price's multiplier


class ReportReplay(TypedDict):
    """What the run took from earlier commits instead of generating it (docs/adr/0150)."""

    rows: int  # rows whose chosen attempt was replayed
    attempts: int  # attempts replayed
    tokens: int  # their output tokens: what the engine did not generate again
    generated_tokens: int  # what it generated (the commits' output_tokens)
    replayed_share: float | None  # tokens / (tokens + generated_tokens)
    shards_looked_up: int  # committed shards that looked their keys up (--replay on)
    lookup_s: float  # their lookups' seconds, summed


class ReportRejectedExample(TypedDict):
    reason: str  # the reason this example stands for
    reasons: list[str]  # every reason of the row
    template_id: str
    document_id: str
    shard: str
    row: int
    source_excerpt: str
    output_excerpt: str


ReportQuality = TypedDict("ReportQuality", {
    "shards_gated": int,  # shards whose validation holds the gate's verdicts
    "rows": int,  # rows gated: usable + rejected
    "usable": int,
    "rejected": int,
    "yield": float | None,  # usable / rows
    "reasons": dict[str, int],  # reason -> rows (a row may have several)
    # benchmark -> rows contaminated by it ({}: none, or no --benchmarks)
    "contaminated_by": dict[str, int],
    "by_template": dict[str, ReportTemplateYield],
    # from the join ({} before it): by the documents' domain (ADR 0139)
    "by_domain": dict[str, ReportDomainYield],
    "usable_output_tokens": int,
    "usable_tokens_per_s": float | None,  # per generation second, beside tokens_per_s
    "usable_tokens_per_device_s": float | None,
    "examples": list[ReportRejectedExample],  # one per reason; [] where parquet was not read
    # from the join (None before it, or joined before the scores): the usable rows by
    # grounding band, by template, domain and ending (docs/adr/0148)
    "grounding": JoinedGrounding | None,
})


class ReportJson(TypedDict):
    run_url: str
    complete: bool
    missing: list[str]  # one line per absent file, naming the step that writes it
    documents_in: int | None
    manifest: ReportManifest | None
    prompts: ReportPrompts
    stitch: ReportStitch
    rephrase: ReportRephrase
    tokens: ReportTokens
    progress: ReportProgress  # against the plan: what the UI shows while the run runs
    cost: ReportCost | None  # None where no price was given (the UI's view so far)
    shards: list[ReportShard]
    lengths: ReportLengths | None  # None where the parquet parts were not read
    examples: list[ReportExample]
    quality: ReportQuality | None  # None before any shard was gated (or validated pre-gate)
    token_yield: ReportTokenYield
    attempts: NotRequired[ReportAttempts]  # absent in reports from before docs/adr/0141
    replay: NotRequired[ReportReplay]  # absent in reports from before docs/adr/0150
    # {step: {cause: storage requests tried again}}, {} where none was; absent in reports
    # from before docs/adr/0155
    storage_retries: NotRequired[dict[str, dict[str, int]]]
    figures: dict[str, str]  # figure name -> PNG file name beside report.json
    dag_id: NotRequired[str | None]  # the three set by `synthfactory report`
    airflow_run_id: NotRequired[str | None]
    generated_at: NotRequired[str]


class ReportView(ReportJson):
    """What the UI plugin shows: report.json, or the same shape built from the JSON
    files so far (``so_far``: True) for a run without one."""

    so_far: bool
