"""The kuberay mode's create, wait and delete path on a real control plane, under the deploy
kit's launcher Role: the RayJob CRD (KubeRay's own schema) validates and stores the manifest,
the KubeRay operator double (tests/kube_api/kuberay_double.py) turns it into a RayCluster, a
head pod on a CPU node and worker pods on GPU nodes that the real scheduler places, then a
submitter Job that the real Job controller runs; the job's status comes from the submitter's
real exit. Deleting the RayJob removes everything through the real garbage collector."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from airflow.sdk.exceptions import AirflowException, TaskDeferred
from kubernetes import client

from synthfactory_airflow.operators.rayjob import GROUP, PLURAL, VERSION, rayjob_manifest
from synthfactory_airflow.operators.rayjob_operator import RayJobWaveOperator, rayjob_name
from tests.integration.kubernetes.e2e_support import NAMESPACE, needs_worker, pod_env, report
from tests.kube_api import NodeAgent, node_spec
from tests.kube_api.kuberay_double import KubeRayDouble
from tests.support.paths import WORKER

pytestmark = pytest.mark.kubernetes_e2e

NS = NAMESPACE
STANDIN = Path(__file__).resolve().parents[2] / "kube_api" / "ray_node_standin.sh"
PLAN = [{"rephrase": ["rephrase", "--shard", f"file:///run/prompts/shard-0000{i}.parquet",
                      "--run", "file:///run", "--replicas", "2"]} for i in range(3)]
POOL = "synthfactory.io/pool"
NODES = [node_spec("cpu-a", {POOL: "cpu"}, "16", "64Gi"),
         node_spec("gpu-a", {POOL: "gpu"}, "32", "256Gi", gpus=2),
         node_spec("gpu-b", {POOL: "gpu"}, "32", "256Gi", gpus=2)]


def _cluster(plane, tmp_path, monkeypatch, entrypoint_program: str):
    """Nodes (a CPU node for the head and submitter, two GPU nodes), the operator double,
    and the GPU connection holding the launcher ServiceAccount's token."""
    agent = NodeAgent(plane.kubeconfig, NODES, tmp_path / "pods", base_env=pod_env(),
                      commands={"synthfactory": entrypoint_program, "ray": str(STANDIN)})
    kubeconfig = plane.service_account_kubeconfig(tmp_path / "launcher.kubeconfig",
                                                  "synthfactory-launcher")
    monkeypatch.setenv("AIRFLOW_CONN_K8S_GPU", json.dumps(
        {"conn_type": "kubernetes", "extra": {"kube_config_path": str(kubeconfig)}}))
    return agent, KubeRayDouble(plane.kubeconfig, NS)


@pytest.fixture
def gpu_plane(control_planes, control_plane):
    return control_planes["gpu"]


def _operator(**kwargs) -> RayJobWaveOperator:
    return RayJobWaveOperator(task_id="rephrase_wave", kubernetes_conn_id="k8s_gpu",
                              namespace=NS, image="worker:test", workers=2, gpus_per_worker=2,
                              secret_name="synthfactory-worker-env", poll_interval=0.2, **kwargs)


def _context(try_number: int = 1) -> dict:
    ti = SimpleNamespace(dag_id="synthetic_rephrase", try_number=try_number,
                         xcom_pull=lambda task_ids: PLAN)
    return {"ti": ti, "run_id": "scheduled__2026-01-01"}


def _run_deferred(operator, context) -> dict:
    with pytest.raises(TaskDeferred) as deferred:
        operator.execute(context)
    trigger = deferred.value.trigger

    async def first_event():
        async for event in trigger.run():
            return event.payload
    event = asyncio.run(asyncio.wait_for(first_event(), 180))
    return operator.execute_complete(context, event)


def _all_gone(plane, agent, name: str) -> None:
    """The RayCluster, its pods, the submitter Job and its pod: removed by the garbage
    collector once the RayJob is deleted."""
    core, batch = plane.core(), client.BatchV1Api(plane.api())
    custom = client.CustomObjectsApi(plane.api())

    def gone():
        clusters = custom.list_namespaced_custom_object(GROUP, VERSION, NS, "rayclusters")
        return (not clusters["items"] and not batch.list_namespaced_job(NS).items
                and not core.list_namespaced_pod(NS).items)
    agent.wait_for(gone, timeout=90, what=f"everything of RayJob {name} garbage-collected")


