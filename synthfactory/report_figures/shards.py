"""Each shard's row of the report, the engines the shards ran with, and the run's
progress against its plan."""

from __future__ import annotations

import datetime as dt

from synthfactory.contract.report_shapes import (
    ReportProgress,
    ReportShard,
)
from synthfactory.contract.run_folder import RunFiles, ShardFiles
from synthfactory.report_figures.counts import per_second, share

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
