"""A local step learns its Prometheus labels from its task instance (operators/local.py),
in the variables the engine reads them from (synthfactory/metrics.py): a mapped task's
map index keeps two shard groups' pushes apart; its attempt feeds the retries alert."""

from __future__ import annotations

from types import SimpleNamespace

from synthfactory.contract import METRIC_LABEL_ENV, TRY_NUMBER_ENV
from synthfactory_airflow.operators.local import metric_labels


def test_the_labels_come_from_the_task_instance():
    ti = SimpleNamespace(dag_id="synthetic_rephrase", run_id="manual__2026-12-04",
                         task_id="shard.rephrase", map_index=3, try_number=2)
    env = metric_labels({"ti": ti})
    assert env == {METRIC_LABEL_ENV["dag_id"]: "synthetic_rephrase",
                   METRIC_LABEL_ENV["run_id"]: "manual__2026-12-04",
                   METRIC_LABEL_ENV["task"]: "shard.rephrase",
                   METRIC_LABEL_ENV["map_index"]: "3", TRY_NUMBER_ENV: "2"}
    assert all(name.startswith("SYNTHFACTORY_") for name in env)  # step_env lets them by


def test_without_a_task_instance_there_are_none():
    assert metric_labels({}) == {}