def test_deferred_wait_succeeds_and_deletes_the_job(gpu_plane, tmp_path, monkeypatch):
    agent, kuberay = _cluster(gpu_plane, tmp_path, monkeypatch, "/bin/echo")
    name = rayjob_name("synthetic_rephrase", "scheduled__2026-01-01", 1)
    with agent, kuberay:
        result = _run_deferred(_operator(), _context())
        assert result["job_status"] == "SUCCEEDED" and result["rayjob"] == name
        flow = kuberay.flow[name]
        assert not kuberay.errors, kuberay.errors
        assert flow[0] == ("Initializing", "") and flow[1] == ("Running", "PENDING")
        assert flow[-1] == ("Complete", "SUCCEEDED")
        placed = {p["name"]: p["node"] for p in agent.started_pods}
        head = f"{name}-raycluster-head"
        workers = sorted(n for n in placed if "-worker-" in n)
        assert placed[head] == "cpu-a"  # the head in the CPU pool
        # two workers of 2 GPUs each: one per GPU node, placed by kube-scheduler
        assert sorted(placed[w] for w in workers) == ["gpu-a", "gpu-b"]
        submitter = next(n for n in placed if n.startswith(f"{name}-") and n not in
                         (head, *workers))
        # the submitter ran the wave's entrypoint over every group's shard
        ran = agent.logs(NS, submitter)
        assert ran.count("--shard") == 3 and "--ray-address auto" in ran
        assert "--replicas 4 --gpus-per-replica 1" in ran
        _all_gone(gpu_plane, agent, name)
    report("RESULT rayjob-flow: " + " -> ".join(f"{d}/{j or '-'}" for d, j in flow))


@needs_worker
def test_driver_failure_is_surfaced_and_the_job_deleted(gpu_plane, tmp_path, monkeypatch):
    agent, kuberay = _cluster(gpu_plane, tmp_path, monkeypatch, str(WORKER))
    name = rayjob_name("synthetic_rephrase", "scheduled__2026-01-01", 1)
    with agent, kuberay:
        # the real worker, given shards that do not exist, exits with its permanent code
        with pytest.raises(AirflowException, match="shard-0000") as failed:
            _run_deferred(_operator(), _context())
        message = str(failed.value)
        assert "ended FAILED (Complete)" in message
        assert "Job entrypoint command failed with exit code 3" in message
        assert kuberay.flow[name][-1] == ("Complete", "FAILED")
        _all_gone(gpu_plane, agent, name)


def test_polling_fallback_and_reattach_after_a_killed_task_process(gpu_plane, tmp_path,
                                                                   monkeypatch):
    agent, kuberay = _cluster(gpu_plane, tmp_path, monkeypatch, "/bin/echo")
    name = rayjob_name("synthetic_rephrase", "scheduled__2026-01-01", 2)
    custom = client.CustomObjectsApi(gpu_plane.api())
    with agent, kuberay:
        # the first process of try 2 created the job, then died; the job keeps running
        with pytest.raises(TaskDeferred):
            _operator().execute(_context(try_number=2))
        uid = custom.get_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, name)[
            "metadata"]["uid"]
        result = _operator(deferrable=False).execute(_context(try_number=2))  # reattaches
        assert result["job_status"] == "SUCCEEDED"
        # one RayJob only: the restarted process got 409 and waited on the same one
        assert kuberay.flow[name][0] == ("Initializing", "")
        assert [f for f in kuberay.flow[name] if f[0] == "Initializing"] == [("Initializing", "")]
        _all_gone(gpu_plane, agent, name)
    assert uid


def _missing(sent, stored, path="spec") -> list[str]:
    """Paths of ``sent`` that ``stored`` lacks or holds with another value."""
    if isinstance(sent, dict):
        if not isinstance(stored, dict):
            return [path]
        return [p for k, v in sent.items() for p in (
            _missing(v, stored[k], f"{path}.{k}") if k in stored else [f"{path}.{k}"])]
    if isinstance(sent, list):
        if not isinstance(stored, list) or len(sent) != len(stored):
            return [path]
        return [p for i, (a, b) in enumerate(zip(sent, stored, strict=True))
                for p in _missing(a, b, f"{path}[{i}]")]
    return [] if sent == stored else [path]


def test_kueue_gated_rayjob_is_stored_as_built_and_waits_suspended(gpu_plane):
    """The real apiserver validates the manifest against KubeRay's schema, prunes what it does
    not know and fills in the schema's defaults: every field sent comes back (nothing pruned),
    Kueue's queue label and the suspension included."""
    manifest = rayjob_manifest(name="gated-wave", namespace=NS, image="worker:test",
                               entrypoint=["rephrase", "--shard", "s"], workers=1,
                               gpus_per_worker=1, secret_name="synthfactory-worker-env",
                               kueue_queue="synthfactory", priority_class="synthfactory-batch")
    custom = client.CustomObjectsApi(gpu_plane.api())
    stored = custom.create_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, manifest)
    try:
        assert _missing(manifest["spec"], stored["spec"]) == []
        # a default of KubeRay's schema, filled in by the apiserver
        assert stored["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["numOfHosts"] == 1
        assert stored["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "synthfactory"
        assert stored["spec"]["suspend"] is True
    finally:
        custom.delete_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, "gated-wave")
