"""Streams manifest rows into ``part-NNNNN.parquet`` files of bounded size.

Rows arrive as small Arrow batches (one per listing page) and are buffered until
``rows_per_part``; then one part is written atomically (storage.write_table). Memory
is bounded by one part's rows, whatever the number of objects.
"""

from __future__ import annotations

import re
from datetime import datetime

import pyarrow as pa

from synthfactory import storage
from synthfactory.faults import pause_point

PART_NAME = re.compile(r"^part-(\d{5,})\.parquet$")


def manifest_schema(partition_columns: list[str]) -> pa.Schema:
    return pa.schema(
        [
            pa.field("key", pa.string(), nullable=False),
            pa.field("size", pa.int64(), nullable=False),
            pa.field("etag", pa.string()),
            pa.field("last_modified", pa.timestamp("us", tz="UTC"), nullable=False),
            *(pa.field(column, pa.string()) for column in partition_columns),
        ]
    )


def build_batch(
    schema: pa.Schema,
    keys: list[str],
    sizes: list[int],
    etags: list[str | None],
    modified: list[datetime],
    partition_values: list[tuple[str, ...]],
) -> pa.RecordBatch:
    columns = [keys, sizes, etags, modified]
    width = len(schema) - 4
    columns += [[values[i] for values in partition_values] for i in range(width)]
    return pa.RecordBatch.from_arrays(
        [pa.array(col, type=f.type) for col, f in zip(columns, schema, strict=True)],
        schema=schema,
    )


class ManifestWriter:
    def __init__(self, out_url: str, schema: pa.Schema, rows_per_part: int, first_part: int = 0):
        self.out_url = storage.normalize(out_url).rstrip("/")
        self.schema = schema
        self.rows_per_part = rows_per_part
        self.parts_written = first_part
        self._batches: list[pa.RecordBatch] = []
        self.buffered_rows = 0

    def add(self, batch: pa.RecordBatch) -> None:
        if batch.num_rows:
            self._batches.append(batch)
            self.buffered_rows += batch.num_rows

    @property
    def full(self) -> bool:
        return self.buffered_rows >= self.rows_per_part

    def flush(self) -> str | None:
        """Write the buffered rows as the next part; its URL, or None if nothing was buffered."""
        if not self.buffered_rows:
            return None
        table = pa.Table.from_batches(self._batches, schema=self.schema)
        url = storage.join(self.out_url, f"part-{self.parts_written:05d}.parquet")
        storage.write_table(table, url, row_group_size=self.rows_per_part)
        self.parts_written += 1
        self._batches, self.buffered_rows = [], 0
        pause_point("crawl:part-written")
        return url

    def finish(self) -> None:
        """Flush; an empty crawl still gets one empty part so readers see the columns."""
        self.flush()
        if self.parts_written == 0:
            url = storage.join(self.out_url, "part-00000.parquet")
            storage.write_table(self.schema.empty_table(), url)
            self.parts_written = 1


def existing_parts(out_url: str) -> list[tuple[int, str]]:
    """(index, url) of every ``part-NNNNN.parquet`` directly in the manifest folder."""
    out = []
    base = storage.normalize(out_url).rstrip("/")
    for url in storage.list_files(base, ".parquet"):
        name = url[len(base) + 1 :]
        found = PART_NAME.match(name)
        if found:
            out.append((int(found.group(1)), url))
    return sorted(out)


def remove_parts(out_url: str, from_index: int = 0) -> int:
    """Delete parts numbered ``from_index`` and up (stale or orphaned); how many."""
    doomed = [url for index, url in existing_parts(out_url) if index >= from_index]
    for url in doomed:
        storage.delete(url)
    return len(doomed)
