"""One real scheduler for the session's scheduler tests: starting Airflow costs minutes
on two cores, so test_backfill_scheduler.py and test_runs_left_behind.py share it
(fixture ``scheduler``).

The set-up is what a user meets, in order. A home (SYNTHFACTORY_HOME: the DAG's default
Params) holds a corpus of the DAYS days up to today (UTC: the scheduler's own clock,
which cannot be frozen from here) and the prepared model. The metadata database is a
fresh PostgreSQL database: on SQLite, with several runs going, the API server answers a
backfill request 503 "database is locked" after creating some of its runs, and the
scheduler then died on a run that vanished under it (Airflow 3.3.2, seen here). Then:

1. `make demo`, interrupted mid-task by Ctrl-C (SIGINT to its process group, as a
   terminal sends it): its trap stops the run and marks it failed;
2. `make demo`, killed mid-task with SIGKILL (no trap can run: a crash, the OOM killer):
   its run stays `running`, with nobody left to finish it;
3. `make standalone` (scheduler, DAG processor, triggerer, API server; LocalExecutor):
   before Airflow starts, scripts/local_airflow.py marks that run failed and creates the
   gpu pool;
4. the DAG is unpaused: catchup is off, so the latest day is scheduled once.

"Mid-task" is exact: the demos' crawl_metadata stops at the pause point
`crawl:part-written` (synthfactory/faults.py). Every rephrase runs the echo engine after
REPHRASE_S seconds of sleep (support/echo_worker.py): several days cost no vLLM engines,
and each rephrase lasts long enough to tell overlap from none in the task instances'
start and end dates, the scheduler's own records (``timeline``).
"""

from __future__ import annotations

import os
import signal
import subprocess
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest

from tests.support.airflow_home import airflow_env
from tests.support.airflow_standalone import (
    Api,
    make_home,
    standalone,
    wait_for,
    while_locked,
    write_corpus,
)
from tests.support.dag_run import _missing as missing  # with CI=true: a failure
from tests.support.echo_worker import echo_worker
from tests.support.paths import MODEL, ROOT, WORKER
from tests.support.postgres import postgres_database, query

DAG = "synthetic_rephrase"
DAYS = 10  # corpus partitions up to today: each test takes days of its own
REPHRASE_S = 30
PAUSE_AT = "crawl:part-written"
# the Makefile's recipes without their prerequisites: the environments exist (the suite
# runs in them) and the corpus is this home's, written above
MAKE = ["make", "--no-print-directory", "-C", str(ROOT), "-o", "setup", "-o", "corpus"]


@dataclass
class Demo:
    """One interrupted `make demo`: how it ended and what it printed."""

    how: str  # "ctrl-c" or "sigkill"
    output: str
    returncode: int
    step_pid: int  # the crawl_metadata step it was running when interrupted
    run_id: str = ""


@dataclass
class SchedulerSession:
    api: Api
    home: Path
    today: date
    standalone_log: Path
    db: str  # the metadata database's SQLAlchemy URL
    demos: dict[str, Demo] = field(default_factory=dict)

    def day(self, days_ago: int) -> str:
        return (self.today - timedelta(days=days_ago)).isoformat()

    def query(self, sql: str, *args) -> list[tuple]:
        """Rows of the metadata database (``%s`` placeholders)."""
        return query(self.db, sql, *args)

    def timeline(self, run_ids: list[str], task_id: str) -> list[tuple[str, int, datetime,
                                                                        datetime]]:
        """(run_id, map_index, start, end) of ``task_id`` in those runs, from the
        task_instance table, sorted by start."""
        rows = self.query(
            "SELECT run_id, map_index, start_date, end_date FROM task_instance WHERE "
            "dag_id = %s AND task_id = %s AND run_id = ANY(%s)", DAG, task_id, list(run_ids))
        return sorted(rows, key=lambda t: t[2])


