"""The rephrase pod as Kubernetes would receive it, built offline and validated.

No cluster runs here: ``build_pod_request_obj`` builds the real V1Pod once any
kubeconfig file is set, and kubernetes-validate checks it against the API schema.
"""

from __future__ import annotations

import json
from datetime import timedelta

import kubernetes_validate
import pytest
import yaml

from synthfactory_airflow.operators.kubernetes import SynthfactoryPodOperator, pod_operator_kwargs
from synthfactory_airflow.operators.pod_security import SCRATCH_ENV
from synthfactory_airflow.operators.settings import Settings
from synthfactory_airflow.plugins.capacity.fit import tolerates
from synthfactory_airflow.plugins.capacity.quantities import parse_resource
from tests.support.dag_pods import built_pod, offline_kube
from tests.support.paths import ROOT


@pytest.fixture
def rephrase_pod(tmp_path, monkeypatch):
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "do-not-leak-me")
    settings = Settings(runner="kubernetes")
    task = SynthfactoryPodOperator(
        task_id="shard.rephrase",
        arguments=["rephrase", "--shard", "s3://bucket/run/prompts/shard-00000.parquet",
                   "--run", "s3://bucket/run", "--checkpoint-rows", "64"],
        **pod_operator_kwargs("gpu", settings, "rephrase"),
    )
    with offline_kube(tmp_path):
        yield task, built_pod(task)


def test_pod_is_valid_in_strict_mode(rephrase_pod):
    _, pod = rephrase_pod
    kubernetes_validate.validate(pod, "1.33.0", strict=True)


def test_invalid_pod_is_caught_by_the_validator(rephrase_pod):
    _, pod = rephrase_pod
    pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = {"count": 1}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(pod, "1.33.0", strict=True)


def _flavours() -> dict[str, dict]:
    """{name: spec} of the ResourceFlavors deploy/kueue.yaml declares: the node pools
    (labels and taints) that the deployment says its GPU and CPU nodes carry."""
    docs = yaml.safe_load_all((ROOT / "deploy" / "kueue.yaml").read_text())
    return {d["metadata"]["name"]: d["spec"] for d in docs
            if d and d.get("kind") == "ResourceFlavor"}


def _lands_on(pod: dict, flavour: dict) -> bool:
    """Kubernetes' own rule: every nodeSelector label on the node, every taint tolerated."""
    selector = pod["spec"].get("nodeSelector") or {}
    labels = flavour.get("nodeLabels") or {}
    return (all(labels.get(k) == v for k, v in selector.items())
            and all(tolerates(pod["spec"].get("tolerations") or [], taint)
                    for taint in flavour.get("nodeTaints") or []))


def _gpus(resources: dict, side: str) -> int:
    return parse_resource("nvidia.com/gpu", (resources.get(side) or {}).get("nvidia.com/gpu", 0))


def test_gpu_placement_and_resources(rephrase_pod, tmp_path):
    """The GPU pod can land on the deployment's GPU nodes (deploy/kueue.yaml's gpu flavour:
    its label, its taint tolerated) and not on the CPU nodes, and asks a whole GPU with
    limit == request (Kubernetes refuses an extended resource that differs); a CPU pod
    asks none and stays off the GPU nodes. Seen failing: GPU_POLICY's toleration effect
    changed to NoExecute in operators/kubernetes.py (the gpu flavour's taint untolerated)."""
    task, pod = rephrase_pod
    flavours = _flavours()
    assert _lands_on(pod, flavours["gpu"]) and not _lands_on(pod, flavours["cpu"])
    container = pod["spec"]["containers"][0]
    assert _gpus(container["resources"], "requests") >= 1
    assert _gpus(container["resources"], "limits") == _gpus(container["resources"], "requests")
    # the step and the argv given to the operator are what the pod runs and is labelled
    assert pod["metadata"]["labels"]["synthfactory.io/step"] == "rephrase"
    assert container["command"] + container["args"] == ["synthfactory", *task.arguments]

    cpu_task = SynthfactoryPodOperator(
        task_id="shard.validate", arguments=["validate", "--run", "s3://bucket/run"],
        **pod_operator_kwargs("cpu", Settings(runner="kubernetes"), "validate"))
    with offline_kube(tmp_path):
        cpu_pod = built_pod(cpu_task)
    assert _gpus(cpu_pod["spec"]["containers"][0]["resources"], "requests") == 0
    assert _lands_on(cpu_pod, flavours["cpu"]) and not _lands_on(cpu_pod, flavours["gpu"])


def test_credentials_come_from_a_secret_never_literal(rephrase_pod):
    _, pod = rephrase_pod
    text = json.dumps(pod)
    assert "do-not-leak-me" not in text and "not-a-secret" not in text
    container = pod["spec"]["containers"][0]
    assert container["envFrom"] == [{"secretRef": {"name": "synthfactory-worker-env",
                                                   "optional": True}}]
    # literal env: the result file, the metrics port and scratch paths
    # (operators/pod_security.py), no secret
    assert {e["name"] for e in container["env"]} == {"SYNTHFACTORY_RESULT_FILE",
                                                      "SYNTHFACTORY_METRICS_PORT", *SCRATCH_ENV}


def _gpu_task(settings: Settings, gang_size: str | None = None) -> SynthfactoryPodOperator:
    return SynthfactoryPodOperator(
        task_id="shard.rephrase", arguments=["rephrase"],
        **pod_operator_kwargs("gpu", settings, "rephrase", gang_size))


def test_retry_policy_on_the_task(rephrase_pod):
    """A dead pod is retried, with a growing but bounded delay; a failed pod is kept for
    debugging; the delay, the pool and the queueing allowance follow the settings given.
    Seen failing: the Kueue admission seconds dropped from execution_timeout in
    pod_operator_kwargs (a task admitted late would be killed mid-shard)."""
    task, _ = rephrase_pod
    assert task.retries >= 1 and task.retry_exponential_backoff
    assert task.retry_delay < task.max_retry_delay  # backoff grows up to a cap
    assert task.on_finish_action.value == "delete_succeeded_pod"  # failed pods are kept
    assert task.startup_timeout_seconds >= 1200  # room for a GPU node to scale up
    assert task.do_xcom_push

    plain = _gpu_task(Settings(runner="kubernetes", gpu_pool="a100", retry_delay_seconds=0))
    assert plain.pool == "a100"
    assert _gpu_task(Settings(runner="kubernetes", retry_delay_seconds=7)).retry_delay == \
        timedelta(seconds=7)
    # under Kueue a gated pod waits for admission: that time is added, not taken from the run
    queued = _gpu_task(Settings(runner="kubernetes", kueue_queue="synthfactory",
                                kueue_admission_seconds=900), gang_size="2")
    assert queued.execution_timeout - plain.execution_timeout == timedelta(seconds=900)
    assert queued.schedule_timeout_seconds - plain.schedule_timeout_seconds == 900
