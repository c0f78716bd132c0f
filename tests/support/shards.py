"""Prompt shards in the stitch output format (docs/contracts.md) for rephrase tests."""

from __future__ import annotations

from pathlib import Path

from synthfactory import storage
from synthfactory.stitch.prompt_table import prompt_table
from synthfactory.stitch.templates import load_template


def write_prompt_shard(run_url: str, index: int, rows: int, bad_rows: tuple[int, ...] = (),
                       edition: str = "") -> str:
    """A shard for the echo engine. ``edition`` changes every document's text: the same
    day's partition, rewritten."""
    url = storage.join(run_url, "prompts", f"shard-{index:05d}.parquet")
    documents = [f"document number {i} " + ("REJECT " if i in bad_rows else "")
                 + "alpha beta gamma delta epsilon zeta eta theta" + edition for i in range(rows)]
    table = prompt_table(load_template("summary"), [f"doc-{i:04d}" for i in range(rows)],
                         documents, max_new_tokens=32)
    storage.write_table(table, url)
    return url


def write_real_prompt_shard(run: Path, rows: int = 24, max_new_tokens: int = 24) -> str:
    """Shard 0 of the run folder ``run``: prose the real model rephrases into sentences
    (the vLLM, Ray and sweep tests), six documents repeated."""
    topics = [("json", "JSON data"), ("csv", "CSV files"), ("re", "regular expressions"),
              ("time", "clocks"), ("math", "numbers"), ("gzip", "compressed files")]
    texts = [f"The {name} module of the Python standard library provides tools for "
             f"working with {topic}. It is used by many programs."
             for name, topic in topics] * (rows // len(topics) + 1)
    table = prompt_table(load_template("summary"), [f"doc-{i:03d}" for i in range(rows)],
                         texts[:rows], max_new_tokens)
    url = f"file://{run}/prompts/shard-00000.parquet"
    storage.write_table(table, url)
    return url
