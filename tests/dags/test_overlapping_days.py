"""Days overlap: several runs of synthetic_rephrase at once (SYNTHFACTORY_MAX_ACTIVE_RUNS,
default 3), the GPU steps of all of them bounded by the gpu pool in every runner.
Under a real scheduler: tests/integration/airflow/test_backfill_scheduler.py."""

from __future__ import annotations

import pytest

GPU_STEPS = {"shard.rephrase", "smoke_test_training"}


def test_three_runs_at_once_by_default(dagbag_for, monkeypatch):
    monkeypatch.delenv("SYNTHFACTORY_MAX_ACTIVE_RUNS", raising=False)
    assert dagbag_for("local").dags["synthetic_rephrase"].max_active_runs == 3


def test_the_setting_sets_the_runs_at_once(dagbag_for, monkeypatch):
    monkeypatch.setenv("SYNTHFACTORY_MAX_ACTIVE_RUNS", "8")
    assert dagbag_for("local").dags["synthetic_rephrase"].max_active_runs == 8


@pytest.mark.parametrize("value", ["0", "three", "-1"])
def test_a_bad_value_is_an_import_error_naming_the_variable(dagbag_for, monkeypatch, value):
    monkeypatch.setenv("SYNTHFACTORY_MAX_ACTIVE_RUNS", value)
    bag = dagbag_for("local")
    assert "synthetic_rephrase" not in bag.dags
    line = f"SYNTHFACTORY_MAX_ACTIVE_RUNS={value!r}: expected a whole number of at least 1"
    assert any(line in error for error in bag.import_errors.values()), bag.import_errors


@pytest.mark.parametrize("runner", ["local", "kubernetes"])
def test_gpu_steps_of_every_run_share_the_gpu_pool(dagbag_for, monkeypatch, runner):
    monkeypatch.setenv("SYNTHFACTORY_GPU_POOL", "gpus")
    dag = dagbag_for(runner).dags["synthetic_rephrase"]
    for task in dag.tasks:
        if task.task_id in GPU_STEPS:
            assert (task.pool, task.pool_slots) == ("gpus", 1), task.task_id
        else:  # CPU steps: the cpu pool on Kubernetes, Airflow's parallelism locally
            assert task.pool != "gpus", task.task_id
