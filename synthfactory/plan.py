"""``synthfactory plan``: group prompt shards for the rephrase wave.

The Airflow layer maps one task per group, so a run with thousands of shards stays
under ``max_map_length`` tasks; each group is a contiguous run of shards balanced by
estimated tokens. The argv of every rephrase and validate task is built here, from the
options after ``--``, so the mapped tasks receive finished argv (Airflow does not
render templates inside mapped XCom values). The summary is the list of groups itself,
because Airflow maps only over a task's return value.
"""

from __future__ import annotations

import argparse

from synthfactory import storage
from synthfactory.errors import SynthfactoryError
from synthfactory.layout import RunLayout


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


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--run", required=True, help="run URL (reads prompts/shards.json)")
    parser.add_argument("--max-groups", type=int, required=True,
                        help="at most this many rephrase tasks (<= Airflow's max_map_length)")
    parser.add_argument("rephrase_options", nargs=argparse.REMAINDER,
                        help="-- then options passed to every `synthfactory rephrase`")


def run(args: argparse.Namespace) -> list[dict]:
    if args.max_groups < 1:
        raise SynthfactoryError("--max-groups must be at least 1")
    layout = RunLayout(storage.normalize(args.run))
    plan = storage.read_json(layout.shards_json)
    shards = plan.get("shards")
    if not isinstance(shards, list):
        raise SynthfactoryError(f"{layout.shards_json}: no 'shards' list")
    options = [o for o in args.rephrase_options if o != "--"]
    groups = group_shards(shards, args.max_groups)
    planned = []
    for group in groups:
        shard_flags = [flag for s in group for flag in ("--shard", s["url"])]
        planned.append({
            "shards": [s["name"] for s in group],
            "tokens": sum(s["tokens"] for s in group),
            "rows": sum(s["rows"] for s in group),
            "rephrase": ["rephrase", *shard_flags, "--out", layout.run_url, *options],
            "validate": ["validate", *shard_flags, "--run", layout.run_url],
        })
    return planned
