"""The kubernetes runner's step pods serve their metrics: a container port named
`metrics` (what deploy/podmonitor.yaml scrapes), SYNTHFACTORY_METRICS_PORT on that port
(the worker serves /metrics there, synthfactory/metrics.py), the prometheus.io/*
annotations deploy/prometheus/prometheus.yml's kubernetes-pods job reads, the labels the
PodMonitor selects, and the task's metric labels as the local runner sets them. Nothing
secret in a label or annotation. The local runner never passes a metrics port."""

from __future__ import annotations

import copy
import json
from types import SimpleNamespace

import pytest
import yaml

from synthfactory.contract import METRIC_LABEL_ENV, TRY_NUMBER_ENV
from synthfactory.contract.names import METRICS_ADDR_ENV, METRICS_PORT_ENV
from synthfactory_airflow.operators.kubernetes import METRICS_PORT, METRICS_PORT_NAME
from synthfactory_airflow.operators.step_env import step_environment
from tests.support.dag_pods import built_pod, offline_kube, pod_tasks
from tests.support.paths import ROOT

RUN_ID = "scheduled__2026-12-04T00:00:00+00:00"
CANARY = "canary-7d2f19"


def _context(task, map_index: int = 1) -> dict:
    ti = SimpleNamespace(dag_id=task.dag_id, task_id=task.task_id, map_index=map_index,
                         run_id=RUN_ID, try_number=2, xcom_pull=lambda task_ids: [])
    return {"ti": ti, "run_id": RUN_ID, "dag": task.dag, "params": {"replicas": 1}}


@pytest.fixture(scope="module")
def pods(tmp_path_factory):
    """{(dag_id, task_id): (pod built with a run's context, pod built without)}."""
    with offline_kube(tmp_path_factory.mktemp("kube")):
        built = {}
        for key, task in pod_tasks({}).items():
            task = copy.copy(task)
            task.arguments = ["--help"]
            built[key] = (built_pod(task, _context(task)), built_pod(task))
        yield built


def _step_container(pod: dict) -> dict:
    return pod["spec"]["containers"][0]


def test_every_step_pod_serves_metrics_on_a_named_port(pods):
    for key, (pod, _) in pods.items():
        container = _step_container(pod)
        ports = {p["name"]: p for p in container.get("ports") or []}
        assert ports.get(METRICS_PORT_NAME, {}).get("containerPort") == METRICS_PORT, key
        env = {e["name"]: e.get("value") for e in container["env"]}
        assert env[METRICS_PORT_ENV] == str(METRICS_PORT), key
        assert METRICS_ADDR_ENV not in env, key  # 0.0.0.0: the pod's own network
        # the xcom sidecar serves nothing
        for sidecar in pod["spec"]["containers"][1:]:
            assert not sidecar.get("ports"), key


def test_the_spark_driver_keeps_its_own_ports_too(pods):
    pod, _ = pods[("synthetic_rephrase", "stitch_prompts")]
    names = {p["name"] for p in _step_container(pod)["ports"]}
    assert {METRICS_PORT_NAME, "driver-rpc", "blockmanager"} <= names
    numbers = [p["containerPort"] for p in _step_container(pod)["ports"]]
    assert len(numbers) == len(set(numbers))


def test_the_annotations_point_the_scrape_job_at_that_port(pods):
    config = yaml.safe_load((ROOT / "deploy" / "prometheus" / "prometheus.yml").read_text())
    (job,) = [j for j in config["scrape_configs"] if j["job_name"] == "kubernetes-pods"]
    (keep,) = [r for r in job["relabel_configs"] if r.get("action") == "keep"]
    assert job["honor_labels"] is True  # the step's own labels win, as in the PodMonitor
    for key, (pod, _) in pods.items():
        annotations = pod["metadata"]["annotations"]
        assert annotations["prometheus.io/scrape"] == keep["regex"] == "true", key
        assert annotations["prometheus.io/port"] == str(METRICS_PORT), key
        assert annotations["prometheus.io/path"] == "/metrics", key


def test_the_podmonitor_selects_every_step_pod_on_its_port(pods):
    monitor = yaml.safe_load((ROOT / "deploy" / "podmonitor.yaml").read_text())
    selector = monitor["spec"]["selector"]["matchLabels"]
    (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
    assert endpoint["port"] == METRICS_PORT_NAME and endpoint["path"] == "/metrics"
    for key, (pod, _) in pods.items():
        assert selector.items() <= pod["metadata"]["labels"].items(), key
        assert pod["metadata"]["labels"]["synthfactory.io/step"], key  # the `step` relabel


def test_the_step_gets_its_tasks_metric_labels(pods):
    for (dag_id, task_id), (pod, bare) in pods.items():
        env = {e["name"]: e.get("value") for e in _step_container(pod)["env"]}
        assert {label: env.get(name) for label, name in METRIC_LABEL_ENV.items()} == {
            "dag_id": dag_id, "run_id": RUN_ID, "task": task_id, "map_index": "1"}
        assert env[TRY_NUMBER_ENV] == "2"
        names = [e["name"] for e in _step_container(pod)["env"]]
        assert len(names) == len(set(names)), (dag_id, task_id)
        # built without a run (a dry parse), the pod has no labels to give: none invented
        bare_env = {e["name"] for e in _step_container(bare)["env"]}
        assert not bare_env & set(METRIC_LABEL_ENV.values())


def test_nothing_secret_in_labels_annotations_or_the_metric_env(pods, monkeypatch):
    for key, (pod, _) in pods.items():
        metadata = json.dumps([pod["metadata"].get("labels"), pod["metadata"]["annotations"]])
        assert CANARY not in metadata
        for word in ("password", "secret", "token", "api_key", "apikey"):
            assert word not in metadata.lower(), (key, word)
        env = _step_container(pod)["env"]
        # credentials come from the Secret (envFrom), never as values beside the metrics'
        assert not [e for e in env if "KEY" in e["name"] or "PASSWORD" in e["name"]], key


def test_the_local_runner_never_passes_a_metrics_port():
    inherited = {METRICS_PORT_ENV: "9400", METRICS_ADDR_ENV: "0.0.0.0",
                 "SYNTHFACTORY_PUSHGATEWAY": "gw:9091"}
    env = step_environment(inherited)
    assert METRICS_PORT_ENV not in env and METRICS_ADDR_ENV not in env
    assert env["SYNTHFACTORY_PUSHGATEWAY"] == "gw:9091"  # it pushes
