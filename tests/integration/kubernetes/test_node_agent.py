"""Pods on a real control plane, run by the node agent: the real scheduler places them, the
agent runs them, and logs and exec travel through the real apiserver to the agent's kubelet
endpoint. The cncf provider's PodManager drives a pod end to end under the launcher
ServiceAccount of deploy/, as the KubernetesPodOperator does; faults look like a node's."""

from __future__ import annotations

import asyncio
import json
import sys
import time

import pytest
from airflow.providers.cncf.kubernetes.utils.pod_manager import PodManager
from airflow.providers.cncf.kubernetes.utils.xcom_sidecar import add_xcom_sidecar
from kubernetes import client
from kubernetes.client import models as k8s

from tests.kube_api import NodeAgent, node_spec
from tests.support.kube_control_plane import NAMESPACE

pytestmark = pytest.mark.kubernetes_e2e
NS = NAMESPACE

SCRIPT = """
import json, os, sys, time
print("hello from", os.environ["GREETING_FROM"], flush=True)
print("token", "set" if os.environ.get("API_TOKEN") == "s3cret" else "unset", flush=True)
print("pod", os.environ.get("MY_POD"), flush=True)
time.sleep(float(sys.argv[1]))
path = os.environ["SYNTHFACTORY_RESULT_FILE"]
os.makedirs(os.path.dirname(path), exist_ok=True)
open(path, "w").write(json.dumps({"rows": 3}))
sys.exit(int(sys.argv[2]))
"""


@pytest.fixture
def agent(control_plane, tmp_path):
    core = control_plane.core()
    secret = k8s.V1Secret(metadata=k8s.V1ObjectMeta(name="agent-test-env"),
                          string_data={"API_TOKEN": "s3cret"})
    core.create_namespaced_secret(NS, secret)
    nodes = [node_spec("cpu-a", {"pool": "cpu"}, cpu="4", memory="8Gi"),
             node_spec("gpu-a", {"pool": "gpu"}, cpu="8", memory="64Gi", gpus=1)]
    with NodeAgent(control_plane.kubeconfig, nodes, tmp_path / "pods",
                   commands={"python": sys.executable}, base_env={"PATH": "/usr/bin"}) as running:
        yield running
    core.delete_namespaced_secret("agent-test-env", NS)


@pytest.fixture
def core(control_plane, agent):
    return control_plane.core()


@pytest.fixture
def launcher(control_plane, tmp_path):
    """The launcher ServiceAccount's client: what Airflow's connection holds."""
    kubeconfig = control_plane.service_account_kubeconfig(tmp_path / "launcher.kubeconfig",
                                                          "synthfactory-launcher")
    return control_plane.core(kubeconfig)


def pod_request(name, seconds=0.5, code=0, requests=None, selector=None, tolerations=None):
    pod = k8s.V1Pod(
        metadata=k8s.V1ObjectMeta(name=name, namespace=NS, labels={"app": "t", "run": name}),
        spec=k8s.V1PodSpec(
            restart_policy="Never", node_selector=selector or {"pool": "cpu"},
            tolerations=tolerations, termination_grace_period_seconds=2,
            containers=[k8s.V1Container(
                name="base", image="worker:1", command=["python", "-c", SCRIPT],
                args=[str(seconds), str(code)],
                env=[k8s.V1EnvVar(name="GREETING_FROM", value="the pod"),
                     k8s.V1EnvVar(name="MY_POD", value_from=k8s.V1EnvVarSource(
                         field_ref=k8s.V1ObjectFieldSelector(field_path="metadata.name"))),
                     k8s.V1EnvVar(name="SYNTHFACTORY_RESULT_FILE",
                                  value="/airflow/xcom/return.json")],
                env_from=[k8s.V1EnvFromSource(secret_ref=k8s.V1SecretEnvSource(
                    name="agent-test-env"))],
                # extended resources (nvidia.com/gpu) must have limits equal to requests
                resources=k8s.V1ResourceRequirements(
                    requests=requests or {"cpu": "1"},
                    limits={k: v for k, v in (requests or {}).items() if "/" in k} or None))]))
    return add_xcom_sidecar(pod)


