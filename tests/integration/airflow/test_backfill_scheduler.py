"""Scheduled runs and backfills under a real Airflow scheduler (`make standalone`:
scheduler, DAG processor, triggerer and API server on SQLite, LocalExecutor; the session's
one, support/scheduler.py).

Every run reads only its own day's partition and writes its own run folder. Days overlap
(the DAG's max_active_runs, SYNTHFACTORY_MAX_ACTIVE_RUNS, default 3): a backfill of three
days runs their rephrase waves at once when the gpu pool has a slot for each, read from
the task instances' start and end dates in the metadata database (the scheduler's own
records). One slot makes them take turns: pools are the scheduler's, whatever the
executor, and the Celery deployment's backfill checks that (test_celery_deployment.py).
The days come from today's date in UTC, as the real scheduler sees it. Rephrase runs the
echo engine, each for support/scheduler.py's REPHRASE_S seconds.
"""

from __future__ import annotations

import json
from datetime import date, timedelta

from tests.support.airflow_standalone import ensure_pool
from tests.support.intervals import most_at_once, overlaps
from tests.support.scheduler import DAG, REPHRASE_S, backfill, wait_for_runs

# small runs: three documents a day, one shard, one rephrase task per day
CONF = {"templates": ["summary"], "shard_tokens": 2048, "max_new_tokens": 16,
        "checkpoint_rows": 2, "max_shard_groups": 1, "smoke_steps": 2,
        "spark_partitions": 1}
RUNS_S = 1800  # three days of Spark, register and torch on a loaded 2-core machine


def scheduled_day(today: date) -> str:
    """With catchup off, unpausing schedules the latest complete daily interval:
    yesterday's [today - 1, today) (docs/adr/0005)."""
    return (today - timedelta(days=1)).isoformat()


def _run_folder(scheduler, day: str):
    return scheduler.home / "var" / "data" / "synthetic_rephrase" / day


def _log_tail(scheduler) -> str:
    return scheduler.standalone_log.read_text()[-3000:]


def _reads_its_own_day(scheduler, day: str) -> None:
    run = _run_folder(scheduler, day)
    summary = json.loads((run / "manifest" / "_SUMMARY.json").read_text())
    assert summary["objects"] == 1 and summary["partitions"] == 1  # its own day only
    plan = json.loads((run / "prompts" / "shards.json").read_text())
    assert plan["rows_in"] == 3
    assert list(run.glob("generated/*/_COMMITTED.json"))


def _backfill_three_days(scheduler, days: list[str], gpu_slots: int):
    """A backfill of ``days`` as many at once as the DAG allows (the UI's Backfill form
    caps its max_active_runs at the DAG's), with ``gpu_slots`` in the gpu pool; the
    finished runs and each day's shard.rephrase interval from the scheduler's records."""
    dag = scheduler.api.call("GET", f"/api/v2/dags/{DAG}")
    assert dag["max_active_runs"] == 3  # SYNTHFACTORY_MAX_ACTIVE_RUNS' default
    ensure_pool(scheduler.api, "gpu", gpu_slots)
    backfill(scheduler.api, days, CONF, max_active_runs=dag["max_active_runs"])
    runs = wait_for_runs(scheduler, "backfill", days, RUNS_S)
    assert {r["state"] for r in runs} == {"success"}, _log_tail(scheduler)
    run_ids = [r["dag_run_id"] for r in runs]
    rephrase = scheduler.timeline(run_ids, "shard.rephrase")
    assert sorted(r for r, *_ in rephrase) == sorted(run_ids)  # one wave (task) a day
    for _, _, start, end in rephrase:
        assert (end - start).total_seconds() >= REPHRASE_S
    print(f"gpu pool {gpu_slots} slot(s); shard.rephrase per day:")
    for run_id, _, start, end in rephrase:
        print(f"  {run_id}  {start:%H:%M:%S} - {end:%H:%M:%S}")
    return runs, rephrase


def test_a_backfill_runs_its_days_rephrase_waves_at_once_when_capacity_allows(scheduler):
    """Three days, a GPU slot for each and more: each day's wave is admitted on its own,
    all three generate at the same time, and each day reads and writes its own."""
    days = [scheduler.day(6), scheduler.day(5), scheduler.day(4)]
    _, rephrase = _backfill_three_days(scheduler, days, gpu_slots=8)
    assert most_at_once(rephrase) == 3, rephrase
    assert len(overlaps(rephrase)) == 3  # every pair of days overlapped
    for day in days:
        _reads_its_own_day(scheduler, day)


def test_the_scheduled_run_reads_its_own_day(scheduler):
    """Unpausing (catchup off) scheduled the latest complete interval only; it ran beside
    whatever else the session ran."""
    (run,) = wait_for_runs(scheduler, "scheduled", [scheduled_day(scheduler.today)], RUNS_S)
    assert run["state"] == "success", _log_tail(scheduler)
    _reads_its_own_day(scheduler, run["data_interval_start"][:10])
