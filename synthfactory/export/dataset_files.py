"""The export's data files: a run's usable joined rows (one per document and template,
joined/), in their order, as ``data/train-NNNNN.parquet`` files of at most
``max_file_mb`` of row data each.

Written whole and only when their bytes differ from what is there (sha256), so a rerun
of the same run rewrites nothing; a file of an earlier export beyond the new count is
deleted. The same rows give the same bytes: rows in joined/'s part order, one Parquet
writer's defaults, no timestamps."""

from __future__ import annotations

import hashlib
import io
import itertools
import re
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from synthfactory import storage
from synthfactory.contract import paths
from synthfactory.errors import SynthfactoryError
from synthfactory.quality.table import QA_PAIRS, SCORE_FIELDS

DATA = "data"
SPLIT = "train"
FILE = re.compile(rf"{SPLIT}-(\d{{5}})\.parquet")
DATA_FILES = f"{DATA}/{SPLIT}-*.parquet"  # the card's configs glob
# The export's columns: what training reads (text) and what a reviewer filters by.
SCHEMA = pa.schema([
    ("id", pa.string()),  # the seed document's id
    ("text", pa.string()),  # the rephrasing, cleaned (the gate's clean_text)
    ("template_id", pa.string()),
    ("template_version", pa.string()),
    ("domain", pa.string()),
    ("model", pa.string()),
    ("source_tokens", pa.int64()),
    ("output_tokens", pa.int64()),
    ("chunk_count", pa.int32()),
    ("attempt", pa.int32()),  # the latest attempt its chunks needed (docs/adr/0141)
    ("qa_pairs", QA_PAIRS),  # a qa_pairs template's pairs; null for the others
    # the grounding scores, so a stricter threshold needs no second gate (ADR 0148)
    *SCORE_FIELDS,
])
_RENAMED = {"text": "clean_text"}


@dataclass(frozen=True)
class DataFile:
    name: str  # data/train-00000.parquet
    rows: int
    bytes: int
    sha256: str
    written: bool  # False: the same bytes were there


def usable_rows(run_url: str) -> Iterator[pa.Table]:
    """joined/'s usable rows, part by part, in the export's columns."""
    folder = storage.run_folder(run_url)
    joined = folder.joined()
    if joined is None:
        raise SynthfactoryError(f"{storage.join(run_url, paths.JOINED_SUMMARY)}: not found "
                                "(the run is not joined yet: join_chunks first)")
    for part in joined["parts"]:
        table = storage.read_table(storage.join(folder.run_url, paths.JOINED, part["name"]))
        table = table.filter(pc.equal(table.column("usable"), True))
        columns = []
        for field in SCHEMA:
            source = _RENAMED.get(field.name, field.name)
            columns.append(table.column(source).cast(field.type) if source in
                           table.column_names else pa.nulls(table.num_rows, field.type))
        yield pa.table(columns, schema=SCHEMA)


def _bounded(tables: Iterator[pa.Table], max_bytes: int) -> Iterator[pa.Table]:
    """The rows regrouped into tables of at most ``max_bytes`` of row data (one row more
    than the bound never: a row larger than it is a file of its own)."""
    pending: list[pa.Table] = []
    size = 0
    for table in tables:
        if not table.num_rows:
            continue
        per_row = _row_bytes(table)
        start = 0
        while start < table.num_rows:
            room = max_bytes - size
            fits = int(np.searchsorted(np.cumsum(per_row[start:]), room, side="right"))
            if fits == 0 and not pending:
                fits = 1  # a row over the bound: alone
            if fits == 0:
                yield pa.concat_tables(pending)
                pending, size = [], 0
                continue
            piece = table.slice(start, fits)
            pending.append(piece)
            size += int(per_row[start:start + fits].sum())
            start += fits
            if start < table.num_rows:
                yield pa.concat_tables(pending)
                pending, size = [], 0
    if pending:
        yield pa.concat_tables(pending)


def _row_bytes(table: pa.Table) -> np.ndarray:
    """Each row's share of the table's Arrow bytes: its text's length plus an even share
    of the rest."""
    text = pc.fill_null(pc.binary_length(table.column("text")), 0).to_numpy()
    rest = max(table.nbytes - int(text.sum()), 0) / max(table.num_rows, 1)
    return text.astype(np.float64) + rest


def _parquet(table: pa.Table) -> bytes:
    buffer = io.BytesIO()
    pq.write_table(table, buffer, compression="zstd")
    return buffer.getvalue()


def write(run_url: str, out_url: str, max_file_mb: float) -> list[DataFile]:
    """The run's usable rows as data/ files under ``out_url``; files already holding the
    same bytes are left as they are, and a file of an earlier export beyond the new
    count is deleted."""
    data_url = storage.join(out_url, DATA)
    before = {u.rsplit("/", 1)[-1]: u for u in storage.list_files(data_url, ".parquet")
              if FILE.fullmatch(u.rsplit("/", 1)[-1])}
    written: list[DataFile] = []
    max_bytes = max(int(max_file_mb * 2**20), 1)
    # one file's rows in memory at a time; a run with no usable row still gets one
    # (empty) file, so the card's configs always match a file
    tables = _bounded(usable_rows(run_url), max_bytes)
    for number, table in enumerate(itertools.chain(tables, [None])):
        if table is None:
            if written:
                break
            table = SCHEMA.empty_table()
        name = f"{SPLIT}-{number:05d}.parquet"
        data = _parquet(table)
        digest = hashlib.sha256(data).hexdigest()
        url = storage.join(data_url, name)
        same = name in before and hashlib.sha256(storage.read_bytes(url)).hexdigest() == digest
        if not same:
            storage.write_bytes(url, data)
        written.append(DataFile(f"{DATA}/{name}", table.num_rows, len(data), digest, not same))
    kept = {f.name.rsplit("/", 1)[-1] for f in written}
    for name, url in before.items():
        if name not in kept:
            storage.delete(url)
    return written
