"""replicas: a rephrase pod of N engine replicas asks N GPUs (and N times the per-GPU cpu
and memory), runs N replicas, and the capacity sensor's wave asks the same. The Param's
former name, gpus_per_task, sent by a saved conf, still does all of it (param_names.py)."""

from __future__ import annotations

import copy
from types import SimpleNamespace

import kubernetes_validate
import pendulum
import pytest

from synthfactory_airflow.operators.kubernetes import per_gpu
from synthfactory_airflow.plugins.capacity.quantities import parse_resource
from tests.support.dag_pods import built_pod, offline_kube, pod_tasks
from tests.support.paths import ROOT

PLAN = [{"rephrase": ["rephrase"], "validate": ["validate"]}] * 2
# the Param, and its former name that a saved conf may still send
KEYS = ["replicas", "gpus_per_task"]


@pytest.fixture(scope="module")
def tasks(tmp_path_factory):
    with offline_kube(tmp_path_factory.mktemp("kube")):
        yield pod_tasks({})


def _pod(task, gpus: int, key: str = "replicas") -> dict:
    task = copy.copy(task)
    ti = SimpleNamespace(dag_id=task.dag_id, task_id=task.task_id, map_index=0, try_number=1,
                         xcom_pull=lambda task_ids: PLAN)
    context = {"ti": ti, "run_id": "manual__1", "dag": task.dag,
               "params": {**task.dag.params, key: gpus}}
    task.arguments = ["--help"]
    task.render_template_fields(context)
    return built_pod(task, context)


def _resources(pod: dict) -> dict:
    base = next(c for c in pod["spec"]["containers"] if c["name"] == "base")
    return base["resources"]


def _quantities(resources: dict) -> dict[str, int]:
    return {name: parse_resource(name, value) for name, value in (resources or {}).items()}


@pytest.mark.parametrize("key", KEYS)
@pytest.mark.parametrize("gpus", [2, 4, 8])
def test_rephrase_pod_asks_that_many_gpus(tasks, gpus, key):
    """The N-GPU rephrase pod asks exactly N times what the 1-GPU pod asks, every
    quantity (GPUs, cpu, memory), requests and limits, and stays a valid pod. Seen
    failing: per_gpu scaling only nvidia.com/gpu (cpu and memory left per one GPU)."""
    task = tasks[("synthetic_rephrase", "shard.rephrase")]
    one, many = _resources(_pod(task, 1)), _resources(_pod(task, gpus, key))
    assert _quantities(one["requests"])["nvidia.com/gpu"] == 1
    for side in ("requests", "limits"):
        assert _quantities(many[side]) == {
            name: gpus * value for name, value in _quantities(one[side]).items()}, side
    kubernetes_validate.validate(_pod(task, gpus, key), "1.33.0", strict=True)


def test_building_twice_does_not_compound(tasks):
    """Building a pod leaves the operator's own resources as they were: a retry (a
    second build) asks the same as the first. Seen failing: build_pod_request_obj
    scaling the operator's own ``container_resources`` in place (each build multiplies)."""
    task = tasks[("synthetic_rephrase", "shard.rephrase")]
    before = copy.deepcopy(task.container_resources.to_dict())
    first = _resources(_pod(task, 2))
    _pod(task, 4)
    assert _resources(_pod(task, 2)) == first
    assert task.container_resources.to_dict() == before


def test_other_gpu_steps_keep_one_gpu(tasks):
    """replicas sizes the rephrase pod only: the smoke test's pod is the same."""
    task = tasks[("synthetic_rephrase", "smoke_test_training")]
    assert _resources(_pod(task, 4)) == _resources(_pod(task, 1))


@pytest.mark.parametrize("key", KEYS)
@pytest.mark.parametrize("gpus", [1, 3])
def test_plan_passes_replicas_equal_to_gpus(tasks, gpus, key):
    """plan_shards' argv, rendered for a run of N GPUs, hands ``--replicas N`` on to
    rephrase (after ``--``). Seen failing: ``"--replicas", "1"`` in the DAG's plan argv
    (a copy of dags/, the value no longer taken from the Param)."""
    plan = tasks[("synthetic_rephrase", "plan_shards")]
    context = {"params": {**plan.dag.params, key: gpus},
               "data_interval_start": pendulum.datetime(2026, 12, 1)}
    args = plan.render_template(plan.arguments, context)
    assert args[args.index("--replicas") + 1] == str(gpus)
    assert args.index("--replicas") > args.index("--")  # handed on to rephrase


@pytest.mark.parametrize("key", KEYS)
@pytest.mark.parametrize("gpus", [1, 3])
def test_wave_asks_what_the_rephrase_pods_ask(tasks, gpus, key):
    """The capacity sensor (kubernetes runner) waits for one GPU pod per shard group, each
    asking what the built rephrase pod asks for that run's replicas. Seen failing:
    per_gpu_template dropping the factor (the wave asked for 1-GPU pods)."""
    dag = tasks[("synthetic_rephrase", "shard.rephrase")].dag
    sensor = copy.copy(dag.get_task("wait_for_capacity"))
    ti = SimpleNamespace(xcom_pull=lambda task_ids: PLAN)
    sensor.render_template_fields({"ti": ti, "params": {**dag.params, key: gpus}})
    (gpu,) = [g for g in sensor.wave if g["pool"] == "gpu"]
    pod = _pod(tasks[("synthetic_rephrase", "shard.rephrase")], gpus, key)
    assert int(gpu["count"]) == len(PLAN)
    assert _quantities(gpu["requests"]) == _quantities(_resources(pod)["requests"])
    assert gpu["node_selector"] == pod["spec"]["nodeSelector"]


def test_per_gpu_scales_every_quantity_with_its_unit():
    assert per_gpu({"cpu": "500m", "memory": "3Gi", "nvidia.com/gpu": "1"}, 3) == {
        "cpu": "1500m", "memory": "9Gi", "nvidia.com/gpu": "3"}


def test_sensor_renders_the_wave_for_the_run(tasks):
    from airflow.dag_processing.dagbag import DagBag

    dag = DagBag(dag_folder=str(ROOT / "dags")).dags["synthetic_rephrase"]
    sensor = copy.copy(dag.get_task("wait_for_capacity"))
    ti = SimpleNamespace(xcom_pull=lambda task_ids: PLAN)
    sensor.render_template_fields({"ti": ti, "params": {**dag.params, "replicas": 2}})
    gpu = next(g for g in sensor.wave if g["pool"] == "gpu")
    assert gpu["requests"]["cpu"] == "2"  # local runner: one core per CPU replica


def test_the_former_name_is_no_unknown_conf_key_and_says_it_is_deprecated():
    """check_params refuses a conf key no Param has, but not a Param's former name (it
    still works, above); that one gets its deprecation line instead."""
    from synthfactory.contract.param_names import deprecations
    from synthfactory_airflow.operators.param_rules import problems

    params = {"templates": ["qa"], "styles_per_doc": 1, "shard_tokens": 8192,
              "max_model_len": 2048, "replicas": 1, "gpus_per_task": 2}
    assert problems(params, {"gpus_per_task": 2}, ["templates", "replicas"]) == []
    assert problems(params, {"gpus_per_tusk": 2}, ["templates", "replicas"]) != []
    assert deprecations({"gpus_per_task": 2}) == [
        "conf key 'gpus_per_task' is deprecated, use 'replicas'"]