def _base(pod):
    return next(s for s in pod.status.container_statuses or [] if s.name == "base")


def _terminated(core, name):
    def check():
        pod = core.read_namespaced_pod(name, NS)
        statuses = [s for s in pod.status.container_statuses or [] if s.name == "base"]
        return pod if statuses and statuses[0].state.terminated else None
    return check


def test_a_pod_runs_logs_and_hands_its_xcom_through_the_sidecar(agent, launcher):
    manager = PodManager(kube_client=launcher)
    pod = pod_request("ok")
    created = manager.create_pod(pod)
    assert isinstance(created, k8s.V1Pod) and created.metadata.uid
    asyncio.run(manager.await_pod_start(pod, schedule_timeout=30, startup_timeout=30))
    status = manager.fetch_container_logs(pod, "base", follow=True)
    assert status.running is False
    logs = launcher.read_namespaced_pod_log("ok", NS, container="base")
    assert "hello from the pod" in logs and "token set" in logs and "pod ok" in logs
    manager.await_xcom_sidecar_container_start(pod)
    assert json.loads(manager.extract_xcom(pod)) == {"rows": 3}  # exec through the apiserver
    manager.await_pod_completion(pod, do_xcom_push=True)
    # the sidecar's shell traps the SIGINT the provider sent through exec and exits 0
    final = agent.wait_for(lambda: (p := launcher.read_namespaced_pod("ok", NS)).status.phase
                           == "Succeeded" and p, timeout=20, what="the pod Succeeded")
    assert _base(final).state.terminated.exit_code == 0
    assert final.spec.node_name == "cpu-a"  # placed by kube-scheduler
    events = manager.read_pod_events(pod)
    assert {"Scheduled", "Started"} <= {e.reason for e in events.items}
    manager.delete_pod(pod)
    agent.wait_for(lambda: not launcher.list_namespaced_pod(
        NS, field_selector="metadata.name=ok").items, timeout=20, what="the pod gone")
    served = [kind for kind, name in agent.served if name == "ok"]
    assert "containerLogs" in served and "exec" in served


def test_a_failing_pod_reports_its_exit_code(agent, core):
    core.create_namespaced_pod(NS, pod_request("bad", seconds=0, code=3))
    pod = agent.wait_for(_terminated(core, "bad"), what="the base container ending")
    terminated = _base(pod).state.terminated
    assert (terminated.exit_code, terminated.reason) == (3, "Error")
    assert pod.status.phase == "Running"  # the xcom sidecar still runs


def test_a_pod_that_fits_no_node_stays_pending_and_says_why(agent, core):
    core.create_namespaced_pod(NS, pod_request("huge", requests={"cpu": "64"}))

    def unschedulable():
        pod = core.read_namespaced_pod("huge", NS)
        conditions = pod.status.conditions or []
        return pod if conditions and conditions[0].reason == "Unschedulable" else None
    pod = agent.wait_for(unschedulable, timeout=30, what="the scheduler's verdict")
    assert pod.status.phase == "Pending"
    assert "Insufficient cpu" in pod.status.conditions[0].message
    events = core.list_namespaced_event(NS, field_selector="involvedObject.name=huge")
    assert "FailedScheduling" in {e.reason for e in events.items}


def test_gpu_pods_need_the_toleration_and_a_free_gpu(agent, core):
    gpu = {"cpu": "1", "nvidia.com/gpu": "1"}
    core.create_namespaced_pod(NS, pod_request("no-tol", requests=gpu, selector={"pool": "gpu"}))
    tol = [k8s.V1Toleration(key="nvidia.com/gpu", operator="Exists", effect="NoSchedule")]
    core.create_namespaced_pod(NS, pod_request("g1", seconds=20, requests=gpu,
                                               selector={"pool": "gpu"}, tolerations=tol))
    agent.wait_for(lambda: core.read_namespaced_pod("g1", NS).spec.node_name, timeout=30,
                   what="g1 bound")
    core.create_namespaced_pod(NS, pod_request("g2", requests=gpu, selector={"pool": "gpu"},
                                               tolerations=tol))

    def messages():
        found = {p.metadata.name: ((p.status.conditions or [None])[0])
                 for p in core.list_namespaced_pod(NS).items}
        found = {k: (c.message or "") for k, c in found.items() if c is not None}
        return found if {"no-tol", "g2"} <= {k for k, m in found.items() if m} else None
    found = agent.wait_for(messages, timeout=30, what="both verdicts")
    assert "taint" in found["no-tol"] and "nvidia.com/gpu" in found["no-tol"]
    assert "Insufficient nvidia.com/gpu" in found["g2"]


