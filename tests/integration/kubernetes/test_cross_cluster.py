"""CPU and GPU pools in two clusters: each pool's pods launch through its own Kubernetes
connection, and the wave sensor reads both clusters in one poke and admits the wave only
when both fit. Two real control planes, one of them full, read under the deploy kit's
capacity-reader ClusterRole."""

from __future__ import annotations

import json
import sys
import time

import pytest
from kubernetes import client, config
from kubernetes.client import models as k8s

from synthfactory_airflow.operators.kubernetes import pod_operator_kwargs
from synthfactory_airflow.operators.settings import Settings
from synthfactory_airflow.plugins.capacity.sensor import WaveCapacitySensor
from tests.kube_api import NodeAgent, node_spec
from tests.support.kube_control_plane import ControlPlane

pytestmark = pytest.mark.kubernetes_e2e

WAVE = [
    {"pool": "gpu", "count": 1, "requests": {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": "1"},
     "node_selector": {"synthfactory.io/pool": "gpu"},
     "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]},
    {"pool": "cpu", "count": 2, "requests": {"cpu": "2", "memory": "4Gi"},
     "node_selector": {"synthfactory.io/pool": "cpu"}},
]
BUSY = {"gpu": {"cpu": "1", "nvidia.com/gpu": "1"}, "cpu": {"cpu": "15", "memory": "1Gi"}}


NODES = {"cpu": node_spec("cpu-a", {"synthfactory.io/pool": "cpu"}, "16", "64Gi"),
         "gpu": node_spec("gpu-a", {"synthfactory.io/pool": "gpu"}, "32", "256Gi", gpus=1)}


@pytest.fixture
def clusters(tmp_path, monkeypatch, control_planes, control_plane):
    agents = {}
    for pool, plane in control_planes.items():
        agents[pool] = NodeAgent(plane.kubeconfig, [NODES[pool]], tmp_path / pool,
                                 commands={"python": sys.executable}).start()
        kubeconfig = plane.service_account_kubeconfig(tmp_path / f"kubeconfig-{pool}",
                                                      "synthfactory-launcher")
        monkeypatch.setenv(f"AIRFLOW_CONN_K8S_{pool.upper()}", json.dumps(
            {"conn_type": "kubernetes", "extra": {"kube_config_path": str(kubeconfig)}}))
    yield {pool: (control_planes[pool], agent) for pool, agent in agents.items()}
    for agent in agents.values():
        agent.stop()
    for plane in control_planes.values():
        plane.clear_namespace("other-team")


def occupy(cluster: tuple[ControlPlane, NodeAgent], pool: str) -> client.CoreV1Api:
    """A pod of another team that holds the pool's capacity until it is deleted."""
    plane, agent = cluster
    core = client.CoreV1Api(config.new_client_from_config(str(plane.kubeconfig)))
    try:
        core.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name="other-team")))
    except client.ApiException as err:
        if err.status != 409:
            raise
    plane.wait_service_account("default", "other-team")
    plane.create_pod(core, "other-team", k8s.V1Pod(
        metadata=k8s.V1ObjectMeta(name="busy"),
        spec=k8s.V1PodSpec(
            node_selector={"synthfactory.io/pool": pool},
            tolerations=[k8s.V1Toleration(key="nvidia.com/gpu", operator="Exists")],
            containers=[k8s.V1Container(
                name="base", image="other:1", command=["python", "-c", "import time; "
                                                       "time.sleep(120)"],
                # an extended resource (nvidia.com/gpu) needs its limit set
                resources=k8s.V1ResourceRequirements(
                    requests=BUSY[pool],
                    limits={k: v for k, v in BUSY[pool].items() if "/" in k} or None))])))
    agent.wait_for(lambda: agent.run_of("other-team", "busy"), what="busy pod")
    return core


def sensor() -> WaveCapacitySensor:
    return WaveCapacitySensor(task_id="wait_for_capacity", wave=WAVE, cluster="kubernetes",
                              namespace="synth", kubernetes_conn_id="k8s_cpu",
                              pool_connections={"gpu": "k8s_gpu", "cpu": "k8s_cpu"},
                              poke_interval=0.1, timeout=10)


@pytest.mark.parametrize("full", ["gpu", "cpu"])
def test_the_wave_waits_while_either_cluster_is_full(clusters, full):
    core = occupy(clusters[full], full)
    task = sensor()
    result = task._check().run()
    assert not result.fits
    # one check read both clusters
    assert "k8s_cpu: 1 nodes" in result.table and "k8s_gpu: 1 nodes" in result.table
    assert not task.poke({}).is_done
    core.delete_namespaced_pod("busy", "other-team", grace_period_seconds=1)
    deadline = time.monotonic() + 30
    while not (done := task.poke({})).is_done and time.monotonic() < deadline:
        time.sleep(0.2)  # the kubelet's part: stop the pod, then delete it for good
    assert done.is_done
    assert done.xcom_value["placements"] == {"gpu": {"gpu-a": 1}, "cpu": {"cpu-a": 2}}


def test_a_gpu_wave_checked_against_the_cpu_cluster_alone_never_fits(clusters):
    one_cluster = WaveCapacitySensor(task_id="w", wave=WAVE, cluster="kubernetes",
                                     kubernetes_conn_id="k8s_cpu", fail_when_impossible=True,
                                     poke_interval=0.1, timeout=5)
    result = one_cluster._check().run()
    assert not result.fits and result.never and "gpu" in result.never


def test_each_pool_launches_through_its_own_connection(monkeypatch):
    monkeypatch.setenv("SYNTHFACTORY_KUBERNETES_CONN_ID", "k8s_main")
    monkeypatch.delenv("SYNTHFACTORY_CPU_KUBERNETES_CONN_ID", raising=False)
    monkeypatch.setenv("SYNTHFACTORY_GPU_KUBERNETES_CONN_ID", "k8s_gpu")
    settings = Settings(runner="kubernetes")
    assert pod_operator_kwargs("gpu", settings, "rephrase_shard")["kubernetes_conn_id"] == \
        "k8s_gpu"
    assert pod_operator_kwargs("cpu", settings, "validate_shard")["kubernetes_conn_id"] == \
        "k8s_main"  # unset: the single connection of before
    monkeypatch.delenv("SYNTHFACTORY_GPU_KUBERNETES_CONN_ID")
    assert Settings(runner="kubernetes").kubernetes_conn_for("gpu") == "k8s_main"
