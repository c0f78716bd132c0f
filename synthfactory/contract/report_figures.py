"""The figures of report.json that the run's JSON files alone give, computed once for
the engine's ``synthfactory report`` and for the UI's view of a run without a report.

The engine adds what needs the parquet parts (rows of a shard still running, rephrase
quarantine reasons, prompt tokens, length statistics, examples) through the keyword
arguments; the UI leaves them out and gets the same shape with those figures empty.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping

from synthfactory.contract.run_folder import RunFiles, ShardFiles
from synthfactory.contract.shapes import (
    ReportCost,
    ReportExample,
    ReportJson,
    ReportLengths,
    ReportShard,
)

_KIND_END = re.compile(r"\s*[(:]")


def reason_kind(reason: str | None) -> str:
    """``too long for the context window (900 prompt + ...)`` -> ``too long for the context
    window``: reasons carry per-row detail after ``(`` or ``:``; reports count kinds."""
    return _KIND_END.split(reason or "unknown", maxsplit=1)[0].strip() or "unknown"


def count_kinds(reasons: Mapping[str, int] | Iterable[str]) -> dict[str, int]:
    """Rows by reason kind, sorted: from {reason: rows} or from one reason per row."""
    kinds: Counter = Counter()
    if isinstance(reasons, Mapping):
        for reason, rows in reasons.items():
            kinds[reason_kind(reason)] += int(rows)
    else:
        kinds.update(reason_kind(r) for r in reasons)
    return dict(sorted(kinds.items()))


def per_second(tokens: int, seconds: float | None) -> float | None:
    return round(tokens / seconds, 2) if seconds else None


def shard_figures(shard: ShardFiles, rows_generated: int | None = None,
                  rows_quarantined: int | None = None,
                  output_tokens: int | None = None) -> ReportShard:
    """One shard's row of the report; counts default to its commit's (0 uncommitted)."""
    commit = shard.commit or {}
    validation = shard.validation or {}
    if rows_generated is None:
        rows_generated = int(commit.get("rows_generated") or 0)
    if rows_quarantined is None:
        rows_quarantined = int(commit.get("rows_quarantined") or 0)
    if output_tokens is None:
        output_tokens = int(commit.get("output_tokens") or 0)
    generation_s = (commit.get("timings") or {}).get("generation_s")
    return {
        "name": shard.name,
        "committed": shard.commit is not None,
        "rows_in": commit.get("rows_in", shard.entry.get("rows")),
        "rows_generated": rows_generated,
        "rows_quarantined": rows_quarantined,
        "output_tokens": output_tokens,
        "generation_s": generation_s,
        "tokens_per_s": per_second(output_tokens, generation_s),
        "device_seconds": commit.get("device_seconds"),
        "device": commit.get("device"),
        "rows_flagged": validation.get("rows_flagged"),
        "flags": validation.get("flags"),
    }


def cost_figures(device_seconds: float, output_tokens: int, gpu_hour_usd: float) -> ReportCost:
    hours = device_seconds / 3600
    usd = hours * gpu_hour_usd
    return {
        "gpu_hour_usd": gpu_hour_usd,
        "device_hours": round(hours, 6),
        "usd": round(usd, 6),
        "usd_per_1b_output_tokens": round(usd / output_tokens * 1e9, 2) if output_tokens else None,
    }


def build_report(
    run_url: str, files: RunFiles, shards: list[ReportShard], *,
    stitch_reasons: dict[str, int] | None = None,
    rephrase_reasons: dict[str, int] | None = None,
    prompt_tokens: int | None = None,
    gpu_hour_usd: float | None = None,
    lengths: ReportLengths | None = None,
    examples: list[ReportExample] | None = None,
) -> ReportJson:
    """report.json's shape from the run's JSON files and one ``shard_figures`` per shard.

    ``stitch_reasons`` defaults to shards.json's counts, by kind; device-seconds and
    cost count committed shards only (a shard still running has not paid in full)."""
    plan = files.plan or {}
    manifest = files.manifest
    committed = [s for s in shards if s["committed"]]
    output_tokens = sum(s["output_tokens"] for s in shards)
    generation_s = sum(s["generation_s"] or 0 for s in committed)
    device_s = sum(s["device_seconds"] or 0 for s in committed)
    if stitch_reasons is None:
        stitch_reasons = count_kinds(plan.get("quarantine_reasons") or {})
    return {
        "run_url": run_url,
        "complete": not files.missing,
        "missing": list(files.missing),
        "documents_in": plan.get("rows_in"),
        "manifest": None if manifest is None else {
            "objects": manifest.get("objects"), "bytes": manifest.get("bytes"),
            "partitions": manifest.get("partitions"), "source": manifest.get("source"),
            "interval_start": manifest.get("interval_start"),
            "interval_end": manifest.get("interval_end")},
        "prompts": {
            "rows": plan.get("prompt_rows"),
            "shards": len(plan.get("shards") or []),
            "shard_tokens": plan.get("shard_tokens"),
            "styles_per_doc": plan.get("styles_per_doc"),
            "templates": [t["id"] for t in plan.get("templates") or []],
        },
        "stitch": {
            "documents_in": plan.get("rows_in"),
            "documents_quarantined": plan.get("quarantined"),
            "quarantined_by_reason": dict(sorted(stitch_reasons.items())),
            "prompt_rows": plan.get("prompt_rows"),
        },
        "rephrase": {
            "shards_committed": len(committed),
            "rows_in": sum(s["rows_in"] or 0 for s in shards),
            "rows_generated": sum(s["rows_generated"] for s in shards),
            "rows_quarantined": sum(s["rows_quarantined"] for s in shards),
            "quarantined_by_reason": dict(sorted((rephrase_reasons or {}).items())),
            "rows_flagged": sum(s["rows_flagged"] or 0 for s in shards),
        },
        "tokens": {
            "prompt": prompt_tokens,
            "output": output_tokens,
            "generation_s": round(generation_s, 3),
            "tokens_per_s": per_second(output_tokens, generation_s),
            "device_seconds": round(device_s, 3),
            "devices": sorted({s["device"] for s in committed if s["device"]}),
        },
        "cost": None if gpu_hour_usd is None else cost_figures(
            device_s, sum(s["output_tokens"] for s in committed), gpu_hour_usd),
        "shards": shards,
        "lengths": lengths,
        "examples": examples or [],
        "figures": {},
    }
