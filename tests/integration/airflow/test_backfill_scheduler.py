"""Scheduled runs and a backfill under a real Airflow scheduler (`airflow standalone`:
scheduler, DAG processor, triggerer and API server on SQLite, LocalExecutor). Unpausing
the DAG (catchup off) schedules the latest interval; a backfill adds two earlier days.
Every run reads only its own day's partition and writes its own run folder. The days
come from today's date in UTC, as the real scheduler sees it (it cannot be frozen from
here: it runs in its own processes)."""

from __future__ import annotations

import json
import time
import urllib.error
from datetime import UTC, date, datetime, timedelta

import pytest

from tests.support.airflow_standalone import make_home, standalone, wait_for, write_corpus
from tests.support.paths import MODEL, WORKER

pytestmark = pytest.mark.skipif(
    not (WORKER.exists() and (MODEL / "config.json").exists()),
    reason="needs .venv-worker and the prepared model (make setup)",
)


def utc_today() -> date:
    return datetime.now(UTC).date()


def scheduled_day(today: date) -> str:
    """With catchup off, unpausing schedules the latest complete daily interval:
    yesterday's [today - 1, today) (docs/adr/0005)."""
    return (today - timedelta(days=1)).isoformat()


def backfill_days(today: date) -> list[str]:
    """Two days before the scheduled one (a backfill's logical date = interval start)."""
    return [(today - timedelta(days=n)).isoformat() for n in (3, 2)]


def _while_locked(call, seconds: float = 180):
    """Retry a call the API server answers 503: on SQLite it does so while the scheduler
    holds the database lock ("Database is locked"), for long on a loaded machine."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            return call()
        except urllib.error.HTTPError as exc:
            if exc.code != 503 or time.monotonic() > deadline:
                raise
        time.sleep(3)


@pytest.fixture(scope="module")
def scheduler(tmp_path_factory):
    """`airflow standalone` (support/airflow_standalone.py) whose DAG defaults live in this test's
    folder, with a corpus of the five days up to today (today's too: if the test runs
    across midnight the scheduler picks it)."""
    home = tmp_path_factory.mktemp("standalone")
    make_home(home)
    today = utc_today()
    write_corpus(home, today.isoformat(), days=5, docs_per_day=3)
    with standalone(home) as airflow:
        yield airflow.api, home, today


def test_scheduled_run_and_backfill_each_read_their_own_day(scheduler):
    api, tmp, today = scheduler
    backfill = backfill_days(today)
    wait_for(lambda: api.call("GET", "/api/v2/dags/synthetic_rephrase"), 180, "the DAG to parse")
    conf = {"source": f"file://{tmp}/var/corpus", "output_root": f"file://{tmp}/var/data",
            "catalog_uri": f"sqlite:///{tmp}/var/catalog/catalog.db",
            "warehouse": f"file://{tmp}/var/warehouse", "templates": ["summary"],
            "shard_tokens": 2048, "max_new_tokens": 16, "checkpoint_rows": 2,
            "max_shard_groups": 1, "smoke_steps": 2}
    created = _while_locked(lambda: api.call("POST", "/api/v2/backfills", {
        "dag_id": "synthetic_rephrase", "from_date": f"{backfill[0]}T00:00:00Z",
        "to_date": f"{backfill[-1]}T00:00:00Z", "max_active_runs": 1,
        "dag_run_conf": conf}))
    _while_locked(lambda: api.call("PATCH", "/api/v2/dags/synthetic_rephrase",
                                   {"is_paused": False}))

    def finished():
        runs = api.call("GET", "/api/v2/dags/synthetic_rephrase/dagRuns")["dag_runs"]
        kinds = {r["run_type"] for r in runs}
        done = all(r["state"] in ("success", "failed") for r in runs)
        return runs if done and kinds == {"backfill", "scheduled"} and len(runs) == 3 else None

    # three whole runs (Spark, vLLM) one after another: well over 20 min on a loaded machine
    runs = wait_for(finished, 2700, "the scheduled run and the backfill's runs")
    assert created["id"] >= 1
    log_tail = (tmp / "standalone.log").read_text()[-3000:]
    assert {r["state"] for r in runs} == {"success"}, log_tail
    days = {r["run_type"]: [] for r in runs}
    for r in runs:
        days[r["run_type"]].append(r["data_interval_start"][:10])
    assert sorted(days["backfill"]) == backfill
    # catchup off: only the latest interval (the one after midnight if the test crossed it)
    (scheduled,) = days["scheduled"]
    assert scheduled in {scheduled_day(today), scheduled_day(utc_today())}
    for day in [*backfill, scheduled]:
        run = tmp / "var" / "data" / "synthetic_rephrase" / day
        summary = json.loads((run / "manifest" / "_SUMMARY.json").read_text())
        assert summary["objects"] == 1 and summary["partitions"] == 1  # its own day only
        plan = json.loads((run / "prompts" / "shards.json").read_text())
        assert plan["rows_in"] == 3
        assert list(run.glob("generated/*/_COMMITTED.json"))
