"""Spark on Kubernetes for stitch_prompts: the driver pod, its headless Service and the
executor pod template as the API would receive them (kubernetes-validate, strict), the
Service's lifetime around the pod, the RBAC in deploy/, and the image's entrypoint."""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path

import kubernetes_validate
import pytest
import yaml
from airflow.providers.cncf.kubernetes.operators.pod import KubernetesPodOperator
from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException

from synthfactory_airflow.operators import spark_kubernetes as sk
from synthfactory_airflow.operators.kubernetes import METRICS_PORT
from synthfactory_airflow.operators.kueue import QUEUE_LABEL
from synthfactory_airflow.operators.pod_security import SCRATCH_ENV
from synthfactory_airflow.operators.settings import Settings
from tests.support.dag_pods import built_pod, offline_kube, pod_tasks
from tests.support.paths import ROOT
from tests.support.pod_standards import restricted_violations

K8S = "1.33.0"
SERVICE = "synthfactory-spark-0123456789abcdef"


def _serialize(obj) -> dict:
    return ApiClient().sanitize_for_serialization(obj)


@pytest.fixture(scope="module")
def stitch_task(tmp_path_factory):
    with offline_kube(tmp_path_factory.mktemp("kube")):
        tasks = pod_tasks({"SYNTHFACTORY_NAMESPACE": "synth",
                           "SYNTHFACTORY_WORKER_IMAGE": "registry.example/worker:1.2"})
    return tasks[("synthetic_rephrase", "stitch_prompts")]


@pytest.fixture
def driver(stitch_task, tmp_path):
    """The stitch pod as the try with Service SERVICE creates it, and that Service."""
    import copy

    task = copy.copy(stitch_task)
    task.labels, task.env_vars = dict(task.labels), list(task.env_vars)
    service = task.bind_service(SERVICE)
    with offline_kube(tmp_path):
        pod = built_pod(task)
    return pod, _serialize(service)


def _env(pod: dict) -> dict:
    return {e["name"]: e for e in pod["spec"]["containers"][0]["env"]}


def test_the_dag_runs_stitch_as_a_spark_driver(stitch_task):
    assert isinstance(stitch_task, sk.SparkDriverPodOperator)
    argv = stitch_task.arguments
    for flag in ("--master", "--executors", "--executor-cores", "--executor-memory"):
        assert flag in argv
    assert "{{ params.spark_executors }}" in argv


def test_driver_pod_service_and_template_are_valid_in_strict_mode(driver):
    pod, service = driver
    template = json.loads(_env(pod)[sk.ENV_EXECUTOR_TEMPLATE]["value"])
    for manifest in (pod, service, template):
        kubernetes_validate.validate(manifest, K8S, strict=True)


def test_the_service_reaches_exactly_this_driver_pod(driver):
    pod, service = driver
    spec = service["spec"]
    assert spec["clusterIP"] == "None" and spec["publishNotReadyAddresses"] is True
    assert spec["selector"] == {sk.DRIVER_LABEL: SERVICE}
    assert pod["metadata"]["labels"][sk.DRIVER_LABEL] == SERVICE
    ports = {p["name"]: p["containerPort"] for p in pod["spec"]["containers"][0]["ports"]}
    assert {p["name"]: p["targetPort"] for p in spec["ports"]} == {
        "driver-rpc": sk.DRIVER_PORT, "blockmanager": sk.BLOCK_MANAGER_PORT}
    # the pod: Spark's two, and the step's /metrics as every step pod's (not the Service's)
    assert ports == {"driver-rpc": sk.DRIVER_PORT, "blockmanager": sk.BLOCK_MANAGER_PORT,
                     "metrics": METRICS_PORT}
    env = _env(pod)
    assert env[sk.ENV_DRIVER_HOST]["value"] == f"{SERVICE}.synth.svc"
    assert service["metadata"]["namespace"] == pod["metadata"]["namespace"] == "synth"


def test_driver_pod_identity_and_environment(driver):
    pod, _ = driver
    assert pod["spec"]["serviceAccountName"] == "synthfactory-spark"
    env = _env(pod)
    assert env[sk.ENV_IMAGE]["value"] == "registry.example/worker:1.2"
    assert env[sk.ENV_DRIVER_POD]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    assert env[sk.ENV_NAMESPACE]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace"
    assert pod["spec"]["nodeSelector"] == {"synthfactory.io/pool": "cpu"}
    assert restricted_violations(pod) == []


