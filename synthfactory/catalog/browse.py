"""``synthfactory catalog list|show``: what is registered, read from the catalog itself.

``list`` prints every table with its row and file counts (from the current snapshot's
summary: no data is read). ``show NAMESPACE.TABLE`` adds the columns, the registered
runs from ``{namespace}.runs`` and their totals.
"""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime

from synthfactory.catalog import config
from synthfactory.catalog.command import RUNS_TABLE, runs_table_of
from synthfactory.catalog.iceberg_table import split_identifier
from synthfactory.contract.run_format import registered_rows
from synthfactory.errors import PermanentError

TOTALLED = (
    "rows_in",
    "rows_generated",
    "rows_quarantined",
    "rows_flagged",
    "rows_rejected",
    "rows_registered",
    "prompt_tokens",
    "output_tokens",
    "device_seconds",
)
RUN_COLUMNS = ("pipeline", "interval", *TOTALLED, "registered_at", "airflow_run_id")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    common = argparse.ArgumentParser(add_help=False)
    config.add_catalog_arguments(common)
    sub = parser.add_subparsers(dest="action", required=True)
    listing = sub.add_parser("list", parents=[common], help="tables with rows and files")
    listing.add_argument("--namespace", help="only this namespace")
    show = sub.add_parser("show", parents=[common], help="one table: columns, runs, totals")
    show.add_argument("table", help="NAMESPACE.TABLE")


def run(args: argparse.Namespace) -> dict:
    settings = config.settings_from_args(args)
    catalog = config.open_catalog(settings)
    try:
        if args.action == "list":
            return list_tables(catalog, settings, args.namespace)
        return show_table(catalog, settings, args.table)
    finally:
        config.close_catalog(catalog)


def list_tables(catalog, settings: config.CatalogSettings, namespace: str | None = None) -> dict:
    from pyiceberg.exceptions import NoSuchNamespaceError

    namespaces = [tuple(namespace.split("."))] if namespace else catalog.list_namespaces()
    tables = []
    for ns in namespaces:
        try:
            identifiers = sorted(catalog.list_tables(ns))
        except NoSuchNamespaceError as exc:
            known = ", ".join(".".join(n) for n in catalog.list_namespaces()) or "none"
            raise PermanentError(f"--namespace {namespace}: no such namespace in catalog "
                                 f"{settings.name!r} (namespaces: {known})") from exc
        for identifier in identifiers:
            tables.append(_table_stats(catalog.load_table(identifier), ".".join(identifier)))
    print(_header(settings))
    print(_format_rows(tables, ("table", "rows", "files", "snapshots", "updated")))
    return {**settings.describe(), "tables": tables}


def show_table(catalog, settings: config.CatalogSettings, identifier: str) -> dict:
    from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError

    namespace, name = split_identifier(identifier)
    try:
        table = catalog.load_table(identifier)
    except (NoSuchTableError, NoSuchNamespaceError) as exc:
        raise PermanentError(
            f"{identifier}: no such table in catalog {settings.name!r}"
        ) from exc
    stats = _table_stats(table, identifier)
    columns = [f"{field.name} {field.field_type}" for field in table.schema().fields]
    runs = [] if name == RUNS_TABLE else _runs_of(catalog, identifier)
    totals = {key: sum(run.get(key) or 0 for run in runs) for key in TOTALLED}
    totals["runs"] = len(runs)

    print(_header(settings))
    print(f"table {identifier}  location {table.location()}")
    print(
        f"snapshot {stats['snapshot_id']}  updated {stats['updated']}  "
        f"rows {stats['rows']}  files {stats['files']}  snapshots {stats['snapshots']}"
    )
    print("columns: " + ", ".join(columns))
    if name != RUNS_TABLE:
        print(f"runs ({len(runs)}):")
        print(_format_rows(runs, RUN_COLUMNS))
        print("totals: " + "  ".join(f"{k} {v}" for k, v in totals.items()))
        accounted = sum(registered_rows(run) for run in runs)  # old runs: run_format.py
        if accounted != stats["rows"]:
            print(
                f"note: the table holds {stats['rows']} rows but its runs account for "
                f"{accounted} (rows written by something other than register?)"
            )
    return {**stats, **settings.describe(), "columns": columns, "runs": runs, "totals": totals}


def _runs_of(catalog, identifier: str) -> list[dict]:
    from pyiceberg.expressions import EqualTo

    runs_table = runs_table_of(identifier)
    if not catalog.table_exists(runs_table):
        return []
    scan = catalog.load_table(runs_table).scan(row_filter=EqualTo("table_name", identifier))
    rows = scan.to_arrow().sort_by("registered_at").to_pylist()
    for row in rows:
        row["registered_at"] = row["registered_at"].isoformat() if row["registered_at"] else None
        for key in ("templates", "engine_args", "sampling"):
            row[key] = json.loads(row[key]) if row.get(key) else None
    return rows


def _table_stats(table, identifier: str) -> dict:
    snapshot = table.current_snapshot()
    summary = snapshot.summary if snapshot is not None and snapshot.summary is not None else {}
    updated = (
        datetime.fromtimestamp(snapshot.timestamp_ms / 1000, UTC).isoformat(timespec="seconds")
        if snapshot is not None
        else None
    )
    return {
        "table": identifier,
        "snapshot_id": snapshot.snapshot_id if snapshot is not None else None,
        "rows": int(summary.get("total-records", 0)),
        "files": int(summary.get("total-data-files", 0)),
        "snapshots": len(table.snapshots()),
        "updated": updated,
    }


def _header(settings: config.CatalogSettings) -> str:
    where = settings.describe()
    return (
        f"catalog {settings.name} ({where['catalog_source']}): "
        f"{where['catalog_uri'] or 'configured'}, warehouse {where['warehouse'] or 'configured'}"
    )


def _format_rows(rows: list[dict], columns: tuple[str, ...]) -> str:
    if not rows:
        return "  (none)"
    cells = [[str(row.get(c, "")) for c in columns] for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(columns)]
    lines = ["  ".join(c.upper().ljust(w) for c, w in zip(columns, widths, strict=True))]
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)) for r in cells]
    return "\n".join("  " + line.rstrip() for line in lines)
