"""The Kubernetes API double answers the way the kubernetes client and the cncf provider's
PodManager expect: its responses deserialise into the client's models, pods are scheduled,
run, logged, exec'd into and fail the way a cluster makes them fail."""

from __future__ import annotations

import json
import sys
import time

import pytest
from airflow.providers.cncf.kubernetes.utils.pod_manager import PodManager
from airflow.providers.cncf.kubernetes.utils.xcom_sidecar import add_xcom_sidecar
from kubernetes import client, config, watch
from kubernetes.client import models as k8s

from tests.kube_api import KubeApiDouble, node

SCRIPT = """
import json, os, sys, time
print("hello from", os.environ["GREETING_FROM"], flush=True)
print("token", "set" if os.environ.get("API_TOKEN") == "s3cret" else "unset", flush=True)
time.sleep(float(sys.argv[1]))
path = os.environ["SYNTHFACTORY_RESULT_FILE"]
os.makedirs(os.path.dirname(path), exist_ok=True)
open(path, "w").write(json.dumps({"rows": 3}))
sys.exit(int(sys.argv[2]))
"""


@pytest.fixture
def cluster(tmp_path):
    double = KubeApiDouble(
        [node("cpu-a", {"pool": "cpu"}, cpu="4", memory="8Gi"),
         node("gpu-a", {"pool": "gpu"}, cpu="8", memory="64Gi", gpus=1)],
        tmp_path / "pods", commands={"python": sys.executable}, base_env={"PATH": "/usr/bin"})
    with double:
        double.add_secret("ns", "worker-env", {"API_TOKEN": "s3cret"})
        yield double


@pytest.fixture
def core(cluster, tmp_path):
    api_client = config.new_client_from_config(str(cluster.kubeconfig(tmp_path / "kubeconfig")))
    return client.CoreV1Api(api_client)


def pod_request(name, seconds=0.5, code=0, requests=None, selector=None, tolerations=None):
    pod = k8s.V1Pod(
        metadata=k8s.V1ObjectMeta(name=name, namespace="ns", labels={"app": "t", "run": name}),
        spec=k8s.V1PodSpec(
            restart_policy="Never", node_selector=selector or {"pool": "cpu"},
            tolerations=tolerations,
            containers=[k8s.V1Container(
                name="base", image="worker:1", command=["python", "-c", SCRIPT],
                args=[str(seconds), str(code)],
                env=[k8s.V1EnvVar(name="GREETING_FROM", value="the pod"),
                     k8s.V1EnvVar(name="SYNTHFACTORY_RESULT_FILE",
                                  value="/airflow/xcom/return.json")],
                env_from=[k8s.V1EnvFromSource(secret_ref=k8s.V1SecretEnvSource(
                    name="worker-env"))],
                resources=k8s.V1ResourceRequirements(requests=requests or {"cpu": "1"}))]))
    return add_xcom_sidecar(pod)


def test_a_pod_runs_logs_and_hands_its_xcom_through_the_sidecar(cluster, core):
    manager = PodManager(kube_client=core)
    pod = pod_request("ok")
    created = manager.create_pod(pod)
    assert isinstance(created, k8s.V1Pod) and created.metadata.uid
    import asyncio

    asyncio.run(manager.await_pod_start(pod, schedule_timeout=10, startup_timeout=10))
    status = manager.fetch_container_logs(pod, "base", follow=True)
    assert status.running is False
    logs = core.read_namespaced_pod_log("ok", "ns", container="base")
    assert "hello from the pod" in logs and "token set" in logs
    manager.await_xcom_sidecar_container_start(pod)
    assert json.loads(manager.extract_xcom(pod)) == {"rows": 3}
    final = manager.await_pod_completion(pod, do_xcom_push=True)
    assert final.status.phase == "Succeeded"
    base = next(s for s in final.status.container_statuses if s.name == "base")
    assert base.state.terminated.exit_code == 0
    assert final.spec.node_name == "cpu-a"
    events = manager.read_pod_events(pod)
    assert isinstance(events, k8s.CoreV1EventList)
    assert {"Scheduled", "Started"} <= {e.reason for e in events.items}
    manager.delete_pod(pod)
    assert cluster.deleted == ["ok"]
    with pytest.raises(client.ApiException) as gone:
        core.read_namespaced_pod("ok", "ns")
    assert gone.value.status == 404


def test_a_failing_pod_reports_its_exit_code(cluster, core):
    core.create_namespaced_pod("ns", pod_request("bad", seconds=0, code=3))
    cluster.wait_for(lambda: "terminated" in cluster.pods[("ns", "bad")].containers[0].state)
    pod = core.read_namespaced_pod("bad", "ns")
    base = next(s for s in pod.status.container_statuses if s.name == "base")
    assert (base.state.terminated.exit_code, base.state.terminated.reason) == (3, "Error")
    assert pod.status.phase == "Running"  # the xcom sidecar still runs


