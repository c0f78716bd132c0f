"""Every object the package builds for a cluster is accepted by a real apiserver: the pod of
every KubernetesPodOperator of both DAGs (plain and under Kueue, whose queue and pod-group
labels must come back as sent), the Spark driver's headless Service and the executor pod
template as a Pod. Created with a server-side dry run (``dryRun=All``): validation,
defaulting and admission (ServiceAccount, Priority, DefaultTolerationSeconds) all run,
nothing is stored."""

from __future__ import annotations

import copy
from types import SimpleNamespace

import pytest
from kubernetes.client import ApiClient

from synthfactory_airflow.operators.kueue import (
    POD_GROUP_LABEL,
    POD_GROUP_TOTAL_ANNOTATION,
    QUEUE_LABEL,
)
from synthfactory_airflow.operators.settings import Settings
from synthfactory_airflow.operators.spark_kubernetes import executor_pod_template, headless_service
from tests.support.dag_pods import built_pod, offline_kube, pod_tasks
from tests.support.kube_control_plane import NAMESPACE

pytestmark = pytest.mark.kubernetes_e2e
PLAN = [{"rephrase": ["rephrase"], "validate": ["validate"]}] * 3


@pytest.fixture(scope="module")
def tasks(tmp_path_factory):
    with offline_kube(tmp_path_factory.mktemp("kube")):
        yield {
            "plain": pod_tasks({"SYNTHFACTORY_NAMESPACE": NAMESPACE,
                                "SYNTHFACTORY_PRIORITY_CLASS": "synthfactory-batch"}),
            "kueue": pod_tasks({"SYNTHFACTORY_NAMESPACE": NAMESPACE,
                                "SYNTHFACTORY_KUEUE_QUEUE": "synthfactory"}),
        }


def _rendered(task, map_index: int = 0) -> dict:
    task = copy.copy(task)
    ti = SimpleNamespace(dag_id=task.dag_id, task_id=task.task_id, map_index=map_index,
                         try_number=1, xcom_pull=lambda task_ids: PLAN)
    params = task.dag.params
    context = {"ti": ti, "run_id": "manual__2026-12-01", "dag": task.dag,
               # a required Param (the sweep's source) gets a stand-in value
               "params": {k: params.get_param(k).value if params.get_param(k).has_value
                          else "file:///in" for k in params}}
    task.arguments = ["--help"]
    task.render_template_fields(context)
    return built_pod(task, context)


@pytest.mark.parametrize("mode", ["plain", "kueue"])
def test_every_step_pod_is_accepted_as_built(control_plane, tasks, mode):
    core = control_plane.core()
    checked = 0
    for (dag_id, task_id), task in sorted(tasks[mode].items()):
        pod = _rendered(task)
        pod["metadata"]["namespace"] = NAMESPACE
        created = ApiClient().sanitize_for_serialization(core.create_namespaced_pod(
            NAMESPACE, pod, dry_run="All"))
        where = f"{dag_id}.{task_id} ({mode})"
        assert created["metadata"]["labels"] == pod["metadata"]["labels"], where
        assert created["spec"]["containers"][0]["args"] == pod["spec"]["containers"][0][
            "args"], where
        if mode == "kueue":
            assert created["metadata"]["labels"][QUEUE_LABEL] == "synthfactory", where
            if POD_GROUP_LABEL in pod["metadata"]["labels"]:  # a wave's gang
                assert (created["metadata"]["annotations"][POD_GROUP_TOTAL_ANNOTATION]
                        == pod["metadata"]["annotations"][POD_GROUP_TOTAL_ANNOTATION]), where
        checked += 1
    assert checked >= 6  # crawl, stitch, plan, rephrase, validate, register, smoke, ...
    assert not core.list_namespaced_pod(NAMESPACE).items  # a dry run stores nothing


def test_the_spark_driver_service_and_executor_template_are_accepted(control_plane):
    core = control_plane.core()
    service = headless_service("synthfactory-spark-0123456789abcdef", NAMESPACE)
    created = core.create_namespaced_service(NAMESPACE, service, dry_run="All")
    assert created.spec.cluster_ip == "None" and created.spec.publish_not_ready_addresses
    template = executor_pod_template(Settings(runner="kubernetes"))
    template["metadata"]["name"] = "executor-template-check"
    pod = core.create_namespaced_pod(NAMESPACE, template, dry_run="All")
    assert pod.spec.automount_service_account_token is False
    assert pod.metadata.labels["app.kubernetes.io/component"] == "spark-executor"
