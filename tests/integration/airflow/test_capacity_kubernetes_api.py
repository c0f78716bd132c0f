"""WaveCapacitySensor and WaveCapacityTrigger against a Kubernetes API on 127.0.0.1.

No Kubernetes cluster runs in the test environment, so a small HTTP server stands in for
the API server: it serves /api/v1/nodes and /api/v1/pods JSON (with limit/continue paging
and the status.phase field selector, as the real one does), a Kueue ClusterQueue, and the
Airflow REST API's /auth/token and /api/v2/pools. The code under test reaches it through
the real `kubernetes` client and a kubeconfig, exactly as it would reach a cluster.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

import pytest
from airflow.sdk.exceptions import AirflowSensorTimeout, AirflowSkipException, TaskDeferred

from synthfactory_airflow.plugins.capacity.sensor import WaveCapacitySensor
from synthfactory_airflow.plugins.capacity.trigger import WaveCapacityTrigger
from tests.support.http import send_json
from tests.support.ports import free_port

GPU_WAVE = [
    {"pool": "gpu", "count": 2, "requests": {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": "1"},
     "node_selector": {"synthfactory.io/pool": "gpu"},
     "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]},
    {"pool": "cpu", "count": 4, "requests": {"cpu": "2", "memory": "4Gi"},
     "node_selector": {"synthfactory.io/pool": "cpu"}},
]


def node(name, pool, cpu, memory, gpus=0, max_pods="110"):
    allocatable = {"cpu": cpu, "memory": memory, "pods": max_pods}
    taints = []
    if gpus:
        allocatable["nvidia.com/gpu"] = str(gpus)
        taints = [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
    return {"metadata": {"name": name, "labels": {"synthfactory.io/pool": pool}},
            "spec": {"taints": taints},
            "status": {"allocatable": allocatable, "capacity": allocatable,
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def pod(name, node_name, cpu, memory="1Gi", gpus=0, phase="Running"):
    limits = {"cpu": cpu, "memory": memory}
    if gpus:
        limits["nvidia.com/gpu"] = str(gpus)
    return {"metadata": {"name": name, "namespace": "other-team"},
            "spec": {"nodeName": node_name, "containers": [
                {"name": "main", "resources": {"requests": {"cpu": cpu, "memory": memory},
                                               "limits": limits}}]},
            "status": {"phase": phase}}


class FakeApi:
    """The served state; `finish_after` pod listings, the busy pods succeed."""

    def __init__(self):
        self.nodes = [node("gpu-a", "gpu", "32", "256Gi", gpus=1),
                      node("gpu-b", "gpu", "32", "256Gi", gpus=1),
                      node("cpu-a", "cpu", "16", "64Gi")]
        self.pods = [pod("train-0", "gpu-a", "4", gpus=1), pod("train-1", "gpu-b", "4", gpus=1),
                     pod("etl-0", "cpu-a", "2")]
        self.finish_after: int | None = None
        self.pod_lists = 0
        self.pod_pages = 0
        self.cluster_queue: dict | None = None
        self.open_slots = {"gpu_pool": 4}
        self.lock = threading.Lock()

    def list_pods(self, query):
        with self.lock:
            if not query.get("continue"):
                self.pod_lists += 1
                if self.finish_after is not None and self.pod_lists > self.finish_after:
                    for item in self.pods:
                        if item["metadata"]["name"].startswith("train"):
                            item["status"]["phase"] = "Succeeded"
            self.pod_pages += 1
            excluded = {clause.split("!=")[1] for clause in
                        query.get("fieldSelector", "").split(",") if "!=" in clause}
            return [p for p in self.pods if p["status"]["phase"] not in excluded]


def _page(items, query, kind):
    start = int(query.get("continue") or 0)
    limit = int(query.get("limit") or len(items) or 1)
    end = start + limit
    metadata = {"resourceVersion": "42"}
    if end < len(items):
        metadata["continue"] = str(end)
    return {"kind": kind, "apiVersion": "v1", "metadata": metadata, "items": items[start:end]}


def _handler(api: FakeApi):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def _send(self, status, body):
            send_json(self, status, body)

        def do_GET(self):
            url = urlparse(self.path)
            query = {k: v[0] for k, v in parse_qs(url.query).items()}
            if url.path == "/api/v1/nodes":
                return self._send(200, _page(api.nodes, query, "NodeList"))
            if url.path == "/api/v1/pods":
                return self._send(200, _page(api.list_pods(query), query, "PodList"))
            if url.path == "/apis/kueue.x-k8s.io/v1beta1/clusterqueues/synth":
                return self._send(200, api.cluster_queue)
            if url.path.startswith("/api/v2/pools/"):
                if self.headers.get("Authorization") != "Bearer airflow-token":
                    return self._send(401, {"detail": "Not authenticated"})
                name = url.path.rsplit("/", 1)[1]
                if name not in api.open_slots:
                    return self._send(404, {"detail": f"pool {name} not found"})
                return self._send(200, {"name": name, "slots": 8,
                                        "open_slots": api.open_slots[name]})
            return self._send(404, {"kind": "Status", "code": 404})

        def do_POST(self):
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}")
            if self.path == "/auth/token" and body == {"username": "admin", "password": "pw"}:
                return self._send(201, {"access_token": "airflow-token"})
            return self._send(401, {"detail": "bad credentials"})

    return Handler


@pytest.fixture
def api():
    return FakeApi()


@pytest.fixture
def server(api):
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(api))
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05},
                              daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture
def kubeconfig(server, tmp_path):
    path = tmp_path / "kubeconfig"
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "fake",
        "clusters": [{"name": "fake", "cluster": {"server": server}}],
        "users": [{"name": "u", "user": {"token": "test"}}],
        "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "u"}}],
    }))
    return str(path)


def k8s_sensor(kubeconfig, wave=GPU_WAVE, **kwargs):
    kwargs.setdefault("poke_interval", 0.1)
    kwargs.setdefault("timeout", 10)
    return WaveCapacitySensor(task_id="wait_for_capacity", wave=wave, cluster="kubernetes",
                              namespace="synth", kubernetes_conn_id=None, config_file=kubeconfig,
                              **kwargs)


def test_sensor_waits_then_succeeds_when_pods_finish(api, kubeconfig):
    api.finish_after = 2  # both GPUs busy for the first two checks
    xcom = k8s_sensor(kubeconfig).execute({})
    assert api.pod_lists == 3
    assert xcom["placements"] == {"gpu": {"gpu-a": 1, "gpu-b": 1}, "cpu": {"cpu-a": 4}}
    assert xcom["namespace"] == "synth"


def test_sensor_reads_the_cluster_through_a_kubernetes_connection(api, kubeconfig, monkeypatch):
    extra = {"kube_config_path": kubeconfig}
    monkeypatch.setenv("AIRFLOW_CONN_K8S_TEST",
                       json.dumps({"conn_type": "kubernetes", "extra": extra}))
    api.finish_after = 0
    task = WaveCapacitySensor(task_id="w", wave=GPU_WAVE, cluster="kubernetes",
                              kubernetes_conn_id="k8s_test", poke_interval=0.1, timeout=5)
    assert task.poke({}).is_done


def test_sensor_times_out_cleanly_while_the_gpus_stay_busy(api, kubeconfig):
    started = time.monotonic()
    with pytest.raises(AirflowSensorTimeout, match="timed out"):
        k8s_sensor(kubeconfig, timeout=0.5).execute({})
    assert time.monotonic() - started < 5
    assert api.pod_lists >= 2  # it kept checking until the timeout
    with pytest.raises(AirflowSkipException):
        k8s_sensor(kubeconfig, timeout=0.3, soft_fail=True).execute({})


def test_every_page_of_pods_is_counted(api, kubeconfig):
    api.finish_after = 0
    # 1,100 small pods fill cpu-a: only a client that reads all 3 pages sees it.
    api.nodes[2]["status"]["allocatable"]["pods"] = "2000"
    api.pods += [pod(f"tiny-{i}", "cpu-a", "13m", memory="1Mi") for i in range(1100)]
    result = k8s_sensor(kubeconfig).poke({})
    assert not result.is_done
    assert api.pod_pages == 3


def test_deferrable_sensor_hands_a_serialisable_trigger_to_the_triggerer(kubeconfig):
    with pytest.raises(TaskDeferred) as deferred:
        k8s_sensor(kubeconfig, deferrable=True, timeout=120, poke_interval=7).execute({})
    trigger = deferred.value.trigger
    assert deferred.value.method_name == "execute_complete"
    assert deferred.value.timeout.total_seconds() == 120
    path, kwargs = trigger.serialize()
    assert path == "synthfactory_airflow.plugins.capacity.trigger.WaveCapacityTrigger"
    json.dumps(kwargs)  # what the triggerer stores must be plain JSON
    assert kwargs["poke_interval"] == 7 and kwargs["check"]["config_file"] == kubeconfig


async def _first_event(trigger, timeout):
    events = trigger.run()
    try:
        return await asyncio.wait_for(anext(events), timeout)
    finally:
        await events.aclose()


def test_trigger_fires_when_pods_finish(api, kubeconfig):
    api.finish_after = 2
    with pytest.raises(TaskDeferred) as deferred:
        k8s_sensor(kubeconfig, deferrable=True).execute({})
    path, kwargs = deferred.value.trigger.serialize()
    kwargs["poke_interval"] = 0.1
    event = asyncio.run(_first_event(WaveCapacityTrigger(**kwargs), timeout=10))
    assert event.payload["status"] == "success"
    assert api.pod_lists == 3
    task = k8s_sensor(kubeconfig)
    xcom = task.resume_execution("execute_complete", {"event": event.payload}, {})
    assert xcom["placements"]["gpu"] == {"gpu-a": 1, "gpu-b": 1}


def test_trigger_keeps_waiting_without_firing_while_nothing_frees(api, kubeconfig):
    trigger = WaveCapacityTrigger(k8s_sensor(kubeconfig)._check().to_kwargs(), poke_interval=0.1)
    # 2 s for three polls 0.1 s apart: a check took 111 ms on a loaded 2-core machine,
    # and 0.6 s once left room for one (make test, engine session beside it)
    with pytest.raises(TimeoutError):
        asyncio.run(_first_event(trigger, timeout=2))
    assert api.pod_lists >= 3


def test_trigger_reports_an_unreachable_api_after_repeated_failures(tmp_path, server, kubeconfig):
    closed = f"http://127.0.0.1:{free_port()}"  # a port nothing listens on
    broken = tmp_path / "broken"
    broken.write_text(open(kubeconfig).read().replace(server, closed))
    check = k8s_sensor(str(broken))._check().to_kwargs()
    event = asyncio.run(_first_event(WaveCapacityTrigger(check, poke_interval=0.01), timeout=30))
    assert event.payload["status"] == "error"
    assert "Connection refused" in event.payload["message"]


def test_airflow_pool_without_open_slots_holds_the_wave(api, kubeconfig, server, monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_AIRFLOW_API", server.replace("http://", "http://admin:pw@"))
    api.finish_after = 0
    api.open_slots["gpu_pool"] = 1
    task = k8s_sensor(kubeconfig, airflow_pools={"gpu_pool": 2})
    assert not task.poke({}).is_done
    result = task._check().run()
    assert "airflow pool gpu_pool" in result.table and "only 1 open slot(s)" in result.table
    api.open_slots["gpu_pool"] = 2
    assert task.poke({}).is_done


def test_kueue_mode_reads_the_cluster_queue_and_labels_the_pods(api, kubeconfig):
    api.cluster_queue = {
        "spec": {"resourceGroups": [{"coveredResources": ["cpu", "memory", "nvidia.com/gpu"],
                                     "flavors": [{"name": "h100", "resources": [
                                         {"name": "cpu", "nominalQuota": "64"},
                                         {"name": "memory", "nominalQuota": "1Ti"},
                                         {"name": "nvidia.com/gpu", "nominalQuota": "4"}]}]}]},
        "status": {"flavorsUsage": [{"name": "h100", "resources": [
            {"name": "nvidia.com/gpu", "total": "3"}]}]},
    }
    task = k8s_sensor(kubeconfig, kueue_cluster_queue="synth", kueue_local_queue="synth-lq")
    assert not task.poke({}).is_done  # 1 GPU of quota free, the wave needs 2
    api.cluster_queue["status"]["flavorsUsage"][0]["resources"][0]["total"] = "2"
    result = task.poke({})
    assert result.is_done
    assert result.xcom_value["pod_labels"] == {"kueue.x-k8s.io/queue-name": "synth-lq"}
    assert api.pod_lists == 0  # quota mode does not list the cluster's pods