def make_env(home: Path, worker_bin: Path, db: str, **extra: str) -> dict[str, str]:
    return {**airflow_env(home / "airflow"), "SYNTHFACTORY_RUNNER": "local",
            "SYNTHFACTORY_WORKER_BIN": str(worker_bin),
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": db, **extra}


def _interrupted_demo(home: Path, worker_bin: Path, db: str, how: str) -> Demo:
    """`make demo` until its crawl_metadata step is at the pause point, then Ctrl-C or
    SIGKILL to its whole process group."""
    marker = home / f"demo-paused-{how}"
    env = make_env(home, worker_bin, db, SYNTHFACTORY_PAUSE_AT=PAUSE_AT,
                   SYNTHFACTORY_PAUSE_MARKER=str(marker))
    out_path = home / f"make-demo-{how}.log"
    with open(out_path, "w") as out:
        make = subprocess.Popen([*MAKE, "demo", f"SYNTHFACTORY_HOME={home}"], env=env,
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            # the first demo migrates the metadata database: minutes on a busy machine
            wait_for(lambda: marker.exists() or make.poll() is not None, 900,
                     f"`make demo` to reach {PAUSE_AT}")
            assert marker.exists(), out_path.read_text()[-3000:]
            step_pid = int(marker.read_text().split()[0])
            if how == "ctrl-c":
                os.killpg(make.pid, signal.SIGINT)  # what the terminal sends on Ctrl-C
                make.wait(timeout=300)
            else:  # everything dies at once, the step too (its own session): a crash
                os.killpg(make.pid, signal.SIGKILL)
                make.wait(timeout=60)
                _kill(step_pid)
        finally:
            if make.poll() is None:
                os.killpg(make.pid, signal.SIGKILL)
                make.wait()
    return Demo(how, out_path.read_text(), make.returncode, step_pid)


def _kill(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)  # a local step leads a session of its own
    except ProcessLookupError:
        pass


def demo_runs(session: SchedulerSession) -> list[tuple[str, str, str | None]]:
    """(run_id, state, note) of the runs `airflow dags test` made, oldest first."""
    return session.query(
        "SELECT r.run_id, r.state, n.content FROM dag_run r LEFT JOIN dag_run_note n "
        "ON n.dag_run_id = r.id WHERE r.dag_id = %s AND r.triggered_by = 'TEST' "
        "ORDER BY r.id", DAG)


@pytest.fixture(scope="session")
def scheduler(tmp_path_factory) -> SchedulerSession:
    if not (WORKER.exists() and (MODEL / "config.json").exists()):
        pytest.skip("needs .venv-worker and the prepared model (make setup)")
    with postgres_database() as db:
        if db is None:
            missing("PostgreSQL on 127.0.0.1:5432 (the scheduler's metadata database)")
        yield from _scheduler(tmp_path_factory.mktemp("scheduler"), db)


def _scheduler(home: Path, db: str):
    make_home(home)
    today = datetime.now(UTC).date()
    # today's partition too: if the session runs across midnight the scheduler picks it
    write_corpus(home, today.isoformat(), days=DAYS, docs_per_day=3)
    worker_bin = echo_worker(home / "echo-worker", REPHRASE_S)
    demos = {how: _interrupted_demo(home, worker_bin, db, how) for how in ("ctrl-c", "sigkill")}
    env = make_env(home, worker_bin, db,
                   # three days' GPU tasks at once, and a CPU task beside them
                   AIRFLOW__CORE__PARALLELISM="4", AIRFLOW__CORE__MAX_ACTIVE_TASKS_PER_DAG="4")
    with standalone(home, env, command=[*MAKE, "standalone", f"SYNTHFACTORY_HOME={home}"]) as af:
        session = SchedulerSession(af.api, home, today, af.log, db, demos)
        for demo, (run_id, _, _) in zip(demos.values(), demo_runs(session), strict=True):
            demo.run_id = run_id
        wait_for(lambda: af.api.call("GET", f"/api/v2/dags/{DAG}"), 300, "the DAG to parse")
        while_locked(lambda: af.api.call("PATCH", f"/api/v2/dags/{DAG}", {"is_paused": False}))
        yield session


def wait_for_runs(session: SchedulerSession, run_type: str, days: list[str],
                  seconds: float) -> list[dict]:
    """The runs of ``run_type`` for ``days`` (interval starts), once all have finished."""

    def finished():
        runs = session.api.call("GET", f"/api/v2/dags/{DAG}/dagRuns?limit=100")["dag_runs"]
        mine = [r for r in runs if r["run_type"] == run_type
                and r["data_interval_start"][:10] in days]
        done = len(mine) == len(days) and all(r["state"] in ("success", "failed") for r in mine)
        return sorted(mine, key=lambda r: r["data_interval_start"]) if done else None

    return wait_for(finished, seconds, f"the {run_type} runs of {', '.join(days)}", every=10)


def backfill(api: Api, days: list[str], conf: dict, max_active_runs: int) -> dict:
    """A backfill of ``days`` through the REST API, as the UI's Backfill form makes it;
    retried while the scheduler has not yet marked the previous backfill complete (one
    backfill per DAG at a time)."""
    body = {"dag_id": DAG, "from_date": f"{days[0]}T00:00:00Z",
            "to_date": f"{days[-1]}T00:00:00Z", "max_active_runs": max_active_runs,
            "dag_run_conf": conf}

    def create():
        import urllib.error

        try:
            return while_locked(lambda: api.call("POST", "/api/v2/backfills", body))
        except urllib.error.HTTPError as exc:
            if exc.code == 409:  # another backfill is running (or not yet marked complete)
                return None
            raise

    return wait_for(create, 600, f"a backfill of {', '.join(days)}", every=10)
