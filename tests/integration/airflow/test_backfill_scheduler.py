"""Scheduled runs and a backfill under a real Airflow scheduler (`airflow standalone`:
scheduler, DAG processor, triggerer and API server on SQLite, LocalExecutor). Unpausing
the DAG (catchup off) schedules the latest interval; a backfill adds two earlier days.
Every run reads only its own day's partition and writes its own run folder. The days
come from today's date in UTC, as the real scheduler sees it (it cannot be frozen from
here: it runs in its own processes)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
WORKER = ROOT / ".venv-worker" / "bin" / "synthfactory"
AIRFLOW = ROOT / ".venv" / "bin" / "airflow"
MODEL = ROOT / "var" / "models" / "SmolLM2-135M-Instruct"

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


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Api:
    def __init__(self, base: str, token: str | None = None):
        self.base, self.token = base, token

    def call(self, method: str, path: str, body: dict | None = None):
        request = urllib.request.Request(
            self.base + path, method=method,
            data=json.dumps(body).encode() if body is not None else None,
            headers={"Content-Type": "application/json",
                     **({"Authorization": f"Bearer {self.token}"} if self.token else {})})
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.loads(response.read() or b"{}")


def _wait(predicate, seconds: float, what: str):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            value = predicate()
            if value:
                return value
        except OSError:
            pass
        time.sleep(2)
    raise AssertionError(f"timed out waiting for {what}")


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
def standalone(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("standalone")
    port = _free_port()
    # The scheduled run uses the DAG's default Params, which live under SYNTHFACTORY_HOME:
    # point it at this test's folder, with the prepared model linked in.
    (tmp / "var" / "models").mkdir(parents=True)
    (tmp / "var" / "models" / MODEL.name).symlink_to(MODEL)
    env = {**os.environ, "AIRFLOW_HOME": str(tmp / "airflow"),
           "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
           "AIRFLOW__CORE__DAGS_FOLDER": str(ROOT / "dags"),
           "AIRFLOW__CORE__PLUGINS_FOLDER": str(ROOT / "plugins"),
           "AIRFLOW__CORE__PARALLELISM": "2",
           "AIRFLOW__API__PORT": str(port),
           # the log servers' fixed ports (8793, 8794) clash with another standalone
           "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(_free_port()),
           "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(_free_port()),
           # task supervisors reach the API server here (default: port 8080)
           "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{port}/execution/",
           "AIRFLOW__SCHEDULER__MIN_FILE_PROCESS_INTERVAL": "5",
           # the 5 s default fails tasks on a loaded machine (SQLite lock waits)
           "AIRFLOW__WORKERS__EXECUTION_API_TIMEOUT": "60",
           "SYNTHFACTORY_RUNNER": "local", "SYNTHFACTORY_HOME": str(tmp),
           "SYNTHFACTORY_WORKER_BIN": str(WORKER),
           # standalone starts its components as `airflow ...` from PATH
           "PATH": f"{AIRFLOW.parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    today = utc_today()
    # today's partition too: if the test runs across midnight the scheduler picks it
    subprocess.run([str(WORKER), "corpus", "--out", f"file://{tmp}/var/corpus", "--days", "5",
                    "--docs-per-day", "3", "--end-date", today.isoformat()],
                   check=True, capture_output=True, env=env)
    log = open(tmp / "standalone.log", "w")
    proc = subprocess.Popen([str(AIRFLOW), "standalone"], env=env, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)
    try:
        base = f"http://127.0.0.1:{port}"
        # minutes on a loaded 2-core machine: standalone starts five Airflow processes
        _wait(lambda: Api(base).call("GET", "/api/v2/monitor/health"), 600, "the API server")
        passwords = tmp / "airflow" / "simple_auth_manager_passwords.json.generated"
        _wait(passwords.exists, 60, "the admin password")
        password = json.loads(passwords.read_text())["admin"]
        token = Api(base).call("POST", "/auth/token",
                               {"username": "admin", "password": password})["access_token"]
        yield Api(base, token), tmp, today
    finally:
        os.killpg(proc.pid, signal.SIGTERM)  # the whole group: scheduler, API server, ...
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()


def test_scheduled_run_and_backfill_each_read_their_own_day(standalone):
    api, tmp, today = standalone
    backfill = backfill_days(today)
    _wait(lambda: api.call("GET", "/api/v2/dags/synthetic_rephrase"), 180, "the DAG to parse")
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
    runs = _wait(finished, 2700, "the scheduled run and the backfill's runs")
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
