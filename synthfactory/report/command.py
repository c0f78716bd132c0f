"""``synthfactory report``: write ``{run}/report/report.json`` and its PNG figures.

Runs at the end of every DAG run, failed ones included, so it reports whatever the
run folder holds and lists what is missing (docs/contracts.md, "Run report").
"""

from __future__ import annotations

import argparse
import datetime as dt

from synthfactory import storage
from synthfactory.contract import paths
from synthfactory.metrics import delete_run_groups
from synthfactory.report.collect import collect
from synthfactory.report.figures import write_figures
from synthfactory.report.price import gpu_hour_price


def run(args: argparse.Namespace) -> dict:
    try:
        summary = _report(args)
    finally:  # the run is over, its report written or not: no more pushes
        deleted = delete_run_groups(args.airflow_run_id or "")
    return {**summary, **({"pushgateway_groups_deleted": deleted} if deleted is not None else {})}


def _report(args: argparse.Namespace) -> dict:
    run_url = storage.normalize(args.run).rstrip("/")
    folder = storage.join(run_url, paths.REPORT)
    report, lengths = collect(run_url, gpu_hour_price(args.gpu_hour_usd))
    report["dag_id"] = args.dag_id
    report["airflow_run_id"] = args.airflow_run_id
    report["generated_at"] = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    report["figures"] = write_figures(report, lengths, folder)
    url = storage.join(run_url, paths.REPORT_JSON)
    storage.write_json(url, report)  # last: its presence means the figures are there
    return {
        "report": url,
        "complete": report["complete"],
        "missing": len(report["missing"]),
        "rows_generated": report["rephrase"]["rows_generated"],
        "output_tokens": report["tokens"]["output"],
        "usd_per_1b_output_tokens": report["cost"]["usd_per_1b_output_tokens"],
        "usable": report["quality"]["usable"] if report["quality"] else None,
        "usd_per_1b_usable_tokens": report["cost"]["usd_per_1b_usable_tokens"],
        "figures": sorted(report["figures"]),
    }
