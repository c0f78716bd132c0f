"""The JSON files of a run folder and the step summaries the DAG reads, as TypedDicts.

report.json's shapes are in ``report_shapes`` (read by people, they change with the
report's sections; these change with the steps).

Each shape lists what its writer writes today (tests/integration/engine/
test_contract.py runs a real run and checks every file against these, and
docs/contracts.md against both). Readers of older folders still use ``.get``.

No ``from __future__ import annotations`` here: TypedDict needs real annotations
to tell ``NotRequired`` keys apart.
"""

from typing import Any, NotRequired, TypedDict

# -- prompts/shards.json (stitch) ------------------------------------------------------


class ShardEntry(TypedDict):
    name: str  # shard-00000
    url: str  # the prompt shard's parquet URL
    rows: int
    tokens: int  # estimated prompt + max new tokens: what the shard budget counts


class TemplateEntry(TypedDict):
    id: str
    version: int
    style: str
    hash: str  # sha256 of the template's canonical JSON, as the prompt rows' template_hash


class RoutingEntry(TypedDict):
    url: str  # the routing.json in effect: the templates folder's, else the shipped one
    hash: str  # sha256 of its canonical JSON (what lineage records)
    table: dict[str, Any]  # the table itself: buckets and routes (ADR 0139)


class ShardsJson(TypedDict):
    shards: list[ShardEntry]
    templates: list[TemplateEntry]
    # a RoutingEntry, None when no routing table is in effect (stitch --routing off); typed
    # as a plain dict so that the shape's keys are the one key docs/contracts.md lists and
    # the unrouted contract run writes (null)
    routing: dict[str, Any] | None
    rows_in: int  # documents read
    # (rows_in - quarantined - chunked_documents + chunks) * styles_per_doc without
    # routing; with it each document's K is min(styles_per_doc, templates of its route)
    prompt_rows: int
    quarantined: int  # documents set aside at stitch
    quarantine_reasons: dict[str, int]  # full reason text -> documents
    quarantine_url: str | None  # the stitch quarantine folder; None when nothing is there
    chunked_documents: int  # documents too long for the window, cut into chunks
    chunks: int  # their chunks: each one prompt row per style
    # tokens of every document read and tokenised, each once; a document set aside before
    # tokenising (a bad row, a repeated id, below the quality threshold) counts 0
    seed_tokens: int
    # seed tokens of the documents that became prompt rows, each once (not per style): the
    # sum of source_tokens over one style's rows (a chunked document: its chunks' counts)
    covered_tokens: int
    styles_per_doc: int
    shard_tokens: int
    max_new_tokens: int | str  # a fixed budget, or "auto" (per row: the shards' column)
    max_model_len: int  # the window the prompts were cut for; plan passes it to rephrase
    seed: int
    files: int  # seed files the manifest listed
    # the folder's format (contract/run_format.py RUN_FORMAT); a folder of an older engine
    # has none, and its readers tell its format from what its files lack
    run_format: int
    # what the prompts were made from, as one hash (stitch/inputs.py): a stitch from the
    # same inputs has nothing to do. Absent from folders of older engines (and from a
    # benchmark's own stitch), which are then stitched again
    inputs: NotRequired[str]


# -- generated/{shard}/_COMMITTED.json (rephrase) --------------------------------------


class CommitPart(TypedDict):
    name: str  # part-00000.parquet
    rows: int  # generated rows in it
    quarantined: int  # rows of the same part under quarantine/rephrase/{shard}/


class QuarantinePart(TypedDict):
    name: str
    rows: int


class CommitTimings(TypedDict):
    started: str  # ISO 8601, UTC
    finished: str
    wall_s: float
    startup_s: float  # waiting for the engine to start: the task's first shard pays it
    generation_s: float
    generating_fraction: float | None  # generation_s / wall_s; None for a zero wall time


class CommitAttempts(TypedDict):
    max_attempts: int
    repair: str  # trim or none (--repair)
    made: int
    chosen_at: dict[str, int]


class CommitReplay(TypedDict):
    """Attempts replayed from earlier commits, not generated (docs/adr/0150)."""

    rows: int  # rows whose chosen attempt was replayed
    attempts: int
    tokens: int  # their output tokens (not in the commit's output_tokens)
    keys: bool  # the attempts carry request keys (False: a worker run without them)
    lookup: bool  # --replay on (False without keys)
    keys_looked_up: int  # the shard's one lookup: keys, seconds
    lookup_s: float
    basis: dict[str, Any]  # the key's engine, model identity, output settings, seeded ({})


class CommittedJson(TypedDict):
    shard: str
    prompt_shard: str  # URL
    rows_in: int  # = rows_generated + rows_quarantined
    rows_generated: int
    rows_quarantined: int
    parts: list[CommitPart]
    quarantine_parts: list[QuarantinePart]
    prompt_tokens: int
    output_tokens: int  # every attempt's: what the engine generated (docs/adr/0141)
    # the rows' attempts: max_attempts, made in all, and rows by the attempt chosen
    # ("1", "2", ...); absent in commits from before attempts were kept
    attempts: NotRequired[CommitAttempts]
    replay: NotRequired[CommitReplay]  # absent in commits from before docs/adr/0150
    prompt_checksum: str  # sha256:...
    output_checksum: str
    model: str
    engine_args: dict[str, Any]
    # hardware, dtype, dtype_reason, tuned, engine_core(_reason), max_model_len(_reason),
    # kv_cache_*: why the offline engine ran as it did ({} for other engines and commits
    # before it existed)
    engine_choice: NotRequired[dict[str, Any]]
    sampling: dict[str, Any]
    timings: CommitTimings
    device_seconds: float
    device: str  # cpu, cuda, or none when nothing was left to generate


