"""The estimate's arithmetic: plain numbers in, plain numbers out (no I/O).

Shards are cut so that one takes ``shard_minutes`` of one GPU (what a lost shard may
cost). A daily run maps one task per shard group, one GPU each, so it keeps at most
``min(gpus, max_map_length)`` GPUs busy, and each group must finish within the run's
``run_hours``; the runs' shards are grouped exactly as ``synthfactory plan`` groups them.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

from synthfactory.errors import PermanentError
from synthfactory.plan import group_shards

MAX_MAP_LENGTH = 1024  # Airflow's default [core] max_map_length
SHARD_MINUTES = 20.0  # one lost shard costs at most this much of a GPU (docs/stitch.md)
RUN_HOURS = 24.0  # a daily run ends before the next day's starts
KEYS_PER_LIST = 1000  # S3 ListObjectsV2 returns at most 1,000 keys a request
LIST_USD_PER_1000 = 0.005  # S3 Standard LIST price (assumed, docs/crawl.md)
# Measured: benchmarks/stitch.py, 3,533 docs/s of ~150-token documents on 2 quiet
# cores (docs/stitch.md): ~265,000 source tokens per core-second.
STITCH_TOKENS_PER_CORE_S = 265_000.0


@dataclass(frozen=True)
class Inputs:
    tokens: int  # output tokens wanted
    tokens_per_s_per_gpu: float
    gpus: int
    gpu_hour_usd: float
    source_tokens: float  # the seed documents' tokens, what stitch reads
    startup_s: float = 0.0  # engine start-up, paid once per task (shard group)
    shard_minutes: float = SHARD_MINUTES
    max_map_length: int = MAX_MAP_LENGTH
    run_hours: float = RUN_HOURS
    partitions: int | None = None  # default: one a daily run
    files_per_partition: int | None = None  # default: at most 1,000 (one list request)
    stitch_tokens_per_core_s: float = STITCH_TOKENS_PER_CORE_S


def split(total: int, parts: int) -> list[int]:
    """``total`` as ``parts`` near-equal counts (the first ones one larger)."""
    low, extra = divmod(total, parts)
    return [low + 1] * extra + [low] * (parts - extra)


def estimate(i: Inputs) -> dict:
    shard_s = i.shard_minutes * 60
    shard_tokens = i.tokens_per_s_per_gpu * shard_s
    shards = max(1, math.ceil(i.tokens / shard_tokens))
    busy = min(i.gpus, i.max_map_length)
    per_group = math.floor((i.run_hours * 3600 - i.startup_s) / shard_s)
    if per_group < 1:
        raise PermanentError(
            f"--shard-minutes {i.shard_minutes:g}: one shard plus the engine start-up "
            f"({i.startup_s:g} s) does not fit in a {i.run_hours:g}-hour run (--run-hours)")
    runs = math.ceil(shards / (busy * per_group))
    groups = largest = 0
    wall_s = 0.0
    for size, count in Counter(split(shards, runs)).items():
        # what `synthfactory plan --max-shard-groups busy` makes of a run of equal shards
        sizes = [len(g) for g in group_shards([{"tokens": 1}] * size, busy)]
        groups += len(sizes) * count
        largest = max(largest, len(sizes))
        wall_s += (i.startup_s + max(sizes) * shard_s) * count  # its longest group
    generating_h = i.tokens / i.tokens_per_s_per_gpu / 3600
    startup_h = groups * i.startup_s / 3600
    partitions = i.partitions or runs
    per_partition = math.ceil((i.files_per_partition or 1) / KEYS_PER_LIST)
    requests = partitions * per_partition
    warnings = []
    if i.gpus > busy:
        warnings.append(f"only {busy} of {i.gpus} GPUs get a task: a run maps at most "
                        f"max_map_length ({i.max_map_length}) shard groups; raise Airflow's "
                        "[core] max_map_length or give each task several GPUs (--replicas)")
    return {
        "tokens": i.tokens,
        "tokens_per_s_per_gpu": i.tokens_per_s_per_gpu,
        "gpus": i.gpus,
        "gpus_busy": busy,
        "gpu_hour_usd": i.gpu_hour_usd,
        "generating_gpu_hours": round(generating_h, 3),
        "startup_s_per_task": i.startup_s,
        "startup_gpu_hours": round(startup_h, 3),
        "gpu_hours": round(generating_h + startup_h, 3),
        "wall_clock_hours": round(wall_s / 3600, 3),
        "usd": round((generating_h + startup_h) * i.gpu_hour_usd, 2),
        "shard_minutes": i.shard_minutes,
        "shard_output_tokens": round(shard_tokens),
        "shards": shards,
        "max_map_length": i.max_map_length,
        "run_hours": i.run_hours,
        "shards_per_group_max": per_group,
        "max_shard_groups": largest,
        "shard_groups": groups,
        "runs": runs,
        "partitions": partitions,
        "files_per_partition": i.files_per_partition,
        "crawl_list_requests": requests,
        "crawl_list_usd": round(requests / 1000 * LIST_USD_PER_1000, 4),
        "stitch_source_tokens": round(i.source_tokens),
        "stitch_tokens_per_core_s": i.stitch_tokens_per_core_s,
        "stitch_core_hours": round(i.source_tokens / i.stitch_tokens_per_core_s / 3600, 3),
        "warnings": warnings,
    }
