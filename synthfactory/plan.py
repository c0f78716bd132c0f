"""``synthfactory plan``: group prompt shards for the rephrase wave.

The Airflow layer maps one task per group, so a run with thousands of shards stays
under ``max_map_length`` tasks; each group is a contiguous run of shards balanced by
estimated tokens. The argv of every rephrase and validate task is built here, from the
options after ``--``, so the mapped tasks receive finished argv (Airflow does not
render templates inside mapped XCom values). The summary is the list of groups itself,
because Airflow maps only over a task's return value.

One window from stitch to the engine: every rephrase argv carries ``--max-model-len``,
the context window shards.json says the prompts were cut for (a shards.json from before
stitch recorded it: none, and rephrase keeps its engine's own window).

The gate's options are checked here as validate checks them, so a bad one fails the run
before the rephrase wave spends GPU time: ``--decontaminate-n`` under 5, and each
benchmark file's columns, from its schema alone (quality/decontaminate.py
``check_files``; no row is read).
"""

from __future__ import annotations

import argparse
import logging

from synthfactory import storage
from synthfactory.contract import PlanGroup, steps
from synthfactory.errors import PermanentError, SynthfactoryError
from synthfactory.layout import RunLayout
from synthfactory.quality import decontaminate

ENTRY_KEYS = ("name", "url", "rows", "tokens")
log = logging.getLogger(__name__)


def group_shards(shards: list[dict], max_groups: int) -> list[list[dict]]:
    """Contiguous groups with near-equal token sums (greedy on the running total)."""
    if not shards:
        return []
    count = min(max_groups, len(shards))
    total = sum(s["tokens"] for s in shards)
    groups: list[list[dict]] = [[] for _ in range(count)]
    running = 0
    for shard in shards:
        index = min(count - 1, int(running * count / total)) if total else 0
        groups[index].append(shard)
        running += shard["tokens"]
    return [g for g in groups if g]


def check_entries(shards: list, where: str) -> None:
    """Each entry needs a name, a url and non-negative int rows and tokens (stitch
    writes them; a hand-edited or truncated shards.json may not have them)."""
    for i, entry in enumerate(shards):
        if not isinstance(entry, dict):
            raise PermanentError(f"{where}: shards[{i}] is not an object")
        label = f"{where}: shards[{i}]" + (f" ({entry['name']})" if "name" in entry else "")
        missing = [k for k in ENTRY_KEYS if k not in entry]
        if missing:
            raise PermanentError(f"{label}: missing {', '.join(map(repr, missing))}")
        for key in ("name", "url"):
            if not isinstance(entry[key], str) or not entry[key]:
                raise PermanentError(f"{label}: {key!r} must be a non-empty string")
        for key in ("rows", "tokens"):
            value = entry[key]
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise PermanentError(f"{label}: {key!r} must be a whole number >= 0, "
                                     f"got {value!r}")


def window_flags(plan: dict, options: list[str], where: str) -> list[str]:
    """``--max-model-len N`` from shards.json's ``max_model_len``; [] when it has none.
    The window is the shards', not an option: one given after ``--`` is refused."""
    if "--max-model-len" in steps.read_argv(["rephrase", *options])[1]:
        raise PermanentError("--max-model-len after --: the window comes from "
                             f"{where} (max_model_len, the window stitch cut the prompts "
                             "for); to generate in another window, restitch with it")
    window = plan.get("max_model_len")
    if window is None:
        return []
    if isinstance(window, bool) or not isinstance(window, int) or window < 1:
        raise PermanentError(f"{where}: 'max_model_len' must be a whole number >= 1, "
                             f"got {window!r}")
    return steps.options("rephrase", {"--max-model-len": window})


def map_limit(max_groups: int, max_map_length: int | None, shards: int) -> int:
    """The groups a run may map: ``max_groups``, but never more than the deployment's
    ``max_map_length``, or Airflow would refuse the plan's XCom and fail the run after
    stitch. Merging shards into fewer groups is said in one line (logged), since it
    makes each rephrase task longer than the user asked for."""
    wanted = min(max_groups, shards)
    if max_map_length is None or wanted <= max_map_length:
        return max_groups
    log.warning("plan: %d shard groups wanted (max_shard_groups=%d, %d shards) but this "
                "deployment maps at most %d tasks ([core] max_map_length): %d shards merged "
                "into %d groups", wanted, max_groups, shards, max_map_length, shards,
                max_map_length)
    return max_map_length


def run(args: argparse.Namespace) -> list[PlanGroup]:
    layout = RunLayout(storage.normalize(args.run))
    plan = storage.run_folder(layout.run_url).shards_plan()
    if plan is None:
        raise SynthfactoryError(f"{layout.shards_json}: not found")
    shards = plan.get("shards") if isinstance(plan, dict) else None
    if not isinstance(shards, list):
        raise PermanentError(f"{layout.shards_json}: no 'shards' list")
    check_entries(shards, layout.shards_json)
    options = [o for o in args.rephrase_options if o != "--"]
    options = [*window_flags(plan, options, layout.shards_json), *options]
    decontaminate.check_n(args.decontaminate_n)  # validate's checks, before the GPU's work
    if args.benchmarks:
        decontaminate.check_files(args.benchmarks,
                                  decontaminate.named_columns(args.benchmark_columns))
    limit = map_limit(args.max_shard_groups, args.max_map_length, len(shards))
    groups = group_shards(shards, limit)
    planned: list[PlanGroup] = []
    for group in groups:
        urls = [s["url"] for s in group]
        planned.append({
            "shards": [s["name"] for s in group],
            "tokens": sum(s["tokens"] for s in group),
            "rows": sum(s["rows"] for s in group),
            "rephrase": steps.command("rephrase", {"--shard": urls, "--run": layout.run_url},
                                      options),
            "validate": steps.command("validate", {"--shard": urls, "--run": layout.run_url,
                                                   **steps.gate_values(args)}),
        })
    return planned
