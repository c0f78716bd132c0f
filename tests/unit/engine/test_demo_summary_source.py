"""The demo summary's joined example quotes a chunked document's source: its first
chunk's prompt row, found in the run's prompt shards in plan order. The search reads each
shard's keys only and stops at the first shard that has the row: the prompt text of that
one shard is read, the shards after it are not opened."""

from __future__ import annotations

import pyarrow as pa

from synthfactory import storage
from synthfactory.contract import paths
from synthfactory.demo_summary import _first_source
from synthfactory.stitch.prompt_table import prompt_table
from synthfactory.stitch.templates import load_template

SUMMARY = load_template("summary")


def _shard(run_url: str, index: int, rows: list[tuple[str, int, str]]) -> dict:
    """A prompt shard of (doc_id, chunk_index, text) rows; its shards.json entry."""
    table = prompt_table(SUMMARY, [f"{d}#{c}" for d, c, _ in rows], [t for *_, t in rows], 32)
    table = table.set_column(table.schema.get_field_index("doc_id"), "doc_id",
                             pa.array([d for d, _, _ in rows], pa.string()))
    table = table.set_column(table.schema.get_field_index("chunk_index"), "chunk_index",
                             pa.array([c for _, c, _ in rows], table.schema.field(
                                 "chunk_index").type))
    name = f"shard-{index:05d}"
    url = storage.join(run_url, "prompts", f"{name}.parquet")
    storage.write_table(table, url)
    return {"name": name, "url": url, "rows": len(rows), "tokens": 0}


def test_the_first_shard_holding_the_first_chunk_is_the_last_read(tmp_path, monkeypatch):
    run = f"file://{tmp_path}/run"
    shards = [
        _shard(run, 0, [("short", 0, "A short note."), ("guide", 1, "The second part.")]),
        _shard(run, 1, [("guide", 2, "The third part."), ("guide", 0, "# Guide\n\nFirst.")]),
        _shard(run, 2, [("guide", 0, "# Guide\n\nAnother template's copy."),
                        ("other", 0, "Other text.")]),
    ]
    storage.write_json(storage.join(run, paths.SHARDS_JSON), {"shards": shards})
    reads = []
    real = storage.read_table

    def read_table(url, columns=None):
        reads.append((url.rsplit("/", 1)[-1], tuple(columns or ())))
        return real(url, columns=columns)

    monkeypatch.setattr(storage, "read_table", read_table)
    assert _first_source(run, "guide") == "# Guide\n\nFirst."  # plan order: shard 1's
    assert reads == [("shard-00000.parquet", ("doc_id", "chunk_index")),
                     ("shard-00001.parquet", ("doc_id", "chunk_index")),
                     ("shard-00001.parquet", ("user",))]
    reads.clear()
    assert _first_source(run, "missing") == ""  # every shard's keys, never a prompt text
    assert [columns for _, columns in reads] == [("doc_id", "chunk_index")] * 3
