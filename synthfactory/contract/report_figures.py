"""The figures of report.json that the run's JSON files alone give, computed once for
the engine's ``synthfactory report`` and for the UI's view of a run without a report.

The engine adds what needs the parquet parts (rows of a shard still running, rephrase
quarantine reasons, prompt tokens, length statistics, examples, rejected examples)
through the keyword arguments; the UI leaves them out and gets the same shape with
those figures empty. The quality gate's counts come from the validation files, so the
UI's view of a run still going shows them too.
"""

from __future__ import annotations

import datetime as dt
import re
from collections import Counter
from collections.abc import Iterable, Mapping

from synthfactory.contract import paths
from synthfactory.contract.run_folder import RunFiles, ShardFiles
from synthfactory.contract.shapes import (
    ReportAttempts,
    ReportCost,
    ReportDomainYield,
    ReportExample,
    ReportJson,
    ReportLengths,
    ReportProgress,
    ReportQuality,
    ReportRejectedExample,
    ReportShard,
    ReportStitch,
    ReportTokenYield,
)

_KIND_END = re.compile(r"\s*[(:]")
# Stitch's reasons for a seed left out by --min-quality (synthfactory/stitch/job.py):
# "quality below threshold 0.5" carries the threshold, so kinds are matched by prefix.
BELOW_MIN_QUALITY = "quality below threshold"
NO_QUALITY = "quality missing"


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


def share(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None


ENGINE_CHOICE_KEYS = ("dtype", "dtype_reason", "engine_core", "hardware", "tuned")


def engine_choices(files: RunFiles) -> list[dict]:
    """The distinct engine choices the committed shards ran with (one, unless the
    groups ran on different hardware), each with how many shards it ran."""
    seen: dict[str, dict] = {}
    for shard in files.shards:
        choice = (shard.commit or {}).get("engine_choice") or {}
        if not choice:
            continue
        picked = {k: choice.get(k) for k in ENGINE_CHOICE_KEYS}
        key = repr(sorted(picked.items(), key=lambda kv: kv[0]))
        seen.setdefault(key, {**picked, "shards": 0})["shards"] += 1
    return list(seen.values())


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
    timings = commit.get("timings") or {}
    generation_s = timings.get("generation_s")
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
        "wall_s": timings.get("wall_s"),
        "startup_s": timings.get("startup_s"),
        "generating_fraction": timings.get("generating_fraction"),
        "rows_flagged": validation.get("rows_flagged"),
        "flags": validation.get("flags"),
        "usable": (validation.get("quality") or {}).get("usable"),
    }


SLOWEST = 3  # shards the progress section names


def progress_figures(plan: dict, files: RunFiles, shards: list[ReportShard]) -> ReportProgress:
    """The run against its plan, from the committed shards: rows and tokens done, the rate
    of every shard group together over the window from the first committed shard's start
    to the last one's end, the time left at that rate, and the slowest shards. The same
    figures in report.json and in the UI's view of a run still running."""
    committed = {s["name"]: s for s in shards if s["committed"]}
    rows_planned = plan.get("prompt_rows")
    rows_done = sum(s["rows_in"] or 0 for s in committed.values())
    tokens = sum(s["output_tokens"] for s in committed.values())
    times = [((shard.commit or {}).get("timings") or {}) for shard in files.shards
             if shard.name in committed]
    starts = [_instant(t.get("started")) for t in times]
    ends = [_instant(t.get("finished")) for t in times]
    window = (max(e for e in ends if e) - min(s for s in starts if s)).total_seconds() \
        if any(starts) and any(ends) else None
    rate = rows_done / window if window else None
    slow = sorted((s for s in committed.values() if s["wall_s"] is not None),
                  key=lambda s: (-s["wall_s"], s["name"]))[:SLOWEST]
    return {
        "rows_planned": rows_planned,
        "rows_done": rows_done,
        "done_share": share(rows_done, rows_planned or 0),
        "output_tokens": tokens,
        "window_s": round(window, 3) if window is not None else None,
        "rows_per_s": round(rate, 4) if rate else None,
        "tokens_per_s": per_second(tokens, window),
        "eta_s": (round(max(rows_planned - rows_done, 0) / rate, 1)
                  if rate and rows_planned is not None else None),
        "slowest": [{"name": s["name"], "wall_s": s["wall_s"],
                     "tokens_per_s": s["tokens_per_s"]} for s in slow],
    }


def _instant(value: str | None) -> dt.datetime | None:
    try:
        return dt.datetime.fromisoformat(value) if value else None
    except ValueError:
        return None


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


def pre_gate(path: str) -> str:
    """The ``missing`` line of a validation file written before the quality gate."""
    return (f"{path}: no quality verdicts (validated before the quality gate; "
            "rerun shard.validate)")