def test_a_pod_that_fits_no_node_stays_pending_and_says_why(cluster, core):
    core.create_namespaced_pod("ns", pod_request("huge", requests={"cpu": "64"}))
    time.sleep(0.5)
    pod = core.read_namespaced_pod("huge", "ns")
    assert pod.status.phase == "Pending"
    scheduled = pod.status.conditions[0]
    assert (scheduled.type, scheduled.status, scheduled.reason) == (
        "PodScheduled", "False", "Unschedulable")
    assert "Insufficient cpu" in scheduled.message
    events = core.list_namespaced_event("ns", field_selector="involvedObject.name=huge")
    assert [e.reason for e in events.items] == ["FailedScheduling"]
    assert events.items[0].count >= 2  # the scheduler keeps trying


def test_gpu_pods_need_the_toleration_and_a_free_gpu(cluster, core):
    gpu = {"cpu": "1", "nvidia.com/gpu": "1"}
    core.create_namespaced_pod("ns", pod_request("no-tol", requests=gpu, selector={"pool": "gpu"}))
    tol = [k8s.V1Toleration(key="nvidia.com/gpu", operator="Exists", effect="NoSchedule")]
    core.create_namespaced_pod("ns", pod_request("g1", seconds=5, requests=gpu,
                                                 selector={"pool": "gpu"}, tolerations=tol))
    core.create_namespaced_pod("ns", pod_request("g2", requests=gpu, selector={"pool": "gpu"},
                                                 tolerations=tol))
    cluster.wait_for(lambda: cluster.pods[("ns", "g1")].body["spec"].get("nodeName"))
    time.sleep(0.4)
    messages = {p.metadata.name: (p.status.conditions[0].message or "")
                for p in core.list_namespaced_pod("ns").items}
    assert "untolerated taint" in messages["no-tol"]
    assert "Insufficient nvidia.com/gpu" in messages["g2"]


def test_list_and_watch_filter_by_labels_and_fields(cluster, core):
    core.create_namespaced_pod("ns", pod_request("w1", seconds=0))
    core.create_namespaced_pod("ns", pod_request("w2", seconds=30))
    listed = core.list_namespaced_pod("ns", label_selector="app=t,run!=w2,!missing")
    assert [p.metadata.name for p in listed.items] == ["w1"]
    core.patch_namespaced_pod("w1", "ns", {"metadata": {"labels": {"checked": "True"}}})
    assert core.list_namespaced_pod("ns", label_selector="checked!=True,app=t").items[0] \
        .metadata.name == "w2"
    seen = []
    for event in watch.Watch().stream(core.list_namespaced_pod, "ns",
                                      field_selector="metadata.name=w1", timeout_seconds=5):
        assert isinstance(event["object"], k8s.V1Pod)
        seen.append((event["type"], event["object"].status.phase))
        if event["object"].status.phase == "Running" and any(
                s.state.terminated for s in event["object"].status.container_statuses
                if s.name == "base"):
            break
    assert seen[0][0] == "ADDED"
    running = core.list_pod_for_all_namespaces(field_selector="status.phase!=Succeeded")
    assert {p.metadata.name for p in running.items} == {"w1", "w2"}
    nodes = core.list_node(limit=1)
    assert isinstance(nodes, k8s.V1NodeList) and len(nodes.items) == 1
    assert nodes.metadata._continue


@pytest.mark.parametrize("fault, exit_code, reason, phase", [
    ("OOMKilled", 137, "OOMKilled", "Running"),
    ("Evicted", 137, "Error", "Failed"),
])
def test_injected_faults_look_like_the_cluster_did_it(cluster, core, fault, exit_code, reason,
                                                      phase):
    core.create_namespaced_pod("ns", pod_request("victim", seconds=30))
    cluster.wait_for(lambda: cluster.pods[("ns", "victim")].logs)
    cluster.inject("victim", fault)
    cluster.wait_for(lambda: "terminated" in cluster.pods[("ns", "victim")].containers[0].state)
    pod = core.read_namespaced_pod("victim", "ns")
    base = next(s for s in pod.status.container_statuses if s.name == "base")
    assert (base.state.terminated.exit_code, base.state.terminated.reason) == (exit_code, reason)
    assert pod.status.phase == phase
    if fault == "Evicted":
        assert pod.status.reason == "Evicted"


def test_a_pod_deleted_while_it_runs_is_gone(cluster, core):
    core.create_namespaced_pod("ns", pod_request("doomed", seconds=30))
    cluster.wait_for(lambda: cluster.pods[("ns", "doomed")].logs)
    process = cluster.pods[("ns", "doomed")].process
    cluster.inject("doomed", "Deleted")
    assert process.wait(5) < 0
    with pytest.raises(client.ApiException) as gone:
        core.read_namespaced_pod("doomed", "ns")
    assert gone.value.status == 404
