"""A run that fails at its first step still ends with write_report, and stays failed
(write_report is a teardown, docs/adr/0101). Real Airflow (`dags test`, SQLite), real
engine; no Spark or vLLM: crawl fails on an interval without a partition.

The same failed run deletes its Pushgateway groups (write_report, docs/metrics.md): with
Debian's Pushgateway on 127.0.0.1 as the run's SYNTHFACTORY_PUSHGATEWAY, a group of the run
pushed while it runs (what a task of a failed run leaves behind: a capacity sensor that
timed out while waiting, a step killed; `dags test` names its run after the moment it
starts, so the group is pushed as soon as the run's row is in the metadata database, and
the test checks that was before write_report started) is gone after it, another run's
group is not."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import sqlite3
import subprocess
import threading
import time
from types import SimpleNamespace

import pytest
from prometheus_client import CollectorRegistry, Gauge, push_to_gateway

from tests.support.airflow_home import airflow_env, migrate
from tests.support.binaries import required_binary
from tests.support.paths import AIRFLOW, ROOT, WORKER
from tests.support.prometheus import have_binaries, pushgateway, scraped

LOGICAL_DATE = "2026-11-30T06:00:00+00:00"
OTHER_RUN = "manual__2026-11-29T06:00:00+00:00"


def _push_group(gateway: str, run_id: str) -> None:
    """A group as the capacity sensor pushes it (plugins/capacity/metrics.py): waiting."""
    registry = CollectorRegistry()
    key = {"dag_id": "synthetic_rephrase", "run_id": run_id, "task": "wait_for_capacity",
           "map_index": "-1", "host": "worker-1"}
    Gauge("synthfactory_capacity_waiting", "1 while the wave does not fit", list(key),
          registry=registry).labels(**key).set(1)
    push_to_gateway(gateway, job="synthfactory", registry=registry, grouping_key=key)


def _push_once_the_run_exists(gateway: str, db, pushed: dict) -> None:
    """In a thread: wait for the run's row, then push a group of it; ``pushed`` gets its
    run_id and when."""
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        try:
            with contextlib.closing(sqlite3.connect(db, timeout=5)) as conn:
                row = conn.execute("SELECT run_id FROM dag_run").fetchone()
        except sqlite3.Error:
            row = None
        if row:
            _push_group(gateway, row[0])
            pushed.update(run_id=row[0], at=dt.datetime.now(dt.UTC))
            return
        time.sleep(0.1)


def _waiting_runs(gateway: str) -> set[str]:
    return {dict(labels)["run_id"]
            for labels in scraped(gateway, "synthfactory_capacity_waiting")}


@pytest.fixture(scope="module")
def failed_run(tmp_path_factory):
    if not WORKER.exists():
        pytest.skip("needs .venv-worker (make setup)")
    tmp_path = tmp_path_factory.mktemp("failed-run")
    with (pushgateway() if have_binaries() else contextlib.nullcontext()) as gateway:
        extra = {"SYNTHFACTORY_PUSHGATEWAY": gateway} if gateway else {}
        env = airflow_env(tmp_path / "airflow", SYNTHFACTORY_RUNNER="local",
                          SYNTHFACTORY_HOME=str(ROOT), **extra)
        (tmp_path / "corpus").mkdir()  # no dt=... partition: crawl refuses the interval
        migrate(env)
        pushed: dict = {}
        if gateway:
            _push_group(gateway, OTHER_RUN)
            pusher = threading.Thread(target=_push_once_the_run_exists, daemon=True, args=(
                gateway, tmp_path / "airflow" / "airflow.db", pushed))
            pusher.start()
        conf = {"source": f"file://{tmp_path}/corpus",
                "output_root": f"file://{tmp_path}/data"}
        done = subprocess.run(
            [str(AIRFLOW), "dags", "test", "synthetic_rephrase", LOGICAL_DATE,
             "--conf", json.dumps(conf)], capture_output=True, text=True, env=env,
            timeout=600)
        if gateway:
            pusher.join(timeout=10)
        yield SimpleNamespace(
            tmp=tmp_path, log=done.stdout + done.stderr, pushed=pushed,
            groups_after=_waiting_runs(gateway) if gateway else None)


@pytest.mark.slow
def test_failed_run_gets_a_report_and_stays_failed(failed_run):
    tmp_path, log = failed_run.tmp, failed_run.log
    with sqlite3.connect(tmp_path / "airflow" / "airflow.db") as db:
        states = dict(db.execute(
            "SELECT task_id, state FROM task_instance WHERE dag_id = 'synthetic_rephrase'"))
        (run_state,) = db.execute(
            "SELECT state FROM dag_run WHERE dag_id = 'synthetic_rephrase'").fetchone()
    assert states["crawl_metadata"] == "failed", log[-3000:]
    assert states["smoke_test_training"] == "upstream_failed"
    assert states["write_report"] == "success", log[-3000:]
    assert run_state == "failed"  # the report did not turn the run green

    report = json.loads((tmp_path / "data" / "synthetic_rephrase" / "2026-11-29" / "report"
                         / "report.json").read_text())
    assert report["complete"] is False
    assert [m.split(":")[0] for m in report["missing"]] == [
        "manifest/_SUMMARY.json", "prompts/shards.json"]
    assert report["dag_id"] == "synthetic_rephrase" and report["airflow_run_id"]
    assert list(report["figures"]) == ["rows_generated"]


@pytest.mark.slow
def test_failed_run_deletes_its_pushgateway_groups(failed_run):
    """Break used: report/command.py deleting the groups only of a complete run (``if
    report["complete"]``): the failed run's group stays, and this test fails."""
    required_binary("prometheus-pushgateway", "prometheus-pushgateway")
    with contextlib.closing(sqlite3.connect(failed_run.tmp / "airflow" / "airflow.db")) as db:
        (run_id,) = db.execute(
            "SELECT run_id FROM dag_run WHERE dag_id = 'synthetic_rephrase'").fetchone()
        (report_started,) = db.execute(
            "SELECT start_date FROM task_instance WHERE task_id = 'write_report'").fetchone()
    assert failed_run.pushed.get("run_id") == run_id, failed_run.pushed
    # pushed while the run ran, before its write_report: else this proves nothing
    assert failed_run.pushed["at"] < dt.datetime.fromisoformat(report_started).replace(
        tzinfo=dt.UTC), (failed_run.pushed, report_started)
    assert failed_run.groups_after == {OTHER_RUN}, failed_run.log[-3000:]
