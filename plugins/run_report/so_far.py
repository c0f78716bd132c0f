"""What a run folder shows before its report.json exists (run in progress, or failed
before ``write_report``): the steps' own JSON files, shaped like report.json's figures.

Only JSON is read (docs/contracts.md), through the two pieces of the engine the Airflow
layer imports: the contract's reader and ``synthfactory.report_figures`` (docs/adr/0146),
the same reader and the same figures as ``synthfactory report``, the quality gate's
counts included (they are in the validation files). Figures that need the parquet
parts (quarantine reasons at rephrase, length histograms, examples, rejected examples)
wait for the report.
"""

from __future__ import annotations

from synthfactory.contract import ReportView, RunFolder, not_written, paths
from synthfactory.report_figures import build_report, shard_figures
from synthfactory_airflow.plugins.run_report import run_files


def load_report(run_url: str) -> ReportView:
    """report.json when the engine wrote it, else what exists so far (``so_far: True``)."""
    folder = RunFolder(run_url, run_files.read_json)
    report = folder.report()
    if report is not None:
        return {**report, "so_far": False}
    return so_far(folder)


def so_far(folder: RunFolder) -> ReportView:
    """report.json's shape from the JSON files alone: no cost (the price is the report
    step's), no rephrase reasons, lengths or examples of either kind (they need the
    parquet parts)."""
    files = folder.read()
    report = build_report(folder.run_url, files, [shard_figures(s) for s in files.shards])
    report["missing"].insert(0, not_written(paths.REPORT_JSON))
    return {**report, "complete": False, "so_far": True}
