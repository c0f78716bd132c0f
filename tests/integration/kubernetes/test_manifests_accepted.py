"""Every object the package builds for a cluster is accepted by a real apiserver: the pod of
every KubernetesPodOperator of both DAGs (plain and under Kueue, whose queue and pod-group
labels must come back as sent), the Spark driver's headless Service and the executor pod
template as a Pod. Created with a server-side dry run (``dryRun=All``): validation,
defaulting and admission (ServiceAccount, Priority, DefaultTolerationSeconds) all run,
nothing is stored.

Each pod carries its real argv: templates rendered with a run's context, a shard group's
argv as `synthfactory plan` builds it. The break that fails it: a template the run-time
context cannot render (``{{ params.no_such_param.name }}`` added to register_catalog's
arguments: jinja2's UndefinedError), which passed while every argv was ``--help``."""

from __future__ import annotations

import copy
from types import SimpleNamespace

import pendulum
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
RUN = "s3://lake/data/synthetic_rephrase/2026-11-30"


@pytest.fixture(scope="module")
def tasks(tmp_path_factory):
    with offline_kube(tmp_path_factory.mktemp("kube")):
        yield {
            "plain": pod_tasks({"SYNTHFACTORY_NAMESPACE": NAMESPACE,
                                "SYNTHFACTORY_PRIORITY_CLASS": "synthfactory-batch"}),
            "kueue": pod_tasks({"SYNTHFACTORY_NAMESPACE": NAMESPACE,
                                "SYNTHFACTORY_KUEUE_QUEUE": "synthfactory"}),
        }


def _plan(options: list[str]) -> list[dict]:
    """plan_shards' return value as `synthfactory plan` builds it (synthfactory/plan.py):
    three groups, each the argv of its rephrase and validate tasks, with the rephrase
    options the plan task was given after ``--``."""
    return [{"rephrase": ["rephrase", "--shard", f"{RUN}/prompts/shard-{i:05d}.parquet",
                          "--run", RUN, *options],
             "validate": ["validate", "--shard", f"{RUN}/prompts/shard-{i:05d}.parquet",
                          "--run", RUN]}
            for i in range(3)]


def _context(task, plan: list[dict], map_index: int = 0) -> dict:
    start = pendulum.datetime(2026, 11, 29, tz="UTC")
    ti = SimpleNamespace(dag_id=task.dag_id, task_id=task.task_id, map_index=map_index,
                         try_number=1, xcom_pull=lambda task_ids: plan)
    params = task.dag.params
    return {"ti": ti, "run_id": "manual__2026-11-30T00:00:00+00:00", "dag": task.dag,
            "data_interval_start": start, "data_interval_end": start.add(days=1),
            "logical_date": start.add(days=1),
            # a required Param (the sweep's source) gets a stand-in value
            "params": {k: params.get_param(k).value if params.get_param(k).has_value
                       else "file:///in" for k in params}}


def _rendered(task, tasks: dict) -> dict:
    """The pod of ``task`` with its real argv: templates rendered as at run time; a shard
    group's task gets the argv the plan hands it."""
    task = copy.copy(task)
    planner = copy.copy(tasks.get((task.dag_id, "plan_shards"), task))
    planner.render_template_fields(_context(planner, []))
    options = planner.arguments[planner.arguments.index("--") + 1:] \
        if "--" in planner.arguments else []
    plan = _plan(options)
    if not isinstance(task.arguments, list):  # a mapped group's argv comes from the plan
        task.arguments = plan[0][task.task_id.rsplit(".", 1)[-1]]
    context = _context(task, plan)
    task.render_template_fields(context)
    return built_pod(task, context)


@pytest.mark.parametrize("mode", ["plain", "kueue"])
def test_every_step_pod_is_accepted_as_built(control_plane, tasks, mode):
    core = control_plane.core()
    checked = 0
    for (dag_id, task_id), task in sorted(tasks[mode].items()):
        pod = _rendered(task, tasks[mode])
        args = pod["spec"]["containers"][0]["args"]
        assert "--help" not in args and not any("{{" in a for a in args), (task_id, args)
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
