"""A run's lineage and accounting, in the three shapes it is published in.

One ``RunLineage`` becomes the Iceberg snapshot summary properties (strings under
``synthfactory.``), one row of the ``{namespace}.runs`` table, and the fields of the
register summary that Airflow puts on the table's Asset event.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from datetime import datetime

import pyarrow as pa

from synthfactory.contract import JoinedJson, paths
from synthfactory.run_reader import CommittedRun

PROPERTY_PREFIX = "synthfactory."

# The runs table: one row per (table_name, run_url); JSON columns hold nested lineage.
RUNS_SCHEMA = pa.schema(
    [
        ("table_name", pa.string()),
        ("run_url", pa.string()),
        ("pipeline", pa.string()),
        ("interval", pa.string()),
        ("airflow_run_id", pa.string()),
        ("manifest", pa.string()),
        ("templates", pa.string()),  # JSON list of {id, version, style, hash}
        ("routing_hash", pa.string()),  # the routing table's sha256; null: no routing
        ("model", pa.string()),
        ("engine_args", pa.string()),  # JSON
        ("sampling", pa.string()),  # JSON
        ("device", pa.string()),
        ("shards", pa.int64()),
        ("prompt_rows", pa.int64()),
        ("rows_in", pa.int64()),
        ("rows_generated", pa.int64()),
        ("rows_quarantined", pa.int64()),
        ("rows_flagged", pa.int64()),
        ("rows_usable", pa.int64()),  # the quality gate's usable rows
        ("rows_rejected", pa.int64()),
        ("rows_registered", pa.int64()),  # usable joined rows, or all (include_rejected)
        ("joined_rows", pa.int64()),  # one per document and template (docs/adr/0136)
        ("joined_usable", pa.int64()),
        ("chunked_rows", pa.int64()),  # joined rows of documents cut into chunks
        ("seed_tokens", pa.int64()),  # the documents stitch read (shards.json)
        ("usable_tokens", pa.int64()),  # output tokens of the usable joined rows
        ("token_yield", pa.float64()),  # usable_tokens / seed_tokens
        # what a usable token cost (docs/adr/0141): every attempt's generation counted
        ("attempts_made", pa.int64()),
        ("attempts_per_row", pa.float64()),
        ("usable_at_attempt", pa.string()),  # JSON: attempt -> usable joined rows
        ("chunked_saved", pa.int64()),  # chunked documents usable thanks to a later attempt
        ("generated_per_usable", pa.float64()),  # output_tokens / usable_tokens
        # taken from earlier commits, not generated (docs/adr/0150): output_tokens is
        # what the engine generated, replayed_tokens what it did not have to
        ("replayed_rows", pa.int64()),
        ("replayed_tokens", pa.int64()),
        ("include_rejected", pa.bool_()),
        ("prompt_tokens", pa.int64()),
        ("output_tokens", pa.int64()),
        ("device_seconds", pa.float64()),
        ("snapshot_id", pa.int64()),
        ("registered_at", pa.timestamp("us", tz="UTC")),
    ]
)


@dataclass(frozen=True)
class RunLineage:
    run_url: str
    pipeline: str
    interval: str
    airflow_run_id: str | None
    manifest: str | None
    templates: list[dict]
    routing_hash: str | None  # shards.json's routing hash (ADR 0139); None: not routed
    model: str | None
    engine_args: dict
    sampling: dict
    device: str | None
    shards: int
    prompt_rows: int
    rows_in: int
    rows_generated: int
    rows_quarantined: int
    rows_flagged: int
    quality_flags: dict
    rows_usable: int
    rows_rejected: int
    rows_registered: int
    joined_rows: int
    joined_usable: int
    chunked_rows: int
    seed_tokens: int | None
    usable_tokens: int | None
    token_yield: float | None
    attempts_made: int
    attempts_per_row: float | None
    usable_at_attempt: dict
    chunked_saved: int | None
    generated_per_usable: float | None
    replayed_rows: int
    replayed_tokens: int
    include_rejected: bool
    quality_reasons: dict
    prompt_tokens: int
    output_tokens: int
    device_seconds: float

    def snapshot_properties(self) -> dict[str, str]:
        """Iceberg summary properties must be strings: nested values go in as JSON."""
        out = {}
        for key, value in asdict(self).items():
            if value is None:
                continue
            text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
            out[PROPERTY_PREFIX + key.replace("_", "-")] = text
        return out

    def runs_row(self, table_name: str, snapshot_id: int, registered_at: datetime) -> pa.Table:
        row = asdict(self)
        row.update(table_name=table_name, snapshot_id=snapshot_id, registered_at=registered_at)
        for key in ("templates", "engine_args", "sampling", "usable_at_attempt"):
            row[key] = json.dumps(row[key], sort_keys=True)
        return pa.Table.from_pylist([{f.name: row[f.name] for f in RUNS_SCHEMA}], RUNS_SCHEMA)


def lineage_of(
    run: CommittedRun,
    pipeline: str | None = None,
    interval: str | None = None,
    airflow_run_id: str | None = None,
    include_rejected: bool = False,
    joined: JoinedJson | None = None,
) -> RunLineage:
    # The layout is {root}/{pipeline}/{interval}: flags win, the path is the fallback.
    path_pipeline, path_interval = run.run_url.rstrip("/").rsplit("/", 2)[-2:]
    shards_json = run.shards_json
    flags: dict[str, int] = {}
    for shard in run.shards:
        for flag, count in (shard.validation.get("flags") or {}).items():
            flags[flag] = flags.get(flag, 0) + int(count or 0)
    reasons: dict[str, int] = {}
    for shard in run.shards:
        for reason, count in ((shard.validation.get("quality") or {}).get("reasons")
                              or {}).items():
            reasons[reason] = reasons.get(reason, 0) + int(count or 0)
    usable = sum(shard.rows_usable for shard in run.shards)
    seed_tokens = shards_json.get("seed_tokens")  # None: stitched before it was counted
    usable_tokens = joined["usable_output_tokens"] if joined else None
    generated = int(run.total("rows_generated"))
    # a commit from before attempts were kept made one attempt a row
    made = sum((s.commit.get("attempts") or {}).get("made", s.commit.get("rows_in") or 0)
               for s in run.shards)
    output_tokens = int(run.total("output_tokens"))
    models = sorted({str(s.commit["model"]) for s in run.shards if s.commit.get("model")})
    devices = sorted({str(s.commit["device"]) for s in run.shards if s.commit.get("device")})
    return RunLineage(
        run_url=run.run_url,
        pipeline=pipeline or path_pipeline,
        interval=interval or path_interval,
        airflow_run_id=airflow_run_id,
        manifest=f"{run.run_url}/{paths.MANIFEST}",  # the folder crawl wrote (not in shards.json)
        templates=templates_of(shards_json),
        routing_hash=(shards_json.get("routing") or {}).get("hash"),
        model=", ".join(models) or None,
        engine_args=_one_or_by_shard(run, "engine_args"),
        sampling=_one_or_by_shard(run, "sampling"),
        device=", ".join(devices) or None,
        shards=len(run.shards),
        prompt_rows=int(shards_json.get("prompt_rows", run.total("rows_in"))),
        rows_in=int(run.total("rows_in")),
        rows_generated=generated,
        rows_quarantined=int(run.total("rows_quarantined")),
        rows_flagged=sum(int(s.validation.get("rows_flagged") or 0) for s in run.shards),
        quality_flags=flags,
        rows_usable=usable,
        rows_rejected=generated - usable,
        rows_registered=(joined["joined"] if include_rejected else joined["usable"]) if joined
        else generated if include_rejected else usable,
        joined_rows=joined["joined"] if joined else 0,
        joined_usable=joined["usable"] if joined else 0,
        chunked_rows=joined["chunked"] if joined else 0,
        seed_tokens=seed_tokens,
        usable_tokens=usable_tokens,
        token_yield=(round(usable_tokens / seed_tokens, 4)
                     if seed_tokens and usable_tokens is not None else None),
        attempts_made=made,
        attempts_per_row=round(made / run.total("rows_in"), 4) if run.total("rows_in") else None,
        usable_at_attempt=dict((joined or {}).get("usable_at_attempt") or {}),
        chunked_saved=joined.get("chunked_saved") if joined else None,
        generated_per_usable=(round(output_tokens / usable_tokens, 4) if usable_tokens
                              else None),
        replayed_rows=sum((s.commit.get("replay") or {}).get("rows", 0) for s in run.shards),
        replayed_tokens=sum((s.commit.get("replay") or {}).get("tokens", 0)
                            for s in run.shards),
        include_rejected=include_rejected,
        quality_reasons=reasons,
        prompt_tokens=int(run.total("prompt_tokens")),
        output_tokens=output_tokens,
        device_seconds=round(float(run.total("device_seconds")), 3),
    )


def templates_of(shards_json: dict) -> list[dict]:
    """The run's templates with their content hashes, which the prompt rows carry as
    ``template_hash``: the exact text behind each ``template_id`` of the table's rows.
    A run stitched before hashes were kept has ``hash`` null."""
    return [{"id": t.get("id"), "version": t.get("version"), "style": t.get("style"),
             "hash": t.get("hash")} for t in shards_json.get("templates") or []]


def _one_or_by_shard(run: CommittedRun, key: str) -> dict:
    """The shards' common value, or ``{"by_shard": {...}}`` when retries ran differently."""
    values = {shard.name: shard.commit.get(key) or {} for shard in run.shards}
    distinct = {json.dumps(v, sort_keys=True) for v in values.values()}
    if len(distinct) == 1:
        return next(iter(values.values()))
    return {"by_shard": values}