# -- validation/{shard}.json (validate) ------------------------------------------------


class LengthStats(TypedDict):
    count: int
    min: int
    p50: float
    p90: float
    p99: float
    max: int
    mean: float


class ValidationFlags(TypedDict):
    empty: int
    truncated: int
    repetition: int
    refusal: int


class TemplateYield(TypedDict):
    generated: int
    usable: int


class QualityCounts(TypedDict):
    usable: int  # rows the gate let through (what register puts in the table)
    rejected: int  # rows with at least one reason (verdicts/ and rejected/)
    reasons: dict[str, int]  # every reason of the gate's vocabulary -> rows
    usable_output_tokens: int
    by_template: dict[str, TemplateYield]
    # benchmark -> rows contaminated by it (validate --benchmarks); absent before it
    contaminated_by: NotRequired[dict[str, int]]


class Decontamination(TypedDict):
    url: str  # the benchmarks folder (or file)
    n: int  # words per n-gram
    benchmarks: list[str]  # the benchmarks' names: their files' stems
    # benchmark -> the columns of its file that were read; absent in files validated before
    columns: NotRequired[dict[str, list[str]]]


class ValidationJson(TypedDict):
    shard: str
    rows: int  # generated rows validated
    rows_in: int
    rows_quarantined: int
    output_tokens: LengthStats
    flags: ValidationFlags
    rows_flagged: int
    quality: QualityCounts  # the quality gate's verdicts (docs/quality.md)
    # the benchmarks the rows were checked against (validate --benchmarks); absent without
    decontamination: NotRequired[Decontamination]


# -- joined/_JOINED.json (join; also its XCom) -----------------------------------------


class JoinedTemplate(TypedDict):
    rows: int  # joined rows (documents) of the template
    usable: int
    source_tokens: int  # seed tokens those rows rephrase (the prompt rows' source_tokens)
    usable_output_tokens: int


class GroundingEnding(TypedDict):
    rows: int  # usable joined rows that ended this way
    output_source_ratio: float | None  # median output words / source words
    content_kept: float | None  # median share of the source's content kept
    grounded: float | None  # median share of the output's content its source has


class JoinedGrounding(TypedDict):
    """The usable joined rows by the band of their ``grounded`` score ("0.0-0.5",
    "0.5-0.7", "0.7-0.9", "0.9-1.0"; "unscored" only where some are), overall, by
    template and by domain, and the medians by how they ended (docs/adr/0148)."""

    bands: dict[str, int]
    by_template: dict[str, dict[str, int]]
    by_domain: dict[str, dict[str, int]]
    by_ending: dict[str, GroundingEnding]  # "stopped", "trimmed"


class JoinedPart(TypedDict):
    name: str  # shard-00003.parquet
    rows: int


class JoinedJson(TypedDict):
    generated: int  # generated rows read (chunks and whole documents)
    joined: int  # rows written: one per document and template
    chunked: int  # of them, documents of more than one chunk
    chunks_joined: int  # generated rows inside joined rows (= generated - chunks_left_out)
    usable: int  # joined rows whose every chunk the gate let through
    rejected: int  # joined rows with a rejected chunk (docs/adr/0136)
    left_out: int  # documents x templates not joined: a chunk quarantined at rephrase
    chunks_left_out: int  # their generated chunks, not joined
    source_tokens: int
    usable_output_tokens: int  # the tokens the usable rows keep (a trimmed chunk's part)
    # usable rows by the latest attempt their chunks needed ("1", "2", ...; docs/adr/0141)
    usable_at_attempt: dict[str, int]
    chunked_usable: int  # usable rows of chunked documents
    chunked_saved: int  # of them, usable only thanks to a chunk's later attempt
    trimmed: int  # usable rows with a trimmed chunk (quality/repair.py)
    by_template: dict[str, JoinedTemplate]
    # the same counts by the documents' domain (web, code, math; "unknown": a run
    # stitched before domains); adds up to joined, usable and the token sums (ADR 0139)
    by_domain: dict[str, JoinedTemplate]
    # the usable rows' grounding (None: joined before scores were kept; ADR 0148)
    grounding: JoinedGrounding | None
    parts: list[JoinedPart]
    commits: dict[str, str]  # shard -> the output checksum of the commit it joined


# -- manifest/_SUMMARY.json (crawl; also its XCom) -------------------------------------


class ManifestSummary(TypedDict):
    objects: int
    bytes: int
    partitions: int
    manifest_url: str
    requests: int
    source: str
    interval_start: str | None
    interval_end: str | None
    partition_template: str | None
    partition_columns: list[str]
    scope: str | None
    parts: int
    requests_this_run: int
    retries: int
    resumed: bool
    skipped: dict[str, int]
    workers: int
    wall_s: float
    warnings: list[str]


# -- step summaries the DAG reads ------------------------------------------------------


class PlanGroup(TypedDict):
    """One entry of ``synthfactory plan``'s summary: one mapped ``shard`` task group."""

    shards: list[str]
    tokens: int
    rows: int
    rephrase: list[str]  # the group's finished argv, without the console script
    validate: list[str]
