"""Write a run's rows into an Iceberg table, replacing that run's earlier copy, atomically.

Each registration is one Iceberg transaction: evolve the schema (union_by_name), delete
the rows whose ``run_url`` is this run, append the run's rows streamed part by part.
``run_url`` is stored with full column metrics (not truncated to 16 characters), so the
delete proves from the manifests alone which files belong to the run and drops them
whole: a re-register never reads other runs' files (docs/adr/0040). A transaction that
loses a commit race to another registration (days of a backfill registering at once) is
rebuilt on a fresh load of the table and committed again (docs/adr/0125).
"""

from __future__ import annotations

import logging
import random
import time
import uuid
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace

import pyarrow as pa
import pyarrow.parquet as pq

from synthfactory import storage
from synthfactory.errors import RetryableError, SynthfactoryError
from synthfactory.faults import pause_point

log = logging.getLogger(__name__)

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
    conflicts: int = 0  # commit races lost to another writer, each retried


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
    once per shard: one shard's verdicts in memory at a time), or without ``verdicts``
    the verdict columns and ``shard`` the part holds, as joined rows do; rejected rows
    are left out unless ``include_rejected``."""

    def batches() -> Iterator[pa.RecordBatch]:
        current: tuple[str, ShardVerdicts] | None = None
        for shard, url in parts:
            part = storage.read_table(url)
            if verdicts is not None:
                if current is None or current[0] != shard:
                    current = (shard, ShardVerdicts(storage.read_table(
                        verdicts[shard], columns=["row", *(f.name for f in VERDICT_FIELDS)])))
                part = current[1].join(part, include_rejected)
            elif not include_rejected and "usable" in part.column_names:
                part = part.filter(part.column("usable"))  # joined rows carry their verdict
            columns = []
            for field in schema:
                if field.name == SHARD_COLUMN and SHARD_COLUMN not in part.column_names:
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


# Optimistic concurrency (docs/adr/0125). pyiceberg itself retries a commit whose base
# moved (another run's registration committed first): it reloads the table and re-applies
# the transaction's snapshots on top, a few times with backoff. What it cannot re-apply
# (a schema evolved by both writers) or what still loses after its retries comes here as
# CommitFailedException: the whole transaction is rebuilt on a fresh load of the table,
# a bounded number of times with jittered exponential backoff.
COMMIT_ATTEMPTS = 5
BACKOFF_FIRST_S = 0.5
BACKOFF_MAX_S = 8.0
COMMIT_PAUSE = "register:commit"  # faults.pause_point: data files written, not committed
COMMIT_ID = "synthfactory.commit-id"  # snapshot property: which snapshots are this write's


def replace_run_rows(
    catalog,
    identifier: str,
    rows: Callable[[], pa.RecordBatchReader],
    run_url: str,
    snapshot_properties: dict[str, str],
    key_columns: tuple[str, ...] = (RUN_COLUMN,),
    key_values: tuple[str, ...] | None = None,
    attempts: int = COMMIT_ATTEMPTS,
) -> WriteResult:
    """Create the table if needed, then in one transaction: evolve, delete the run, append.

    ``rows`` makes a fresh reader of the run's rows, so a transaction that loses a commit
    race can be written again; ``WriteResult.conflicts`` counts the races lost."""
    from pyiceberg.exceptions import CommitFailedException

    namespace, _ = split_identifier(identifier)
    _create_namespace(catalog, namespace)
    conflicts = 0
    while True:
        reader = rows()
        table = _create_table(catalog, identifier, reader.schema, key_columns)
        try:
            result = _replace_once(table, identifier, reader, run_url, snapshot_properties,
                                   key_columns, key_values)
        except CommitFailedException as exc:
            conflicts += 1
            if conflicts >= attempts:
                raise RetryableError(  # a later attempt meets fewer writers
                    f"{identifier}: another writer committed first {conflicts} times in a row "
                    f"({exc}); run register again") from exc
            delay = min(BACKOFF_MAX_S, BACKOFF_FIRST_S * 2 ** (conflicts - 1))
            delay *= random.uniform(0.5, 1.0)  # two losers of one race do not retry in step
            log.warning("%s: commit conflict with another writer (%s); retrying on a fresh "
                        "load of the table in %.1f s (attempt %d of %d)", identifier, exc,
                        delay, conflicts + 1, attempts)
            time.sleep(delay)
            continue
        except ValueError as exc:  # pyiceberg's schema incompatibility errors
            raise SynthfactoryError(f"{identifier}: cannot write {run_url} ({exc})") from exc
        if result.conflicts:
            log.warning("%s: commit conflict with another writer; retried on a fresh load of "
                        "the table, committed on top of its snapshot", identifier)
        return replace(result, conflicts=conflicts + result.conflicts)


def _replace_once(table, identifier: str, rows: pa.RecordBatchReader, run_url: str,
                  snapshot_properties: dict[str, str], key_columns: tuple[str, ...],
                  key_values: tuple[str, ...] | None) -> WriteResult:
    """One transaction on ``table`` as loaded; CommitFailedException if it lost for good.
    ``conflicts`` of the result is 1 when pyiceberg had to retry it on a newer snapshot."""
    from pyiceberg.expressions import And, EqualTo

    values = key_values or (run_url,)
    predicate = EqualTo(key_columns[0], values[0])
    for column, value in zip(key_columns[1:], values[1:], strict=True):
        predicate = And(predicate, EqualTo(column, value))
    base = table.current_snapshot()
    commit_id = uuid.uuid4().hex
    properties = {**snapshot_properties, COMMIT_ID: commit_id}
    with table.transaction() as tx:
        with tx.update_schema() as update:
            update.union_by_name(rows.schema)
        with warnings.catch_warnings():
            # The first registration of a run deletes nothing; that is expected.
            warnings.filterwarnings("ignore", message="Delete operation did not match")
            tx.delete(predicate, snapshot_properties=properties)
        tx.append(rows, snapshot_properties=properties)
        pause_point(COMMIT_PAUSE)  # tests line two registers up here, to race their commits
    # ``table`` now holds the metadata its commit returned; snapshots other writers made
    # meanwhile are there too, so this write's are told by their commit id.
    ours = [s for s in table.snapshots()
            if s.summary is not None and s.summary.get(COMMIT_ID) == commit_id]
    ids = {s.snapshot_id for s in ours}
    first = next((s for s in ours if s.parent_snapshot_id not in ids), None)
    rebased = first is not None and first.parent_snapshot_id != (base.snapshot_id if base
                                                                 else None)

    def _count(key: str) -> int:
        return sum(int(s.summary.get(key, 0) or 0) for s in ours if s.summary is not None)

    last = max(ours, key=lambda s: s.sequence_number) if ours else table.current_snapshot()
    return WriteResult(
        snapshot_id=last.snapshot_id if last else None,
        metadata_location=table.metadata_location,
        rows_added=_count("added-records"),
        files_added=_count("added-data-files"),
        rows_replaced=_count("deleted-records"),
        table_rows=int(last.summary.get("total-records", 0)) if last and last.summary else 0,
        conflicts=int(rebased),
    )


def _create_namespace(catalog, namespace: str) -> None:
    """The namespace, created if missing. Two first registrations may both find it missing:
    the SQL catalog then raises its database's unique violation for the slower one."""
    try:
        catalog.create_namespace_if_not_exists(namespace)
    except Exception:
        if not catalog.namespace_exists(namespace):
            raise


def _create_table(catalog, identifier: str, schema: pa.Schema, key_columns: tuple[str, ...]):
    """The table as the catalog has it now, created on first use (a concurrent creator
    makes create_table_if_not_exists load the winner's table)."""
    return catalog.create_table_if_not_exists(
        identifier,
        schema=schema,
        properties={FULL_METRICS.format(c): "full" for c in key_columns},
    )