def quality_figures(files: RunFiles,
                    examples: list[ReportRejectedExample] | None = None
                    ) -> tuple[ReportQuality | None, float, list[str]]:
    """The gate's counts over the shards whose validation holds them, the device-seconds
    of those shards (for the cost per usable token), and a ``missing`` line per
    validation file from before the gate. None when no shard was gated."""
    gated = [s for s in files.shards if s.validation and s.validation.get("quality")]
    old = [paths.validation(s.name) for s in files.shards
           if s.validation and not s.validation.get("quality")]
    if not gated:
        return None, 0.0, [pre_gate(p) for p in old]
    reasons: Counter = Counter()
    contaminated_by: Counter = Counter()
    by_template: dict[str, Counter] = {}
    usable = rejected = tokens = 0
    generation_s = device_s = 0.0
    for shard in gated:
        quality = shard.validation["quality"]
        usable += quality["usable"]
        rejected += quality["rejected"]
        tokens += quality["usable_output_tokens"]
        reasons.update(quality["reasons"])  # every reason, zeros too
        contaminated_by.update(quality.get("contaminated_by") or {})
        for template, counts in quality["by_template"].items():
            by_template.setdefault(template, Counter()).update(counts)
        commit = shard.commit or {}
        generation_s += (commit.get("timings") or {}).get("generation_s") or 0
        device_s += commit.get("device_seconds") or 0
    report: ReportQuality = {
        "shards_gated": len(gated),
        "rows": usable + rejected,
        "usable": usable,
        "rejected": rejected,
        "yield": share(usable, usable + rejected),
        "reasons": dict(reasons),
        "contaminated_by": dict(sorted(contaminated_by.items())),
        "by_template": {t: {"generated": c["generated"], "usable": c["usable"],
                            "yield": share(c["usable"], c["generated"]),
                            **template_token_yield(files.joined, t)}
                        for t, c in sorted(by_template.items())},
        "by_domain": domain_token_yield(files.joined),
        "usable_output_tokens": tokens,
        "usable_tokens_per_s": per_second(tokens, generation_s),
        "usable_tokens_per_device_s": per_second(tokens, device_s),
        "examples": examples or [],
    }
    return report, device_s, [pre_gate(p) for p in old]


def template_token_yield(joined: dict | None, template: str) -> dict:
    """A template's joined rows, their seed tokens, the usable ones' output tokens and
    the ratio of the two; None before the join (the chunks' counts are not documents)."""
    t = ((joined or {}).get("by_template") or {}).get(template)
    if t is None:
        return {"joined": None, "source_tokens": None, "usable_tokens": None,
                "token_yield": None}
    return {"joined": t["rows"], "source_tokens": t["source_tokens"],
            "usable_tokens": t["usable_output_tokens"],
            "token_yield": share(t["usable_output_tokens"], t["source_tokens"])}


def domain_token_yield(joined: dict | None) -> dict[str, ReportDomainYield]:
    """The join's counts by the documents' domain: joined and usable rows, their yield,
    seed tokens, usable output tokens and the token yield; {} before the join (or a
    join from before domains)."""
    return {d: {"joined": g["rows"], "usable": g["usable"],
                "yield": share(g["usable"], g["rows"]),
                "source_tokens": g["source_tokens"], "usable_tokens": g["usable_output_tokens"],
                "token_yield": share(g["usable_output_tokens"], g["source_tokens"])}
            for d, g in sorted(((joined or {}).get("by_domain") or {}).items())}


def token_yield_figures(plan: dict, joined: dict | None) -> ReportTokenYield:
    """Seed documents and tokens in, what the prompts covered, and the usable synthetic
    tokens the join counted out: yield = usable tokens / seed tokens. A run stitched
    before seed tokens were counted has None for them (and for the yield)."""
    seed, covered = plan.get("seed_tokens"), plan.get("covered_tokens")
    usable = joined["usable_output_tokens"] if joined else None
    return {
        "seed_documents": plan.get("rows_in"),
        "seed_tokens": seed,
        "chunked_documents": plan.get("chunked_documents"),
        "chunks": plan.get("chunks"),
        "covered_tokens": covered,
        "covered_share": share(covered, seed) if seed and covered is not None else None,
        "joined_rows": joined["joined"] if joined else None,
        "usable_rows": joined["usable"] if joined else None,
        "usable_tokens": usable,
        "yield": share(usable, seed) if seed and usable is not None else None,
    }


def attempts_figures(files: RunFiles) -> ReportAttempts:
    """Attempts per row, usable share after each attempt and generated tokens per usable
    token, from the commits (what the engine made) and the join (what was kept). A
    commit from before attempts were kept made one attempt a row."""
    commits = [s.commit for s in files.shards if s.commit]
    rows = sum(c.get("rows_in") or 0 for c in commits)
    made, chosen, limits = 0, Counter(), []
    for c in commits:
        a = c.get("attempts")
        if a is None:
            made += c.get("rows_in") or 0
            chosen["1"] += c.get("rows_generated") or 0
            continue
        made += a["made"]
        chosen.update(a["chosen_at"])
        limits.append(a["max_attempts"])
    generated = sum(c.get("output_tokens") or 0 for c in commits)
    joined = files.joined
    after: dict[str, float | None] = {}
    if joined:
        usable_at = {int(k): n for k, n in (joined.get("usable_at_attempt") or {}).items()}
        last = max([*usable_at, *limits, 1])
        running = 0
        for k in range(1, last + 1):
            running += usable_at.get(k, 0)
            after[str(k)] = share(running, joined["joined"])
    usable = joined["usable_output_tokens"] if joined else None
    return {
        "max_attempts": max(limits) if limits else (1 if commits else None),
        "rows": rows, "made": made, "per_row": round(made / rows, 4) if rows else None,
        "chosen_at": dict(sorted(chosen.items(), key=lambda kv: int(kv[0]))),
        "usable_share_after": after,
        "chunked_usable": joined.get("chunked_usable") if joined else None,
        "chunked_saved": joined.get("chunked_saved") if joined else None,
        "trimmed": joined.get("trimmed") if joined else None,
        "generated_tokens": generated,
        "usable_tokens": usable,
        "generated_per_usable": round(generated / usable, 4) if usable else None,
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
    quality, gated_device_s, pre_gate_lines = quality_figures(files, rejected_examples)
    validated = [s.validation for s in files.shards if s.validation]
    truncated = sum((v.get("flags") or {}).get("truncated", 0) for v in validated)
    missing = [*files.missing, *pre_gate_lines]
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
        "figures": {},
    }
