"""The rephrase pod as Kubernetes would receive it, built offline and validated.

No cluster runs here: ``build_pod_request_obj`` builds the real V1Pod once any
kubeconfig file is set, and kubernetes-validate checks it against the API schema.
"""

from __future__ import annotations

import json
from datetime import timedelta

import kubernetes_validate
import pytest

from synthfactory_airflow.operators.kubernetes import (
    GPU_POLICY,
    SynthfactoryPodOperator,
    pod_operator_kwargs,
)
from synthfactory_airflow.operators.pod_security import SCRATCH_ENV
from synthfactory_airflow.operators.settings import Settings
from tests.support.dag_pods import built_pod, offline_kube


@pytest.fixture
def rephrase_pod(tmp_path, monkeypatch):
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "do-not-leak-me")
    settings = Settings(runner="kubernetes")
    task = SynthfactoryPodOperator(
        task_id="shard.rephrase",
        arguments=["rephrase", "--shard", "s3://bucket/run/prompts/shard-00000.parquet",
                   "--out", "s3://bucket/run", "--checkpoint-rows", "64"],
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


def test_gpu_placement_and_resources(rephrase_pod):
    _, pod = rephrase_pod
    container = pod["spec"]["containers"][0]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert container["resources"]["requests"]["nvidia.com/gpu"] == "1"
    assert pod["spec"]["nodeSelector"] == {"synthfactory.io/pool": "gpu"}
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in \
        pod["spec"]["tolerations"]
    assert pod["metadata"]["labels"]["synthfactory.io/step"] == "rephrase"
    assert container["command"] == ["synthfactory"]
    assert container["args"][:2] == ["rephrase", "--shard"]


def test_credentials_come_from_a_secret_never_literal(rephrase_pod):
    _, pod = rephrase_pod
    text = json.dumps(pod)
    assert "do-not-leak-me" not in text and "not-a-secret" not in text
    container = pod["spec"]["containers"][0]
    assert container["envFrom"] == [{"secretRef": {"name": "synthfactory-worker-env",
                                                   "optional": True}}]
    # literal env: the result file and scratch paths (operators/pod_security.py), no secret
    assert {e["name"] for e in container["env"]} == {"SYNTHFACTORY_RESULT_FILE", *SCRATCH_ENV}


def test_retry_policy_on_the_task(rephrase_pod):
    task, _ = rephrase_pod
    assert task.retries == 3
    assert task.retry_exponential_backoff
    assert task.max_retry_delay == timedelta(minutes=20)
    assert task.execution_timeout == GPU_POLICY.execution_timeout
    assert task.on_finish_action.value == "delete_succeeded_pod"  # failed pods are kept
    assert task.startup_timeout_seconds >= 1200  # room for a GPU node to scale up
    assert task.do_xcom_push
    assert task.pool == "gpu"
