"""A prompt shard file and a stitch quarantine part: their columns, their rows' order, and
the executors' bodies that write them. Separate from job.py, which plans what goes where;
these run on the executors, one shard or one partition at a time."""

from __future__ import annotations

from collections import Counter

import pyarrow as pa

from synthfactory import storage
from synthfactory.contract import paths
from synthfactory.layout import RunLayout

SHARD_COLUMNS = ["id", "template_id", "template_version", "template_hash", "style", "system",
                 "user", "prompt_tokens", "max_new_tokens", "doc_id", "chunk_index",
                 "chunk_count", "title", "heading_path", "source_tokens", "domain"]
ORDER = ["source", "source_row", "template_id", "chunk_index"]


def write_quarantine(batches, folder: str):
    """``mapInArrow`` body: this partition's quarantine rows -> ``part-{partition}``."""
    from pyspark import TaskContext

    batches = [b for b in batches if b.num_rows]
    if not batches:
        return
    table = pa.Table.from_batches(batches)
    name = f"part-{TaskContext.get().partitionId():05d}.parquet"
    storage.write_table(table, storage.join(folder, name))
    counts = Counter(table.column("reason").to_pylist())
    yield pa.RecordBatch.from_arrays(
        [pa.array(list(counts), pa.string()), pa.array(list(counts.values()), pa.int64())],
        names=["reason", "rows"],
    )


def write_shard(table: pa.Table, run: RunLayout, dense: dict[int, int]) -> pa.Table:
    """``applyInArrow`` body: one shard's rows -> one deterministically named file."""
    index = dense[table.column("shard")[0].as_py()]
    table = table.sort_by([(c, "ascending") for c in ORDER])
    url = run.prompt_shard(index)
    storage.write_table(table.select(SHARD_COLUMNS), url)
    tokens_sum = int(pa.compute.sum(table.column("cost_tokens")).as_py())
    return pa.table({"name": [paths.shard_name(index)], "url": [url], "rows": [table.num_rows],
                     "tokens": [tokens_sum]})
