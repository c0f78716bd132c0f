"""Kubernetes API clients from an Airflow connection: one way to build them, for every caller.

The cncf provider's ``KubernetesHook`` reads a connection (in-cluster, a kubeconfig path
or inline kubeconfig, a context) as ``KubernetesPodOperator`` does, so the pod steps, the
capacity sensor and its trigger, and the RayJob operator and trigger all reach the same
cluster for one conn id. The provider is imported on first use: DAG files stay fast to parse.
"""

from __future__ import annotations

from typing import Any


def kubernetes_hook(conn_id: str | None, *, config_file: str | None = None,
                    cluster_context: str | None = None, in_cluster: bool | None = None) -> Any:
    """The provider's hook; ``conn_id=None`` means ``config_file`` or the default kubeconfig
    / in-cluster config (never the provider's fallback ``kubernetes_default``)."""
    from airflow.providers.cncf.kubernetes.hooks.kubernetes import KubernetesHook

    return KubernetesHook(conn_id=conn_id, kubernetes_conn_id=conn_id, config_file=config_file,
                          cluster_context=cluster_context, in_cluster=in_cluster)


def custom_objects(conn_id: str | None, **kwargs: Any) -> Any:  # RayJobs
    return kubernetes_hook(conn_id, **kwargs).custom_object_client


def to_json(model: Any) -> Any:
    """A kubernetes client model as the JSON the API server receives (camelCase keys)."""
    from kubernetes.client import ApiClient

    return ApiClient().sanitize_for_serialization(model)
