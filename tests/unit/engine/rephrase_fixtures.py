"""Builders for prompt shards in the stitch output format (docs/contracts.md)."""

from __future__ import annotations

import pyarrow as pa

from synthfactory import storage


def write_prompt_shard(run_url: str, index: int, rows: int, bad_rows: tuple[int, ...] = ()) -> str:
    url = storage.join(run_url, "prompts", f"shard-{index:05d}.parquet")
    users = [f"Rewrite this. Text:\ndocument number {i} " + ("REJECT " if i in bad_rows else "")
             + "alpha beta gamma delta epsilon zeta eta theta" for i in range(rows)]
    table = pa.table({
        "id": [f"doc-{i:04d}" for i in range(rows)],
        "template_id": ["summary"] * rows,
        "template_version": pa.array([1] * rows, pa.int32()),
        "style": ["summary"] * rows,
        "system": ["You summarise."] * rows,
        "user": users,
        "prompt_tokens": [20] * rows,
        "max_new_tokens": pa.array([32] * rows, pa.int32()),
    })
    storage.write_table(table, url)
    return url
