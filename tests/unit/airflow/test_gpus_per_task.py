"""gpus_per_task: an N-GPU rephrase pod asks N GPUs (and N times the per-GPU cpu and
memory), runs N engine replicas, and the capacity sensor's wave asks the same."""

from __future__ import annotations

import copy
from types import SimpleNamespace

import kubernetes_validate
import pytest

from synthfactory_airflow.operators.kubernetes import GPU_POLICY, per_gpu, per_gpu_template
from tests.support.dag_pods import built_pod, offline_kube, pod_tasks
from tests.support.paths import ROOT

PLAN = [{"rephrase": ["rephrase"], "validate": ["validate"]}] * 2


@pytest.fixture(scope="module")
def tasks(tmp_path_factory):
    with offline_kube(tmp_path_factory.mktemp("kube")):
        yield pod_tasks({})


def _pod(task, gpus: int) -> dict:
    task = copy.copy(task)
    ti = SimpleNamespace(dag_id=task.dag_id, task_id=task.task_id, map_index=0, try_number=1,
                         xcom_pull=lambda task_ids: PLAN)
    context = {"ti": ti, "run_id": "manual__1", "dag": task.dag,
               "params": {**task.dag.params, "gpus_per_task": gpus}}
    task.arguments = ["--help"]
    task.render_template_fields(context)
    return built_pod(task, context)


def _resources(pod: dict) -> dict:
    base = next(c for c in pod["spec"]["containers"] if c["name"] == "base")
    return base["resources"]


@pytest.mark.parametrize("gpus", [1, 4, 8])
def test_rephrase_pod_asks_that_many_gpus(tasks, gpus):
    pod = _pod(tasks[("synthetic_rephrase", "shard.rephrase")], gpus)
    requests = _resources(pod)["requests"]
    assert requests["nvidia.com/gpu"] == str(gpus)
    assert requests["cpu"] == str(8 * gpus) and requests["memory"] == f"{64 * gpus}Gi"
    assert _resources(pod)["limits"]["nvidia.com/gpu"] == str(gpus)
    kubernetes_validate.validate(pod, "1.33.0", strict=True)


def test_building_twice_does_not_compound(tasks):
    task = tasks[("synthetic_rephrase", "shard.rephrase")]
    _pod(task, 4)
    assert _resources(_pod(task, 2))["requests"]["nvidia.com/gpu"] == "2"
    assert task.container_resources.requests == GPU_POLICY.requests


def test_other_gpu_steps_keep_one_gpu(tasks):
    pod = _pod(tasks[("synthetic_rephrase", "smoke_test_training")], 4)
    assert _resources(pod)["requests"]["nvidia.com/gpu"] == "1"


def test_plan_passes_replicas_equal_to_gpus(tasks):
    plan = tasks[("synthetic_rephrase", "plan_shards")]
    args = plan.arguments
    assert args[args.index("--replicas") + 1] == "{{ params.gpus_per_task }}"
    assert args.index("--replicas") > args.index("--")  # handed on to rephrase


def test_wave_asks_per_gpu_quantities_times_the_param():
    templates = per_gpu_template(GPU_POLICY.requests)
    assert templates["nvidia.com/gpu"] == "{{ 1 * params.gpus_per_task }}"
    assert templates["memory"] == "{{ 64 * params.gpus_per_task }}Gi"
    assert per_gpu({"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": "1"}, 3) == {
        "cpu": "24", "memory": "192Gi", "nvidia.com/gpu": "3"}


def test_sensor_renders_the_wave_for_the_run(tasks):
    from airflow.dag_processing.dagbag import DagBag

    dag = DagBag(dag_folder=str(ROOT / "dags")).dags["synthetic_rephrase"]
    sensor = copy.copy(dag.get_task("wait_for_capacity"))
    ti = SimpleNamespace(xcom_pull=lambda task_ids: PLAN)
    sensor.render_template_fields({"ti": ti, "params": {**dag.params, "gpus_per_task": 2}})
    gpu = next(g for g in sensor.wave if g["pool"] == "gpu")
    assert gpu["requests"]["cpu"] == "2"  # local runner: one core per CPU replica
