"""The CeleryExecutor's demands on a run (docs/celery.md): each step's task goes to the
queue of its kind in the steps table, and check_params refuses, in one line each, a
location on one worker's disk and a queue no worker serves."""

from __future__ import annotations

import pytest

from synthfactory.contract import steps
from synthfactory_airflow.operators import celery_checks
from synthfactory_airflow.operators.settings import Settings
from tests.support.paths import ROOT

SERVED = {"default", "cpu", "gpu"}


@pytest.fixture(scope="module")
def dag():
    from airflow.dag_processing.dagbag import DagBag

    return DagBag(dag_folder=str(ROOT / "dags")).dags["synthetic_rephrase"]


def test_each_step_task_goes_to_the_queue_of_its_kind(dag):
    by_step = {"crawl_metadata": steps.CRAWL, "stitch_prompts": steps.STITCH,
               "plan_shards": steps.PLAN, "shard.rephrase": steps.REPHRASE,
               "shard.validate": steps.VALIDATE, "join_chunks": steps.JOIN,
               "register_catalog": steps.REGISTER, "audit_run": steps.AUDIT}
    queues = {t.task_id: t.queue for t in dag.tasks}
    for task_id, step in by_step.items():
        assert queues[task_id] == ("gpu" if step.kind == steps.GPU else "cpu"), task_id
    assert queues["shard.rephrase"] == "gpu" and queues["shard.validate"] == "cpu"
    # what is no step stays on Airflow's default queue, which every worker serves
    assert queues["check_params"] == queues["wait_for_capacity"] == "default"


def test_queues_are_the_deployments_to_name(monkeypatch):
    monkeypatch.setenv("SYNTHFACTORY_GPU_QUEUE", "h100")
    settings = Settings()
    assert settings.queue_for(steps.REPHRASE.kind) == "h100"
    assert settings.queue_for(steps.STITCH.kind) == "cpu"  # a Spark driver is CPU work


@pytest.mark.parametrize(("executor", "celery"), [
    ("CeleryExecutor", True), ("airflow.providers.celery.executors.celery_executor."
                               "CeleryExecutor", True),
    ("LocalExecutor,CeleryExecutor", True), ("LocalExecutor", False),
    ("CeleryKubernetesExecutorX", False),
])
def test_the_executor_setting_is_read_by_alias_or_class_path(executor, celery):
    assert celery_checks.executor_is_celery(executor) is celery


def test_a_location_on_local_disk_is_refused_naming_the_param():
    params = {"output_root": "file:///var/synthfactory", "warehouse": "s3://lake/wh",
              "templates_url": None}
    found = celery_checks.problems(params, Settings(), SERVED, lambda: SERVED)
    assert len(found) == 1 and found[0].startswith("output_root=file:///var/synthfactory:")
    s3 = {**params, "output_root": "s3://lake/runs"}
    assert celery_checks.problems(s3, Settings(), SERVED, lambda: SERVED) == []


def test_every_location_a_task_reads_or_writes_is_checked():
    """The corpus (crawl lists it, stitch reads it), the benchmarks (every validate) and a
    SQLite catalog (register, audit) are on one worker's disk as much as the run folder."""
    params = {"source": "file:///srv/corpus", "output_root": "s3://lake/runs",
              "warehouse": "s3://lake/wh", "benchmarks": "file:///srv/benchmarks",
              "catalog_uri": "sqlite:////srv/catalog.db", "catalog_conn_id": None}
    found = celery_checks.problems(params, Settings(), SERVED, lambda: SERVED)
    assert [line.split(":", 1)[0] for line in found] == [
        "source=file", "benchmarks=file", "catalog_uri=sqlite"]
    # a catalog connection replaces catalog_uri: nothing on the worker's disk then
    on_s3 = {**params, "source": "s3://lake/corpus", "benchmarks": None,
             "catalog_conn_id": "pg_catalog"}
    assert celery_checks.problems(on_s3, Settings(), SERVED, lambda: SERVED) == []


def test_a_shared_disk_is_allowed_when_the_deployment_says_so(monkeypatch):
    monkeypatch.setenv("SYNTHFACTORY_WORKERS_SHARE_DISK", "1")
    params = {"output_root": "file:///mnt/nfs/runs", "catalog_uri": "sqlite:////mnt/nfs/c.db"}
    assert celery_checks.problems(params, Settings(), SERVED, lambda: SERVED) == []


def test_a_queue_no_worker_serves_is_named():
    found = celery_checks.problems({}, Settings(), SERVED, lambda: {"default", "cpu"})
    assert found == ["Celery queue 'gpu': no worker serves it (workers serve ['cpu', "
                     "'default']); its tasks would wait forever; start a worker with "
                     "`airflow celery worker --queues gpu`"]
    assert celery_checks.problems({}, Settings(), SERVED, lambda: None) == [
        "no Celery worker answered over the broker: nothing would run"]
