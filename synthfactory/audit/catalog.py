"""The catalog's rows of the run: exactly its usable joined rows, with one lineage row."""

from __future__ import annotations

from collections import Counter

import pyarrow as pa

from synthfactory.audit.report import AuditReport
from synthfactory.catalog import config
from synthfactory.contract.run_format import registered_rows


def audit_catalog(run_url: str, table: str, settings, documents: dict,
                   report: AuditReport) -> None:
    from pyiceberg.exceptions import NoSuchTableError
    from pyiceberg.expressions import And, EqualTo

    from synthfactory.catalog.command import runs_table_of

    catalog = config.open_catalog(settings)
    try:
        try:
            rows = catalog.load_table(table).scan(
                row_filter=EqualTo("run_url", run_url),
                selected_fields=("shard", "id", "template_id")).to_arrow()
        except NoSuchTableError:
            rows = pa.table({"shard": [], "id": [], "template_id": []})
        try:
            lineage = catalog.load_table(runs_table_of(table)).scan(
                row_filter=And(EqualTo("run_url", run_url), EqualTo("table_name", table)),
                selected_fields=("rows_generated", "rows_registered",
                                 "include_rejected")).to_arrow()
        except NoSuchTableError:
            lineage = pa.table({"rows_generated": pa.array([], pa.int64()),
                                "rows_registered": pa.array([], pa.int64()),
                                "include_rejected": pa.array([], pa.bool_())})
    finally:
        config.close_catalog(catalog)
    # a run registered before the quality gate: every generated row (run_format.py)
    lineage_rows = [registered_rows(row) for row in
                    lineage.select(["rows_generated", "rows_registered"]).to_pylist()]
    include_rejected = any(lineage.column("include_rejected").to_pylist())
    if lineage_rows != [rows.num_rows]:
        report.problems.append(
            f"{runs_table_of(table)}: half-registered: expected one lineage row of {run_url} "
            f"for {rows.num_rows} rows, found {lineage_rows}; run `synthfactory register` again")
    registered = Counter(zip(*(rows.column(c).to_pylist()
                               for c in ("shard", "id", "template_id")), strict=True))
    report.registered = rows.num_rows
    # the table's grain is a document and template (docs/adr/0136)
    rejected = {(d.shard, *key) for key, d in documents.items() if d.joinable and d.rejected}
    committed = Counter((d.shard, *key) for key, d in documents.items()
                        if d.joinable and (include_rejected or not d.rejected))
    unregistered = committed - registered
    extra = registered - committed
    if unregistered:
        report.lost += sum(unregistered.values())
        report.problems.append(f"{table}: {sum(unregistered.values())} usable joined "
                               f"row(s) of {run_url} are not in the table, e.g. "
                               f"{next(iter(unregistered))}")
    if extra:
        report.duplicated += sum(extra.values())
        n_rejected = sum(n for key, n in extra.items() if key in rejected)
        what = (f" ({n_rejected} of them rejected by the quality gate)" if n_rejected else "")
        report.problems.append(f"{table}: {sum(extra.values())} row(s) of {run_url} in the "
                               f"table are not usable joined rows{what}, e.g. "
                               f"{next(iter(extra))}")
