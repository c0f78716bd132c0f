"""Reading seed documents file by file, inside Spark's Python workers.

Spark distributes the manifest's file list; each worker reads its files through our
storage layer (pyarrow), so s3:// needs no Hadoop S3A jars and every per-file problem
(a missing column, an unreadable file, a column of the wrong type, invalid UTF-8) is
named with its file. Whole-file problems stop the job (a missing column is a schema
error, not a data error); per-row problems become quarantine rows with a reason.
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from synthfactory import storage
from synthfactory.errors import PermanentError, SynthfactoryError
from synthfactory.stitch.routing import DOCUMENT_DOMAINS, detect_domain

# What the reader emits per input row; `reason` is null for a usable row.
ROW_SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("text", pa.string()),
        ("quality", pa.float64()),
        ("source", pa.string()),
        ("source_row", pa.int64()),
        ("reason", pa.string()),
        ("domain", pa.string()),  # web, code or math: --domain-column's, else detected
    ]
)

EMPTY_TEXT = "empty text"
NULL_TEXT = "null text"
NULL_ID = "null id"
INVALID_UTF8 = "invalid UTF-8 in text"
WRONG_TYPE = "text is not a string (column type {})"
UNKNOWN_DOMAIN = "domain {!r} in column {!r} is not one of " + ", ".join(DOCUMENT_DOMAINS)


def _domains(table: pa.Table, text: pa.Array, domain_column: str | None,
             reasons: list[str | None]) -> list[str | None]:
    """Each row's domain: the column's value when it has one, else detected from the
    text (a null value is detected too); a value that is no domain is a row's reason."""
    given = (table.column(domain_column).cast(pa.string()).to_pylist() if domain_column
             else [None] * table.num_rows)
    out: list[str | None] = []
    for i, (value, doc) in enumerate(zip(given, text.to_pylist(), strict=True)):
        if value is None:
            out.append(detect_domain(doc) if reasons[i] is None else None)
        elif value.strip().lower() in DOCUMENT_DOMAINS:
            out.append(value.strip().lower())
        else:
            out.append(None)
            if reasons[i] is None:
                reasons[i] = UNKNOWN_DOMAIN.format(value, domain_column)
    return out


def _text_column(column: pa.ChunkedArray, url: str) -> tuple[pa.Array, list[str | None]]:
    """The text as a string array plus a per-row reason (None if fine)."""
    n = len(column)
    if not (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)
            or pa.types.is_binary(column.type) or pa.types.is_large_binary(column.type)):
        return pa.nulls(n, pa.string()), [WRONG_TYPE.format(column.type)] * n
    raw = column.combine_chunks().cast(pa.binary())
    try:
        text = raw.cast(pa.string())
        text.validate(full=True)
        reasons: list[str | None] = [None] * n
    except pa.ArrowInvalid:
        # Rare path: find the offending rows one by one.
        values, reasons = [], []
        for value in raw.to_pylist():
            try:
                values.append(None if value is None else value.decode("utf-8"))
                reasons.append(None)
            except UnicodeDecodeError:
                values.append(None)
                reasons.append(INVALID_UTF8)
        text = pa.array(values, pa.string())
    nulls = text.is_null().to_pylist()
    lengths = pc.utf8_length(pc.utf8_trim_whitespace(text.fill_null(""))).to_pylist()
    for i in range(n):
        if reasons[i] is None and nulls[i]:
            reasons[i] = NULL_TEXT
        elif reasons[i] is None and lengths[i] == 0:
            reasons[i] = EMPTY_TEXT
    return text, reasons


def check_columns(url: str, names: list[str], columns: list[str | None]) -> None:
    """A column of the options that the file lacks: a schema error, the same on retry."""
    for column in columns:
        if column and column not in names:
            raise PermanentError(f"{url}: missing column {column!r} (columns: {names})")


def check_first_file(url: str, columns: list[str | None]) -> None:
    """The first seed file's footer, before Spark starts: a misspelt --text-column or a
    corpus with columns of its own fails in a second, not after Spark's start. A file
    that cannot be read is left to the workers, which name what is wrong with it."""
    try:
        fs, path = storage.filesystem(url)
        names = pq.read_schema(path, filesystem=fs).names
    except (OSError, pa.ArrowInvalid):
        return
    check_columns(url, names, columns)


def read_documents(
    url: str, id_column: str, text_column: str, quality_column: str | None,
    domain_column: str | None = None,
) -> pa.RecordBatch:
    table = storage.read_table(url)
    check_columns(url, table.column_names,
                  [id_column, text_column, quality_column, domain_column])
    n = table.num_rows
    text, reasons = _text_column(table.column(text_column), url)
    ids = table.column(id_column).cast(pa.string())
    for i, is_null in enumerate(ids.is_null().to_pylist()):
        if is_null and reasons[i] is None:
            reasons[i] = NULL_ID
    if quality_column:
        try:
            quality = table.column(quality_column).cast(pa.float64())
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            raise SynthfactoryError(
                f"{url}: column {quality_column!r} is not numeric ({exc})"
            ) from exc
    else:
        quality = pa.nulls(n, pa.float64())
    domains = _domains(table, text, domain_column, reasons)
    return pa.RecordBatch.from_arrays(
        [
            ids.combine_chunks() if isinstance(ids, pa.ChunkedArray) else ids,
            text,
            quality.combine_chunks() if isinstance(quality, pa.ChunkedArray) else quality,
            pa.array([url] * n, pa.string()),
            pa.array(range(n), pa.int64()),
            pa.array(reasons, pa.string()),
            pa.array(domains, pa.string()),
        ],
        schema=ROW_SCHEMA,
    )


def read_files(
    batches: Iterator[pa.RecordBatch], id_column: str, text_column: str,
    quality_column: str | None, domain_column: str | None = None,
) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` body: a batch of file URLs in, their documents out."""
    for batch in batches:
        for url in batch.column("url").to_pylist():
            yield read_documents(url, id_column, text_column, quality_column, domain_column)
