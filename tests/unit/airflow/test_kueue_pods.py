"""Kueue admission: with SYNTHFACTORY_KUEUE_QUEUE every pod carries the LocalQueue label,
and the rephrase pods of one run form one pod group whose total count is the plan's
number of shard groups, so Kueue admits the wave as a gang."""

from __future__ import annotations

import copy
import re
from types import SimpleNamespace

import kubernetes_validate
import pytest

from synthfactory_airflow.operators.kubernetes import POLICIES
from synthfactory_airflow.operators.kueue import (
    POD_GROUP_LABEL,
    POD_GROUP_TOTAL_ANNOTATION,
    QUEUE_LABEL,
    pod_group_name,
)
from tests.support.dag_pods import built_pod, offline_kube, pod_tasks

LABEL_VALUE = re.compile(r"^[a-z0-9]([-a-z0-9_.]*[a-z0-9])?$")
PLAN = [{"rephrase": ["rephrase"], "validate": ["validate"]}] * 3  # three shard groups
ADMISSION = 5400


@pytest.fixture(scope="module")
def kube(tmp_path_factory):
    with offline_kube(tmp_path_factory.mktemp("kube")):
        yield {
            "plain": pod_tasks({}),
            "kueue": pod_tasks({"SYNTHFACTORY_KUEUE_QUEUE": "synthfactory-gpu",
                                "SYNTHFACTORY_KUEUE_ADMISSION_SECONDS": str(ADMISSION)}),
        }


def run_context(task, run_id: str, map_index: int) -> dict:
    """What the pod builder and the templates read from a task's context."""
    ti = SimpleNamespace(dag_id=task.dag_id, task_id=task.task_id, map_index=map_index,
                         try_number=1, xcom_pull=lambda task_ids: PLAN)
    return {"ti": ti, "run_id": run_id, "dag": task.dag, "params": dict(task.dag.params)}


def rendered_pod(task, run_id: str, map_index: int = 0) -> dict:
    task = copy.copy(task)
    context = run_context(task, run_id, map_index)
    task.arguments = ["--help"]
    task.render_template_fields(context)
    return built_pod(task, context)


def test_without_a_queue_no_pod_is_labelled_for_kueue(kube):
    for key, task in kube["plain"].items():
        assert not {QUEUE_LABEL, POD_GROUP_LABEL} & set(task.labels), key
        assert POD_GROUP_TOTAL_ANNOTATION not in (task.annotations or {}), key
        assert task.pod_group is None


def test_with_a_queue_every_pod_carries_the_local_queue(kube):
    for key, task in kube["kueue"].items():
        assert task.labels[QUEUE_LABEL] == "synthfactory-gpu", key
        assert QUEUE_LABEL in built_pod(task)["metadata"]["labels"], key


def test_only_the_rephrase_wave_is_a_gang(kube):
    gangs = {key for key, task in kube["kueue"].items() if task.pod_group}
    assert gangs == {("synthetic_rephrase", "shard.rephrase")}
    assert POD_GROUP_TOTAL_ANNOTATION not in (
        kube["kueue"][("synthetic_rephrase", "shard.validate")].annotations or {})


def test_a_waves_pods_share_a_group_sized_by_the_plan(kube):
    rephrase = kube["kueue"][("synthetic_rephrase", "shard.rephrase")]
    run = "scheduled__2026-11-30T00:00:00+00:00"
    pods = [rendered_pod(rephrase, run, i) for i in range(len(PLAN))]
    names = {p["metadata"]["labels"][POD_GROUP_LABEL] for p in pods}
    assert len(names) == 1
    (name,) = names
    assert LABEL_VALUE.match(name) and len(name) <= 63
    for pod in pods:
        assert pod["metadata"]["annotations"][POD_GROUP_TOTAL_ANNOTATION] == str(len(PLAN))
        assert pod["metadata"]["labels"][QUEUE_LABEL] == "synthfactory-gpu"
        kubernetes_validate.validate(pod, "1.33.0", strict=True)
    # another run (a manual one, or a backfill) is another gang
    other = rendered_pod(rephrase, "manual__2026-11-30T09:15:02.123456+00:00")
    assert other["metadata"]["labels"][POD_GROUP_LABEL] != name


def test_group_names_are_unique_per_run_and_wave_and_valid_labels():
    runs = ["scheduled__2026-11-30T00:00:00+00:00", "scheduled__2026-12-01T00:00:00+00:00",
            "manual__2026-11-30T09:15:02+00:00", "backfill__2026-11-29T00:00:00+00:00"]
    names = {pod_group_name("synthetic_rephrase", r, w) for r in runs for w in ("rephrase", "x")}
    assert len(names) == 2 * len(runs)
    odd = {pod_group_name("d" * 250, "r" * 250, "w" * 50), pod_group_name("__", "r", "_")}
    assert all(LABEL_VALUE.match(n) and len(n) <= 63 for n in names | odd)


def test_schedule_timeouts_leave_room_for_queueing(kube):
    for key, task in kube["kueue"].items():
        kind = "gpu" if task.pool == "gpu" else "cpu"
        plain = kube["plain"][key]
        assert task.schedule_timeout_seconds == \
            POLICIES[kind].schedule_timeout_seconds + ADMISSION, key
        assert plain.schedule_timeout_seconds == POLICIES[kind].schedule_timeout_seconds, key
        # the task's own clock covers the wait for admission too
        assert (task.execution_timeout - plain.execution_timeout).total_seconds() == ADMISSION


def test_a_bad_admission_timeout_is_one_clear_line(monkeypatch):
    from synthfactory_airflow.operators.settings import Settings

    monkeypatch.setenv("SYNTHFACTORY_KUEUE_ADMISSION_SECONDS", "2h")
    with pytest.raises(ValueError, match="SYNTHFACTORY_KUEUE_ADMISSION_SECONDS='2h'"):
        Settings()
