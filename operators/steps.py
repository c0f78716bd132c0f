"""Choose the operator for a step from the runner setting: one call site in the DAG,
two ways to run the same argv."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from operators.settings import Settings


def step_operator_class(settings: Settings, spark_driver: bool = False) -> type:
    """``spark_driver``: the step runs a Spark driver (stitch), on Kubernetes in client
    mode with executor pods (operators/spark_kubernetes.py)."""
    if settings.runner == "kubernetes" and spark_driver:
        from operators.spark_kubernetes import SparkDriverPodOperator

        return SparkDriverPodOperator
    if settings.runner == "kubernetes":
        from operators.kubernetes import SynthfactoryPodOperator

        return SynthfactoryPodOperator
    from operators.local import LocalStepOperator

    return LocalStepOperator


def step_kwargs(kind: str, settings: Settings, step: str,
                gang_size: str | None = None, spark_driver: bool = False) -> dict[str, Any]:
    """Runner-specific keyword arguments for a step of ``kind`` (cpu|gpu); ``gang_size``
    (a wave's pod count, templated) makes its pods one Kueue pod group on Kubernetes."""
    if settings.runner == "kubernetes" and spark_driver:
        from operators.spark_kubernetes import driver_pod_kwargs

        return driver_pod_kwargs(settings, step)
    if settings.runner == "kubernetes":
        from operators.kubernetes import pod_operator_kwargs

        return pod_operator_kwargs(kind, settings, step, gang_size)
    # Local: the same retry shape, shorter delays; resumable steps make retries cheap.
    return {
        "worker_bin": settings.worker_bin,
        "aws_conn_id": settings.aws_conn_id or None,
        "retries": 2 if kind == "gpu" else 1,
        "retry_delay": timedelta(seconds=10),
        "retry_exponential_backoff": True,
        "max_retry_delay": timedelta(minutes=2),
    }


# The catalog URI goes on argv only when it is not a connection's (which has a password):
# then the engine reads $SYNTHFACTORY_CATALOG_URI, set from the connection by the local
# runner, or by the worker Secret (envFrom) on Kubernetes. docs/adr/0070.
CATALOG_URI_ARGUMENT = "{{ '' if params.catalog_conn_id else params.catalog_uri }}"


def catalog_arguments() -> list[str]:
    """``--catalog-uri``/``--warehouse`` of the steps that open the catalog."""
    return ["--catalog-uri", CATALOG_URI_ARGUMENT, "--warehouse", "{{ params.warehouse }}"]


def catalog_kwargs(settings: Settings) -> dict[str, Any]:
    """The local runner resolves the catalog connection when the step starts; a pod
    gets the URI from its Secret instead, so nothing secret is in its spec."""
    if settings.runner == "kubernetes":
        return {}
    return {"catalog_conn_id": "{{ params.catalog_conn_id or '' }}"}  # null: none


def wave_count(settings: Settings, groups_template: str) -> str:
    """How many pods of each kind the wave holds: every shard group on Kubernetes; on
    one machine the local runner runs one worker process of a kind at a time."""
    return groups_template if settings.runner == "kubernetes" else "1"


def wave_requests(kind: str, settings: Settings) -> dict[str, Any]:
    """The per-pod requests the capacity sensor must place for one step of ``kind``."""
    if settings.runner == "kubernetes":
        from operators.kubernetes import POLICIES, per_gpu_template

        policy = POLICIES[kind]
        requests = per_gpu_template(policy.requests) if kind == "gpu" else dict(policy.requests)
        return {"requests": requests, "node_selector": dict(policy.node_selector),
                "tolerations": [dict(t) for t in policy.tolerations]}
    # Local: what one worker process needs on this machine (vLLM CPU peaks near 4 GB), one
    # core per engine replica (`gpus_per_task` replicas on the CPU build).
    return {"requests": {"cpu": "{{ params.gpus_per_task }}",
                         "memory": "{{ 4 * params.gpus_per_task }}Gi"} if kind == "gpu"
            else {"cpu": "1", "memory": "1Gi"}}
