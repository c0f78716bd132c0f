"""The ``kuberay`` mode of the rephrase wave: one KubeRay RayJob for every shard group.

When a wave needs more GPUs than one node has, the wave becomes one Ray cluster: a head
in the CPU pool and ``workers`` GPU pods in the GPU pool, each with ``gpus_per_worker``
GPUs. Its entrypoint is the same ``synthfactory rephrase`` the pods run, over all shard
groups, with ``--ray-address auto`` and one replica per GPU (docs/rephrase.md). The job
has ``backoffLimit: 0``: Airflow owns the retries, and committed shards make a retry
cheap. The manifest is plain JSON-ready data; ``RayJobWaveOperator`` creates, waits for
and deletes it (docs/adr/0057).
"""

from __future__ import annotations

import shlex
from typing import Any

from synthfactory.contract import steps
from synthfactory_airflow.operators.kube_client import to_json
from synthfactory_airflow.operators.kubernetes import (
    CPU_POLICY,
    GPU_POLICY,
    per_gpu,
    per_gpu_template,
)
from synthfactory_airflow.operators.kueue import QUEUE_LABEL
from synthfactory_airflow.operators.pod_security import (
    container_security_context,
    pod_security_context,
    scratch_env,
    scratch_volume_mounts,
    scratch_volumes,
)

RAY_VERSION = "2.60.0"  # pyproject.toml's worker extra pins the same
GROUP, VERSION, PLURAL = "ray.io", "v1", "rayjobs"
HEAD_REQUESTS = {"cpu": "2", "memory": "8Gi"}


def wave_entrypoint(groups: list[dict], replicas: int) -> list[str]:
    """One ``rephrase`` argv over every shard of every plan group: the first group's
    options, all groups' shards, on the Ray cluster the job runs in. Each argv is read
    with the steps table's parser and the entrypoint built by it (``--flag=value`` too);
    the engine's own options (the registry's, unknown to the table) follow as given."""
    if not groups:
        raise ValueError("the plan has no shard groups: nothing to run")
    step, first, engine_options = steps.read_argv(groups[0]["rephrase"])
    if step is None:
        raise ValueError(f"not a synthfactory step: {groups[0]['rephrase'][:1]}")
    shards = [url for group in groups
              for url in steps.read_argv(group["rephrase"])[1].get("--shard", [])]
    wave = {"--shard": shards, "--ray-address": "auto", "--replicas": str(replicas),
            "--gpus-per-replica": "1"}
    return steps.command(step, {**first, **wave}, engine_options)


def _pod_template(kind: str, name: str, image: str, requests: dict[str, str],
                  limits: dict[str, str], secret_name: str, node_selector: dict,
                  tolerations: list, priority_class: str | None) -> dict:
    spec: dict[str, Any] = {
        "securityContext": to_json(pod_security_context()),
        "nodeSelector": dict(node_selector),
        "volumes": to_json(scratch_volumes(kind)),
        "containers": [{
            "name": name,
            "image": image,
            "resources": {"requests": requests, "limits": limits},
            "securityContext": to_json(container_security_context()),
            "volumeMounts": to_json(scratch_volume_mounts(kind)),
            "env": to_json(scratch_env()),
            # credentials: the Secret's keys become the environment; no value in the spec
            "envFrom": [{"secretRef": {"name": secret_name, "optional": True}}],
        }],
    }
    if tolerations:
        spec["tolerations"] = [dict(t) for t in tolerations]
    if priority_class:
        spec["priorityClassName"] = priority_class
    return {"metadata": {"labels": {"app.kubernetes.io/name": "synthfactory",
                                    "synthfactory.io/pool": kind}},
            "spec": spec}


def rayjob_manifest(*, name: str, namespace: str, image: str, entrypoint: list[str],
                    workers: int, gpus_per_worker: int, secret_name: str,
                    kueue_queue: str | None = None, priority_class: str | None = None,
                    labels: dict[str, str] | None = None) -> dict:
    gpu_requests = per_gpu(GPU_POLICY.requests, gpus_per_worker)
    gpu_limits = per_gpu(GPU_POLICY.limits, gpus_per_worker)
    metadata_labels = {"app.kubernetes.io/name": "synthfactory",
                       "synthfactory.io/step": "rephrase-wave", **(labels or {})}
    if kueue_queue:
        metadata_labels[QUEUE_LABEL] = kueue_queue
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "RayJob",
        "metadata": {"name": name, "namespace": namespace, "labels": metadata_labels},
        "spec": {
            "entrypoint": shlex.join(["synthfactory", *entrypoint]),
            "backoffLimit": 0,  # Airflow owns the retries; committed shards make one cheap
            "shutdownAfterJobFinishes": True,
            "ttlSecondsAfterFinished": 600,
            "submissionMode": "K8sJobMode",
            # Kueue admits the job (head + workers together) by unsuspending it
            **({"suspend": True} if kueue_queue else {}),
            "rayClusterSpec": {
                "rayVersion": RAY_VERSION,
                "headGroupSpec": {
                    "rayStartParams": {"num-gpus": "0"},
                    "template": _pod_template(
                        "cpu", "ray-head", image, HEAD_REQUESTS,
                        {"memory": HEAD_REQUESTS["memory"]}, secret_name,
                        CPU_POLICY.node_selector, list(CPU_POLICY.tolerations),
                        priority_class),
                },
                "workerGroupSpecs": [{
                    "groupName": "gpu",
                    "replicas": workers, "minReplicas": workers, "maxReplicas": workers,
                    "rayStartParams": {},
                    "template": _pod_template(
                        "gpu", "ray-worker", image, gpu_requests, gpu_limits, secret_name,
                        GPU_POLICY.node_selector, list(GPU_POLICY.tolerations),
                        priority_class),
                }],
            },
        },
    }


def rayjob_wave_template(workers: str) -> list[dict]:
    """What the capacity sensor must place at one moment, the head and every worker, as
    templates it renders for the run: ``workers`` is the plan's group count, each worker
    asks ``replicas`` GPUs (one per engine replica)."""
    return [
        {"pool": "cpu", "count": 1, "requests": dict(HEAD_REQUESTS),
         "node_selector": dict(CPU_POLICY.node_selector)},
        {"pool": "gpu", "count": workers, "requests": per_gpu_template(GPU_POLICY.requests),
         "node_selector": dict(GPU_POLICY.node_selector),
         "tolerations": [dict(t) for t in GPU_POLICY.tolerations]},
    ]
