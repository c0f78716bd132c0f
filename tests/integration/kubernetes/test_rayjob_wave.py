"""The kuberay mode's create, wait and delete path against the test Kubernetes API: the
test plays KubeRay's controller by advancing the RayJob's status, to success and to a
driver failure, through the deferrable trigger and through the polling fallback."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from types import SimpleNamespace

import pytest
from airflow.sdk.exceptions import AirflowException, TaskDeferred

from synthfactory_airflow.operators.rayjob import GROUP, PLURAL
from synthfactory_airflow.operators.rayjob_operator import RayJobWaveOperator, rayjob_name
from tests.kube_api import KubeApiDouble, node

pytestmark = pytest.mark.kubernetes_e2e

NS = "synthfactory"
PLAN = [{"rephrase": ["rephrase", "--shard", f"file:///run/prompts/shard-0000{i}.parquet",
                      "--out", "file:///run", "--replicas", "2"]} for i in range(3)]
RUNNING = {"jobDeploymentStatus": "Running", "jobStatus": "RUNNING"}
DONE = {"jobDeploymentStatus": "Complete", "jobStatus": "SUCCEEDED", "jobId": "raysubmit_1",
        "startTime": "2026-01-01T00:00:00Z", "endTime": "2026-01-01T01:00:00Z"}
FAILED = {"jobDeploymentStatus": "Complete", "jobStatus": "FAILED",
          "message": "Job entrypoint command failed with exit code 3, last available logs: "
                     "synthfactory rephrase: error: --shard file:///run/prompts/shard-00001"
                     ".parquet: not found"}


@pytest.fixture
def cluster(tmp_path, monkeypatch):
    double = KubeApiDouble([node("gpu-a", {"synthfactory.io/pool": "gpu"}, cpu="64",
                                 memory="512Gi", gpus=8)], tmp_path / "pods")
    with double:
        config = double.kubeconfig(tmp_path / "kubeconfig")
        monkeypatch.setenv("AIRFLOW_CONN_K8S_GPU", json.dumps(
            {"conn_type": "kubernetes", "extra": {"kube_config_path": str(config)}}))
        yield double


def _operator(**kwargs) -> RayJobWaveOperator:
    return RayJobWaveOperator(task_id="rephrase_wave", kubernetes_conn_id="k8s_gpu",
                              namespace=NS, image="worker:test", workers=2, gpus_per_worker=8,
                              secret_name="worker-env", poll_interval=0.1, **kwargs)


def _context(try_number: int = 1) -> dict:
    ti = SimpleNamespace(dag_id="synthetic_rephrase", try_number=try_number,
                         xcom_pull=lambda task_ids: PLAN)
    return {"ti": ti, "run_id": "scheduled__2026-01-01"}


def _controller(cluster: KubeApiDouble, name: str, final: dict) -> threading.Thread:
    """KubeRay's part: once the job exists, Running, then ``final``."""
    def play():
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if any(k[4] == name for k in cluster.custom):
                cluster.set_custom_status(GROUP, PLURAL, NS, name, RUNNING)
                time.sleep(0.5)
                cluster.set_custom_status(GROUP, PLURAL, NS, name, final)
                return
            time.sleep(0.05)
    thread = threading.Thread(target=play, daemon=True)
    thread.start()
    return thread


def _run_deferred(operator, context) -> dict:
    with pytest.raises(TaskDeferred) as deferred:
        operator.execute(context)
    trigger = deferred.value.trigger

    async def first_event():
        async for event in trigger.run():
            return event.payload
    event = asyncio.run(first_event())
    return operator.execute_complete(context, event)


def test_deferred_wait_succeeds_and_deletes_the_job(cluster):
    name = rayjob_name("synthetic_rephrase", "scheduled__2026-01-01", 1)
    _controller(cluster, name, DONE)
    result = _run_deferred(_operator(), _context())
    assert result["job_status"] == "SUCCEEDED" and result["rayjob"] == name
    assert not any(k[4] == name for k in cluster.custom), "the RayJob is deleted afterwards"
    methods = [(m, p) for m, p in cluster.requests if "/rayjobs" in p]
    assert methods[0] == ("POST", f"/apis/ray.io/v1/namespaces/{NS}/rayjobs")
    assert methods[-1] == ("DELETE", f"/apis/ray.io/v1/namespaces/{NS}/rayjobs/{name}")


def test_driver_failure_is_surfaced_and_the_job_deleted(cluster):
    name = rayjob_name("synthetic_rephrase", "scheduled__2026-01-01", 1)
    _controller(cluster, name, FAILED)
    with pytest.raises(AirflowException, match="shard-00001.parquet: not found"):
        _run_deferred(_operator(), _context())
    assert not any(k[4] == name for k in cluster.custom)


def test_polling_fallback_and_reattach_after_a_killed_task_process(cluster):
    name = rayjob_name("synthetic_rephrase", "scheduled__2026-01-01", 2)
    # the first process of try 2 created the job, then died; the job keeps running
    operator = _operator(deferrable=False)
    _controller(cluster, name, DONE)
    with pytest.raises(TaskDeferred):  # the deferrable first attempt created it
        _operator().execute(_context(try_number=2))
    posts_before = sum(1 for m, p in cluster.requests if m == "POST" and "/rayjobs" in p)
    result = operator.execute(_context(try_number=2))  # the restarted process: reattaches
    assert result["job_status"] == "SUCCEEDED"
    posts = sum(1 for m, p in cluster.requests if m == "POST" and "/rayjobs" in p)
    assert posts == posts_before + 1  # it asked, got 409, and waited on the same job
    assert not any(k[4] == name for k in cluster.custom)
