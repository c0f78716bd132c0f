"""Prompt shards in the stitch output format (docs/contracts.md) for worker tests."""

from __future__ import annotations

from synthfactory import storage
from synthfactory.stitch.prompt_table import prompt_table
from synthfactory.stitch.templates import load_template


def write_prompt_shard(run_url: str, index: int, rows: int, bad_rows: tuple[int, ...] = (),
                       edition: str = "") -> str:
    """``edition`` changes every document's text: the same day's partition, rewritten."""
    url = storage.join(run_url, "prompts", f"shard-{index:05d}.parquet")
    documents = [f"document number {i} " + ("REJECT " if i in bad_rows else "")
                 + "alpha beta gamma delta epsilon zeta eta theta" + edition for i in range(rows)]
    table = prompt_table(load_template("summary"), [f"doc-{i:04d}" for i in range(rows)],
                         documents, max_new_tokens=32)
    storage.write_table(table, url)
    return url