def test_executor_template_is_a_restricted_cpu_pod_of_the_worker_image(driver):
    pod, _ = driver
    template = json.loads(_env(pod)[sk.ENV_EXECUTOR_TEMPLATE]["value"])
    assert restricted_violations(template) == []
    spec = template["spec"]
    assert spec["nodeSelector"] == {"synthfactory.io/pool": "cpu"}
    assert "tolerations" not in spec  # never lands on a tainted GPU node
    assert spec["automountServiceAccountToken"] is False
    (container,) = spec["containers"]
    assert container["name"] == sk.EXECUTOR_CONTAINER
    assert container["image"] == "registry.example/worker:1.2"
    assert container["envFrom"] == [{"secretRef": {"name": "synthfactory-worker-env",
                                                   "optional": True}}]
    # Spark reuses the template's local-dir volume at the driver's SPARK_LOCAL_DIRS path
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert mounts[sk.SPARK_LOCAL_VOLUME] == SCRATCH_ENV["SPARK_LOCAL_DIRS"]
    assert mounts["tmp"] == "/tmp"
    assert {v["name"] for v in spec["volumes"]} == set(mounts)
    assert "SPARK_LOCAL_DIRS" not in {e["name"] for e in container["env"]}
    assert template["metadata"]["labels"]["synthfactory.io/pool"] == "cpu"


def test_no_credentials_in_any_manifest(driver, monkeypatch):
    pod, service = driver
    text = json.dumps([pod, service])
    assert "not-a-secret" not in text and "AWS_SECRET_ACCESS_KEY" not in text


def test_the_validator_rejects_a_broken_service(driver):
    _, service = driver
    service["spec"]["ports"][0]["port"] = "driver"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(service, K8S, strict=True)


def test_service_names_are_dns_labels_unique_per_try():
    first = sk.service_name("synthetic_rephrase", "stitch_prompts",
                            "scheduled__2026-11-29T00:00:00+00:00", -1, 1)
    again = sk.service_name("synthetic_rephrase", "stitch_prompts",
                            "scheduled__2026-11-29T00:00:00+00:00", -1, 1)
    retry = sk.service_name("synthetic_rephrase", "stitch_prompts",
                            "scheduled__2026-11-29T00:00:00+00:00", -1, 2)
    assert first == again != retry
    assert len(first) <= 63 and first[0].isalpha() and first.replace("-", "").isalnum()


class Recorder:
    """The two CoreV1Api calls the operator makes, answered like an API server."""

    def __init__(self, create_status: int | None = None, delete_status: int | None = None):
        self.calls: list[tuple[str, str, str]] = []
        self.create_status, self.delete_status = create_status, delete_status

    def create_namespaced_service(self, namespace, body):
        self.calls.append(("create", namespace, body.metadata.name))
        if self.create_status:
            raise ApiException(status=self.create_status, reason="Conflict")

    def delete_namespaced_service(self, name, namespace):
        self.calls.append(("delete", namespace, name))
        if self.delete_status:
            raise ApiException(status=self.delete_status, reason="NotFound")


class FakeTI:
    dag_id, task_id, run_id, map_index, try_number = (
        "synthetic_rephrase", "stitch_prompts", "manual__2026-11-30", -1, 3)


def test_service_lives_exactly_as_long_as_the_try_even_when_the_pod_fails(
        stitch_task, monkeypatch):
    import copy

    task = copy.copy(stitch_task)
    task.labels, task.env_vars = dict(task.labels), list(task.env_vars)
    client = Recorder(create_status=409)  # a reattached worker: the Service is there already
    task.__dict__["client"] = client
    seen = {}

    def pod_run(self, context):  # what the pod saw while it ran, then it fails
        seen["calls"] = list(client.calls)
        seen["label"] = self.labels[sk.DRIVER_LABEL]
        raise RuntimeError("driver pod failed")

    monkeypatch.setattr(KubernetesPodOperator, "execute", pod_run)
    with pytest.raises(RuntimeError, match="driver pod failed"):
        task.execute({"ti": FakeTI()})
    name = sk.service_name(*(getattr(FakeTI, a) for a in (
        "dag_id", "task_id", "run_id", "map_index", "try_number")))
    assert seen == {"calls": [("create", "synth", name)], "label": name}
    assert client.calls == [("create", "synth", name), ("delete", "synth", name)]


def test_a_refused_service_stops_the_try_before_any_pod():
    client = Recorder(create_status=403)
    with pytest.raises(ApiException), sk.driver_service(
            client, sk.headless_service(SERVICE, "synth")):
        pytest.fail("the block must not run")
    assert client.calls == [("create", "synth", SERVICE)]


