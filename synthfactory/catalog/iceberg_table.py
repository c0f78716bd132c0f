"""Write a run's rows into an Iceberg table, replacing that run's earlier copy, atomically.

Each registration is one Iceberg transaction: evolve the schema (union_by_name), delete
the rows whose ``run_url`` is this run, append the run's rows streamed part by part.
``run_url`` is stored with full column metrics (not truncated to 16 characters), so the
delete proves from the manifests alone which files belong to the run and drops them
whole: a re-register never reads other runs' files (docs/adr/0040).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.parquet as pq

from synthfactory import storage
from synthfactory.errors import SynthfactoryError

RUN_COLUMN = "run_url"
SHARD_COLUMN = "shard"
# The quality gate's verdict of each row (validate's verdicts/), joined on by register.
VERDICT_FIELDS = [pa.field("usable", pa.bool_()), pa.field("reasons", pa.list_(pa.string())),
                  pa.field("clean_text", pa.string())]
OURS = (SHARD_COLUMN, RUN_COLUMN, *(f.name for f in VERDICT_FIELDS))
FULL_METRICS = "write.metadata.metrics.column.{}"


@dataclass(frozen=True)
class WriteResult:
    snapshot_id: int | None
    metadata_location: str
    rows_added: int
    files_added: int
    rows_replaced: int
    table_rows: int


def split_identifier(identifier: str) -> tuple[str, str]:
    namespace, dot, name = identifier.rpartition(".")
    if not dot or not namespace or not name:
        raise SynthfactoryError(
            f"--table {identifier!r}: expected NAMESPACE.TABLE, e.g. synth.rephrased"
        )
    return namespace, name


def run_rows_schema(part_urls: list[str]) -> pa.Schema:
    """The parts' columns (unified across parts), the verdict columns, ``shard`` and
    ``run_url``."""
    schemas = []
    for url in part_urls:
        fs, path = storage.filesystem(url)
        with fs.open_input_file(path) as handle:
            schemas.append(pq.read_schema(handle))
    unified = pa.unify_schemas(schemas, promote_options="permissive") if schemas else pa.schema([])
    fields = [
        # A column a writer left all-null (e.g. from_pylist of Nones) has Arrow type null,
        # which Iceberg lacks; every such column in the contract is a string.
        f.with_type(pa.string()) if pa.types.is_null(f.type) else f
        for f in unified
        if f.name not in OURS
    ]
    return pa.schema([*fields, *VERDICT_FIELDS, pa.field(SHARD_COLUMN, pa.string()),
                      pa.field(RUN_COLUMN, pa.string())])


def run_rows_reader(
    run_url: str, parts: list[tuple[str, str]], schema: pa.Schema,
    verdicts: dict[str, str] | None = None, include_rejected: bool = False,
) -> pa.RecordBatchReader:
    """Stream ``(shard, part_url)`` parts one file at a time, conformed to ``schema``,
    each row with its shard's verdict (``verdicts``: shard -> verdicts file URL, read
    once per shard: one shard's verdicts in memory at a time); rejected rows are left
    out unless ``include_rejected``."""

    def batches() -> Iterator[pa.RecordBatch]:
        current: tuple[str, ShardVerdicts] | None = None
        for shard, url in parts:
            part = storage.read_table(url)
            if verdicts is not None:
                if current is None or current[0] != shard:
                    current = (shard, ShardVerdicts(storage.read_table(
                        verdicts[shard], columns=["row", *(f.name for f in VERDICT_FIELDS)])))
                part = current[1].join(part, include_rejected)
            columns = []
            for field in schema:
                if field.name == SHARD_COLUMN:
                    columns.append(pa.array([shard] * part.num_rows, pa.string()))
                elif field.name == RUN_COLUMN:
                    columns.append(pa.array([run_url] * part.num_rows, pa.string()))
                elif field.name in part.column_names:
                    columns.append(part.column(field.name).cast(field.type))
                else:
                    columns.append(pa.nulls(part.num_rows, field.type))
            yield from pa.Table.from_arrays(columns, schema=schema).to_batches()

    return pa.RecordBatchReader.from_batches(schema, batches())


class ShardVerdicts:
    """One shard's verdicts, indexed by prompt row once for all of the shard's parts."""

    def __init__(self, verdicts: pa.Table) -> None:
        self.table = verdicts
        self.position = {row: i for i, row in enumerate(verdicts.column("row").to_pylist())}

    def join(self, part: pa.Table, include_rejected: bool) -> pa.Table:
        """``part``'s rows with their verdict columns, matched on the prompt row index
        (by position: Arrow's join takes no list columns)."""
        rows = part.column("row").to_pylist()
        missing = [r for r in rows if r not in self.position]
        if missing:
            raise SynthfactoryError(
                f"{len(missing)} row(s) of a part have no verdict (e.g. row {missing[0]}); "
                "run `synthfactory validate` for the shard again")
        take = pa.array([self.position[r] for r in rows], pa.int64())
        for field in VERDICT_FIELDS:
            if field.name in part.column_names:
                part = part.drop_columns([field.name])
            part = part.append_column(field, self.table.column(field.name).take(take))
        return part if include_rejected else part.filter(part.column("usable"))


def replace_run_rows(
    catalog,
    identifier: str,
    rows: pa.RecordBatchReader,
    run_url: str,
    snapshot_properties: dict[str, str],
    key_columns: tuple[str, ...] = (RUN_COLUMN,),
    key_values: tuple[str, ...] | None = None,
) -> WriteResult:
    """Create the table if needed, then in one transaction: evolve, delete the run, append."""
    from pyiceberg.exceptions import CommitFailedException
    from pyiceberg.expressions import And, EqualTo

    namespace, _ = split_identifier(identifier)
    catalog.create_namespace_if_not_exists(namespace)
    table = catalog.create_table_if_not_exists(
        identifier,
        schema=rows.schema,
        properties={FULL_METRICS.format(c): "full" for c in key_columns},
    )
    values = key_values or (run_url,)
    predicate = EqualTo(key_columns[0], values[0])
    for column, value in zip(key_columns[1:], values[1:], strict=True):
        predicate = And(predicate, EqualTo(column, value))
    before = {s.snapshot_id for s in table.snapshots()}
    try:
        with table.transaction() as tx:
            with tx.update_schema() as update:
                update.union_by_name(rows.schema)
            with warnings.catch_warnings():
                # The first registration of a run deletes nothing; that is expected.
                warnings.filterwarnings("ignore", message="Delete operation did not match")
                tx.delete(predicate, snapshot_properties=snapshot_properties)
            tx.append(rows, snapshot_properties=snapshot_properties)
    except CommitFailedException as exc:
        raise SynthfactoryError(
            f"{identifier}: another writer committed first ({exc}); run register again"
        ) from exc
    except ValueError as exc:  # pyiceberg's schema incompatibility errors
        raise SynthfactoryError(f"{identifier}: cannot write {run_url} ({exc})") from exc

    table = catalog.load_table(identifier)
    new = [s for s in table.snapshots() if s.snapshot_id not in before]

    def _count(key: str) -> int:
        return sum(int(s.summary.get(key, 0) or 0) for s in new if s.summary is not None)

    current = table.current_snapshot()
    return WriteResult(
        snapshot_id=current.snapshot_id if current else None,
        metadata_location=table.metadata_location,
        rows_added=_count("added-records"),
        files_added=_count("added-data-files"),
        rows_replaced=_count("deleted-records"),
        table_rows=int(current.summary.get("total-records", 0))
        if current and current.summary
        else 0,
    )
