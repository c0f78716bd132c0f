"""Cutting prompt rows into shards by a token budget, scalably and deterministically.

A shard's cost on failure is its GPU time, so shards are cut by estimated tokens
(prompt + max new tokens), not by rows. Rows are globally ordered; each Spark
partition's token total is collected (one number per partition), turned into prefix
offsets on the driver, and every row gets ``shard = floor(tokens_before_row / budget)``.
Every shard but the last then sums to the budget within one row's tokens.
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
import pyarrow.compute as pc


def partition_totals(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` body: (partition id, token total) of this partition."""
    from pyspark import TaskContext

    total = sum(pc.sum(b.column("cost_tokens")).as_py() or 0 for b in batches)
    yield pa.RecordBatch.from_arrays(
        [pa.array([TaskContext.get().partitionId()], pa.int32()), pa.array([total], pa.int64())],
        names=["partition", "tokens"],
    )


def assign_shards(
    batches: Iterator[pa.RecordBatch], offsets: dict[int, int], budget: int
) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` body: add a ``shard`` column from the partition's token offset."""
    from pyspark import TaskContext

    running = offsets[TaskContext.get().partitionId()]
    for batch in batches:
        cost = batch.column("cost_tokens").to_numpy()
        before = running + cost.cumsum() - cost
        running += int(cost.sum())
        shard = pa.array(before // budget, pa.int64())
        yield pa.RecordBatch.from_arrays(
            [*batch.columns, shard], names=[*batch.schema.names, "shard"]
        )


def prefix_offsets(totals: dict[int, int], partitions: int) -> dict[int, int]:
    offsets, running = {}, 0
    for pid in range(partitions):
        offsets[pid] = running
        running += totals.get(pid, 0)
    return offsets
