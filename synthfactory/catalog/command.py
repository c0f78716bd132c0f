"""``synthfactory register``: a committed run becomes rows of an Iceberg table.

The run's joined rows (one per document and template, ``synthfactory join``) go into
``--table`` (one transaction, replacing any earlier
copy of the same run), then one row of lineage and accounting into
``{namespace}.runs``; a commit that loses a race to another registration is retried on
a fresh load of the table. The returned summary is what the Airflow task puts on the
table's Asset event.
"""

from __future__ import annotations

import argparse
import logging
from dataclasses import asdict
from datetime import UTC, datetime

import pyarrow as pa

from synthfactory import storage
from synthfactory.catalog import config
from synthfactory.catalog.iceberg_table import (
    replace_run_rows,
    run_rows_reader,
    run_rows_schema,
    split_identifier,
)
from synthfactory.catalog.lineage import PROPERTY_PREFIX, lineage_of
from synthfactory.errors import RetryableError, SynthfactoryError
from synthfactory.faults import pause_point
from synthfactory.join import read_joined
from synthfactory.run_reader import read_committed_run

log = logging.getLogger(__name__)

RUNS_TABLE = "runs"


def run(args: argparse.Namespace) -> dict:
    settings = config.settings_from_args(args)
    try:
        return register(
            run_url=args.run,
            table=args.table,
            settings=settings,
            pipeline=args.pipeline,
            interval=args.interval,
            airflow_run_id=args.airflow_run_id,
            include_rejected=args.include_rejected,
        )
    except OSError as exc:
        # pyiceberg writes the table's files itself; its OSError names no path
        warehouse = settings.warehouse or ""
        if not (storage.no_space(exc) and storage.scheme(warehouse) == "file"):
            raise
        folder = storage.local_path(warehouse)
        raise SynthfactoryError(f"{warehouse}: cannot write the table's files "
                                f"({storage.full_disk(folder, None)})") from exc


def runs_table_of(table: str) -> str:
    namespace, _ = split_identifier(table)
    return f"{namespace}.{RUNS_TABLE}"


def register(
    run_url: str,
    table: str,
    settings: config.CatalogSettings,
    pipeline: str | None = None,
    interval: str | None = None,
    airflow_run_id: str | None = None,
    include_rejected: bool = False,
) -> dict:
    namespace, name = split_identifier(table)
    if name == RUNS_TABLE:
        raise SynthfactoryError(
            f"--table {table!r}: {namespace}.{RUNS_TABLE} holds the run lineage; pick another name"
        )
    committed = read_committed_run(run_url)  # refuses before anything is written
    # one row per document and template, the chunks joined back (docs/adr/0136)
    joined, parts = read_joined(committed)
    lineage = lineage_of(committed, pipeline, interval, airflow_run_id, include_rejected,
                         joined)
    schema = run_rows_schema([url for _, url in parts])
    registered_at = datetime.now(UTC)
    properties = {
        **lineage.snapshot_properties(),
        PROPERTY_PREFIX + "registered-at": registered_at.isoformat(),
    }

    catalog = config.open_catalog(settings)
    try:
        pause_point("register:before-commit")
        written = replace_run_rows(
            catalog,
            table,
            # a factory: a commit that loses a race to another run's registration is
            # written again on a fresh load of the table (docs/adr/0125)
            lambda: run_rows_reader(committed.run_url, parts, schema, None,
                                    include_rejected),
            committed.run_url,
            properties,
        )
        # A second transaction (pyiceberg has no multi-table commit); a failure here is
        # repaired by registering again, which replaces both tables' rows of this run.
        pause_point("register:between-tables")
        runs_row = lineage.runs_row(table, written.snapshot_id, registered_at)
        runs_written = replace_run_rows(
            catalog,
            runs_table_of(table),
            lambda: pa.RecordBatchReader.from_batches(runs_row.schema, runs_row.to_batches()),
            committed.run_url,
            {PROPERTY_PREFIX + "table": table, PROPERTY_PREFIX + "run-url": committed.run_url},
            key_columns=("table_name", "run_url"),
            key_values=(table, committed.run_url),
        )
    finally:
        config.close_catalog(catalog)

    if written.rows_added != lineage.rows_registered:
        raise RetryableError(  # a rerun registers the files as they are then
            f"{table}: appended {written.rows_added} rows but {committed.run_url} has "
            f"{lineage.rows_registered} to register; the parts or verdicts changed while "
            "registering, register again"
        )
    log.info(
        "registered %s rows of %s into %s (snapshot %s, %s rows replaced)",
        written.rows_added,
        committed.run_url,
        table,
        written.snapshot_id,
        written.rows_replaced,
    )
    return {
        "table": table,
        **settings.describe(),
        "runs_table": runs_table_of(table),
        "snapshot_id": written.snapshot_id,
        "metadata_location": written.metadata_location,
        "rows": written.rows_added,
        "files": written.files_added,
        "source_parts": len(parts),
        "rows_replaced": written.rows_replaced,
        "table_rows": written.table_rows,
        # commit races lost to other registrations (another day's run), each retried
        "commit_conflicts": written.conflicts + runs_written.conflicts,
        "registered_at": registered_at.isoformat(),
        **asdict(lineage),
        "query_hint": query_hint(settings, table, committed.run_url, written.metadata_location),
    }


def query_hint(
    settings: config.CatalogSettings, table: str, run_url: str, metadata_location: str
) -> dict[str, str]:
    props = {
        k: v for k, v in settings.describe().items() if k in ("catalog_uri", "warehouse") and v
    }
    kwargs = "".join(
        f", {'uri' if k == 'catalog_uri' else k}={v!r}" for k, v in sorted(props.items())
    )
    metadata = (
        storage.local_path(metadata_location)
        if metadata_location.startswith("file://")
        else metadata_location
    )
    return {
        "pyiceberg": (
            f"from pyiceberg.catalog import load_catalog; "
            f"load_catalog({settings.name!r}{kwargs}).load_table({table!r})"
            f".scan(row_filter=\"run_url == '{run_url}'\").to_arrow()"
        ),
        "duckdb": (
            "INSTALL iceberg; LOAD iceberg; "
            f"SELECT count(*) FROM iceberg_scan('{metadata}') WHERE run_url = '{run_url}'"
        ),
    }
