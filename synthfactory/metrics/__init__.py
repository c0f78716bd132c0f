"""Prometheus metrics of a running step, pushed to a Pushgateway while it runs.

Names start with ``synthfactory_``. Labels are kept to a budget: ``dag_id``, ``run_id``,
``task``, ``map_index`` (the shard group), ``host`` and ``model``; never a row, a shard
name or a reason with free text (quarantine reasons are the fixed vocabularies'). A
step learns its Airflow labels from the environment its runner sets (``LABEL_ENV``);
run by hand, they are empty strings.

A step pushes only when ``SYNTHFACTORY_PUSHGATEWAY`` names a Pushgateway (``host:port``
or a URL): every ``PUSH_SECONDS`` while it runs, and once at its end, under the grouping
key ``job=synthfactory`` + the labels above but ``model`` (so two steps never overwrite
each other's group). Stitch, validate, join and register push ``synthfactory_step_*``
(their seconds while they run, their rows at their end: ``StepMetrics``, started by
cli.py around the step's run), labelled with ``step`` instead of ``model``.
In a pod (SYNTHFACTORY_METRICS_PORT set by the kubernetes runner) a step also serves its
registry on /metrics (``serve_metrics``); a local step never does. docs/metrics.md lists
the metrics.

The package: export.py (pushed, served, a run's groups deleted), rephrase_task.py
(RephraseMetrics) and step_rows.py (StepMetrics); the names below are importable from
here, as they were from the one module the package was before.
"""

from synthfactory.metrics.export import (
    PREFIX,
    PUSH_SECONDS_ENV,
    delete_run_groups,
    exported,
    serve_metrics,
)
from synthfactory.metrics.rephrase_task import (
    ENGINE_STATS,
    EXPECTED_RATE_ENV,
    RephraseMetrics,
    step_labels,
)
from synthfactory.metrics.step_rows import STEP_ROWS, StepMetrics, step_metrics

# what the product, its benchmarks and its tests import from synthfactory.metrics
__all__ = [
    "ENGINE_STATS", "EXPECTED_RATE_ENV", "PREFIX", "PUSH_SECONDS_ENV", "STEP_ROWS",
    "RephraseMetrics", "StepMetrics", "delete_run_groups", "exported", "serve_metrics",
    "step_labels", "step_metrics",
]
