"""report.json's shape from the run's JSON files: cost, stitch, and the whole report."""

from __future__ import annotations

from synthfactory.contract.report_shapes import (
    ReportCost,
    ReportExample,
    ReportJson,
    ReportLengths,
    ReportRejectedExample,
    ReportShard,
    ReportStitch,
)
from synthfactory.contract.run_folder import RunFiles
from synthfactory.report_figures.counts import (
    BELOW_MIN_QUALITY,
    NO_QUALITY,
    count_kinds,
    per_second,
    reason_kind,
    share,
)
from synthfactory.report_figures.quality import quality_figures
from synthfactory.report_figures.shards import engine_choices, progress_figures
from synthfactory.report_figures.yields import (
    attempts_figures,
    replay_figures,
    token_yield_figures,
)


def _per_1b(usd: float, tokens: int) -> float | None:
    return round(usd / tokens * 1e9, 2) if tokens else None


def cost_figures(device_seconds: float, output_tokens: int, gpu_hour_usd: float,
                 gated_device_seconds: float = 0.0, usable_tokens: int = 0) -> ReportCost:
    """Cost of the committed shards; per usable token, of the gated shards only (a shard
    not validated yet has no usable tokens, and would inflate the price)."""
    hours = device_seconds / 3600
    usd = hours * gpu_hour_usd
    return {
        "gpu_hour_usd": gpu_hour_usd,
        "device_hours": round(hours, 6),
        "usd": round(usd, 6),
        "usd_per_1b_output_tokens": _per_1b(usd, output_tokens),
        "usd_per_1b_usable_tokens": _per_1b(gated_device_seconds / 3600 * gpu_hour_usd,
                                            usable_tokens),
    }


def stitch_figures(plan: dict, stitch_reasons: dict[str, int]) -> ReportStitch:
    """Documents in, set aside (by kind), selected by quality, and stitched into prompts."""
    reasons = plan.get("quarantine_reasons") or stitch_reasons
    has_plan = bool(plan)
    below = sum(n for r, n in reasons.items() if reason_kind(r).startswith(BELOW_MIN_QUALITY))
    missing = sum(n for r, n in reasons.items() if reason_kind(r) == NO_QUALITY)
    rows_in, quarantined = plan.get("rows_in"), plan.get("quarantined")
    return {
        "documents_in": rows_in,
        "documents_quarantined": quarantined,
        "quarantined_by_reason": dict(sorted(stitch_reasons.items())),
        "prompt_rows": plan.get("prompt_rows"),
        "documents_below_min_quality": below if has_plan else None,
        "documents_without_quality": missing if has_plan else None,
        "documents_stitched": (None if rows_in is None or quarantined is None
                               else rows_in - quarantined),
    }


def build_report(
    run_url: str, files: RunFiles, shards: list[ReportShard], *,
    stitch_reasons: dict[str, int] | None = None,
    rephrase_reasons: dict[str, int] | None = None,
    prompt_tokens: int | None = None,
    gpu_hour_usd: float | None = None,
    lengths: ReportLengths | None = None,
    examples: list[ReportExample] | None = None,
    rejected_examples: list[ReportRejectedExample] | None = None,
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
    wall_s = sum(s["wall_s"] or 0 for s in committed)
    startups = [s["startup_s"] for s in committed if s["startup_s"]]  # 0: engine was running
    if stitch_reasons is None:
        stitch_reasons = count_kinds(plan.get("quarantine_reasons") or {})
    quality, gated_device_s = quality_figures(files, rejected_examples)
    validated = [s.validation for s in files.shards if s.validation]
    truncated = sum((v.get("flags") or {}).get("truncated", 0) for v in validated)
    missing = [*files.missing, *files.outdated]
    return {
        "run_url": run_url,
        "complete": not missing,
        "missing": missing,
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
        "stitch": stitch_figures(plan, stitch_reasons),
        "rephrase": {
            "shards_committed": len(committed),
            "rows_in": sum(s["rows_in"] or 0 for s in shards),
            "rows_generated": sum(s["rows_generated"] for s in shards),
            "rows_quarantined": sum(s["rows_quarantined"] for s in shards),
            "quarantined_by_reason": dict(sorted((rephrase_reasons or {}).items())),
            "rows_flagged": sum(s["rows_flagged"] or 0 for s in shards),
            "rows_truncated": truncated if validated else None,
            "truncated_share": share(truncated, sum(v.get("rows", 0) for v in validated)),
        },
        "tokens": {
            "prompt": prompt_tokens,
            "output": output_tokens,
            "generation_s": round(generation_s, 3),
            "tokens_per_s": per_second(output_tokens, generation_s),
            "device_seconds": round(device_s, 3),
            "devices": sorted({s["device"] for s in committed if s["device"]}),
            "engines": engine_choices(files),
            "startup_s": round(sum(startups), 3),
            "engine_starts": len(startups),
            "wall_s": round(wall_s, 3),
            "generating_fraction": round(generation_s / wall_s, 4) if wall_s else None,
        },
        "progress": progress_figures(plan, files, shards),
        "cost": None if gpu_hour_usd is None else cost_figures(
            device_s, sum(s["output_tokens"] for s in committed), gpu_hour_usd,
            gated_device_s, quality["usable_output_tokens"] if quality else 0),
        "shards": shards,
        "lengths": lengths,
        "examples": examples or [],
        "quality": quality,
        "token_yield": token_yield_figures(plan, files.joined),
        "attempts": attempts_figures(files),
        "replay": replay_figures(files),
        "figures": {},
    }