@pytest.mark.parametrize("fault, exit_code, reason, phase", [
    ("OOMKilled", 137, "OOMKilled", "Running"),
    ("Evicted", 137, "Error", "Failed"),
])
def test_injected_faults_look_like_the_node_did_it(agent, core, fault, exit_code, reason, phase):
    core.create_namespaced_pod(NS, pod_request("victim", seconds=30))
    agent.wait_for(lambda: "hello" in _safe_logs(agent, "victim"), what="the pod logging")
    agent.inject(NS, "victim", fault)
    pod = agent.wait_for(_terminated(core, "victim"), what="the base container ending")
    terminated = _base(pod).state.terminated
    assert (terminated.exit_code, terminated.reason) == (exit_code, reason)
    assert pod.status.phase == phase
    if fault == "Evicted":
        assert pod.status.reason == "Evicted"


def test_a_pod_deleted_while_it_runs_is_stopped_then_gone(agent, core):
    core.create_namespaced_pod(NS, pod_request("doomed", seconds=30))
    agent.wait_for(lambda: "hello" in _safe_logs(agent, "doomed"), what="the pod logging")
    process = agent.run_of(NS, "doomed").containers[0].process
    core.delete_namespaced_pod("doomed", NS)  # with its grace period, as kubectl does
    assert process.wait(10) < 0
    agent.wait_for(lambda: not core.list_namespaced_pod(
        NS, field_selector="metadata.name=doomed").items, timeout=20, what="the pod gone")


def test_a_lost_node_goes_not_ready_and_its_pods_are_evicted(agent, core):
    core.create_namespaced_pod(NS, pod_request("stranded", seconds=120))
    agent.wait_for(lambda: "hello" in _safe_logs(agent, "stranded"), what="the pod logging")
    started = time.monotonic()
    agent.lose_node("cpu-a")

    def not_ready():
        node = core.read_node("cpu-a")
        ready = next(c for c in node.status.conditions if c.type == "Ready")
        return node if ready.status != "True" else None
    agent.wait_for(not_ready, timeout=60, what="cpu-a NotReady")
    went_not_ready = time.monotonic() - started
    # the node lifecycle controller taints it a moment after the condition changes
    node = agent.wait_for(lambda: (n := core.read_node("cpu-a")) and any(
        t.key.startswith("node.kubernetes.io/") for t in n.spec.taints or []) and n,
        timeout=30, what="cpu-a tainted")
    assert any(t.key.startswith("node.kubernetes.io/") for t in node.spec.taints or [])
    # the taint manager evicts the pod once its (5 s) unreachable toleration runs out; with
    # no kubelet to confirm, it stays Terminating, as on a real cluster
    pod = agent.wait_for(lambda: core.read_namespaced_pod("stranded", NS).metadata
                         .deletion_timestamp and core.read_namespaced_pod("stranded", NS),
                         timeout=60, what="the pod evicted")
    assert pod.metadata.deletion_timestamp is not None
    print(f"RESULT node-lost: NotReady after {went_not_ready:.1f} s, evicted after "
          f"{time.monotonic() - started:.1f} s")


def test_rbac_holds_the_launcher_to_its_role(agent, launcher):
    with pytest.raises(client.ApiException) as denied:
        launcher.list_namespaced_secret(NS)
    assert denied.value.status == 403
    body = json.loads(denied.value.body)
    assert body["message"] == (
        'secrets is forbidden: User "system:serviceaccount:synthfactory:synthfactory-launcher" '
        'cannot list resource "secrets" in API group "" in the namespace "synthfactory"')


def _safe_logs(agent, name):
    try:
        return agent.logs(NS, name)
    except KeyError:
        return ""
