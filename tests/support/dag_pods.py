"""The pod tasks of both DAGs, parsed under the kubernetes runner, and their pods built
offline (``build_pod_request_obj`` needs only a kubeconfig file, no cluster). Imports
Airflow: for the .venv half only."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from airflow.providers.cncf.kubernetes.operators.pod import KubernetesPodOperator
from kubernetes.client import ApiClient

from tests.support.paths import DAGS

OFFLINE_KUBECONFIG = """
apiVersion: v1
kind: Config
clusters: [{name: offline, cluster: {server: "https://127.0.0.1:6443"}}]
users: [{name: offline, user: {token: not-a-secret}}]
contexts: [{name: offline, context: {cluster: offline, user: offline}}]
current-context: offline
"""


@contextmanager
def offline_kube(tmp: Path) -> Iterator[None]:
    """A kubeconfig file and the default Kubernetes connection pointing at it, while inside."""
    config = tmp / "kubeconfig"
    config.write_text(OFFLINE_KUBECONFIG)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("KUBECONFIG", str(config))
        mp.setenv("AIRFLOW_CONN_KUBERNETES_DEFAULT", json.dumps(
            {"conn_type": "kubernetes", "extra": {"kube_config_path": str(config)}}))
        yield


def pod_tasks(env: dict[str, str]) -> dict[tuple[str, str], KubernetesPodOperator]:
    """{(dag_id, task_id): task} of every KubernetesPodOperator of both DAGs, parsed with
    SYNTHFACTORY_RUNNER=kubernetes plus ``env``."""
    from airflow.dag_processing.dagbag import DagBag

    with pytest.MonkeyPatch.context() as mp:
        for name, value in {"SYNTHFACTORY_RUNNER": "kubernetes", **env}.items():
            mp.setenv(name, value)
        bag = DagBag(dag_folder=str(DAGS))
    assert bag.import_errors == {}
    return {(dag_id, task.task_id): task
            for dag_id in ("synthetic_rephrase", "engine_sweep")
            for task in bag.dags[dag_id].tasks if isinstance(task, KubernetesPodOperator)}


def built_pod(task: KubernetesPodOperator, context: Any = None) -> dict:
    """The pod ``task`` would create, serialized as the API receives it."""
    task = copy.copy(task)
    if not isinstance(task.arguments, list):  # a mapped group's MappedArgument
        task.arguments = ["--help"]
    pod = task.build_pod_request_obj(context=context)
    return ApiClient().sanitize_for_serialization(pod)