def test_a_service_already_gone_is_not_an_error():
    client = Recorder(delete_status=404)
    with sk.driver_service(client, sk.headless_service(SERVICE, "synth")):
        pass
    assert [c[0] for c in client.calls] == ["create", "delete"]


def test_rbac_lets_the_driver_manage_executor_pods_and_services():
    docs = list(yaml.safe_load_all((ROOT / "deploy" / "spark-rbac.yaml").read_text()))
    for doc in docs:
        kubernetes_validate.validate(doc, K8S, strict=True)
    by_kind = {d["kind"]: d for d in docs}
    account = by_kind["ServiceAccount"]["metadata"]["name"]
    assert account == Settings().spark_service_account
    binding = by_kind["RoleBinding"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": account,
                                    "namespace": "synthfactory"}]
    assert binding["roleRef"]["name"] == by_kind["Role"]["metadata"]["name"]
    granted = {(resource, verb) for rule in by_kind["Role"]["rules"]
               for resource in rule["resources"] for verb in rule["verbs"]}
    for resource in ("pods", "services", "configmaps"):
        for verb in ("create", "get", "list", "watch", "delete"):
            assert (resource, verb) in granted, (resource, verb)
    assert not any("*" in rule["verbs"] or "*" in rule["resources"]
                   for rule in by_kind["Role"]["rules"])


def _fake_java(tmp_path: Path) -> Path:
    java = tmp_path / "bin" / "java"
    java.parent.mkdir()
    java.write_text('#!/bin/sh\nfor a in "$@"; do printf "%s\\n" "$a"; done\n')
    java.chmod(java.stat().st_mode | stat.S_IXUSR)
    return java.parent


def test_entrypoint_turns_executor_into_sparks_executor_backend(tmp_path):
    env = {"PATH": f"{_fake_java(tmp_path)}:{os.environ['PATH']}", "SPARK_HOME": "/spark",
           "SPARK_DRIVER_URL": "spark://CoarseGrainedScheduler@drv.synth.svc:7078",
           "SPARK_EXECUTOR_ID": "3", "SPARK_EXECUTOR_CORES": "8",
           "SPARK_APPLICATION_ID": "spark-app-1", "SPARK_EXECUTOR_POD_IP": "10.0.0.7",
           "SPARK_RESOURCE_PROFILE_ID": "0", "SPARK_EXECUTOR_POD_NAME": "stitch-exec-3",
           "SPARK_EXECUTOR_MEMORY": "24g", "SPARK_JAVA_OPT_10": "-Dlast=1",
           "SPARK_JAVA_OPT_0": "-Dspark.driver.port=7078", "SPARK_JAVA_OPT_2": "-Dsecond=2"}
    out = subprocess.run([str(ROOT / "docker" / "spark-entrypoint.sh"), "executor"], env=env,
                         capture_output=True, text=True, check=True).stdout.splitlines()
    backend = out.index("org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend")
    assert out[:3] == ["-Dspark.driver.port=7078", "-Dsecond=2", "-Dlast=1"]
    assert out[3:7] == ["-Xms24g", "-Xmx24g", "-cp", "/spark/jars/*"]
    args = dict(zip(out[backend + 1::2], out[backend + 2::2], strict=True))
    assert args == {"--driver-url": env["SPARK_DRIVER_URL"], "--executor-id": "3",
                    "--cores": "8", "--app-id": "spark-app-1", "--hostname": "10.0.0.7",
                    "--resourceProfileId": "0", "--podName": "stitch-exec-3"}


def test_entrypoint_runs_any_other_command_as_given():
    out = subprocess.run([str(ROOT / "docker" / "spark-entrypoint.sh"), "echo", "a b", "c"],
                         capture_output=True, text=True, check=True)
    assert out.stdout == "a b c\n"


def test_executors_join_the_drivers_kueue_queue_but_no_pod_group():
    settings = Settings(runner="kubernetes", kueue_queue="cpu-queue")
    template = sk.executor_pod_template(settings, {
        QUEUE_LABEL: "cpu-queue", "kueue.x-k8s.io/pod-group-name": "wave-1"})
    labels = template["metadata"]["labels"]
    assert labels[QUEUE_LABEL] == "cpu-queue"
    assert "kueue.x-k8s.io/pod-group-name" not in labels
    kwargs = sk.driver_pod_kwargs(settings)
    assert kwargs["labels"][QUEUE_LABEL] == "cpu-queue"
    env = {e.name: e.value for e in kwargs["env_vars"]}
    assert json.loads(env[sk.ENV_EXECUTOR_TEMPLATE])["metadata"]["labels"][
        QUEUE_LABEL] == "cpu-queue"
