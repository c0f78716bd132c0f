"""The figures of report.json that the run's JSON files alone give, computed once for
the engine's ``synthfactory report`` and for the UI's view of a run without a report.

A small library both sides of the wall import (docs/adr/0146): the engine's report
step, and the Airflow layer's Run report for a run still going or failed before
``write_report`` (it has no report.json to render, so the view computes these figures
live from the same JSON files). Standard library and ``synthfactory.contract`` only;
the contract itself holds the shapes and never imports this (pyproject's
``[tool.importlinter]``).

The engine adds what needs the parquet parts (rows of a shard still running, rephrase
quarantine reasons, prompt tokens, length statistics, examples, rejected examples)
through ``build_report``'s keyword arguments; the UI leaves them out and gets the same
shape with those figures empty. The quality gate's counts come from the validation
files, so the UI's view of a run still going shows them too.

- ``counts``: reason kinds, per-second and share ratios;
- ``shards``: each shard's row, the engines used, the progress against the plan;
- ``quality``: the gate's counts and the join's yields by template and domain;
- ``yields``: the token yield and the attempts;
- ``report``: cost, stitch, and the whole report.
"""

from synthfactory.report_figures.counts import count_kinds, reason_kind
from synthfactory.report_figures.report import build_report
from synthfactory.report_figures.shards import engine_choices, shard_figures

__all__ = ["build_report", "count_kinds", "engine_choices", "reason_kind", "shard_figures"]
