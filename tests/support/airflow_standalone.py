"""Start and stop a real `airflow standalone` (scheduler, DAG processor, triggerer and
API server on SQLite, LocalExecutor) for tests that need the scheduler or the UI.

It runs in its own session (process group) so stopping it stops every component and
every task process it started; parallelism is small, as on the 2-core machines this
suite runs on.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.support.airflow_home import airflow_env
from tests.support.paths import AIRFLOW, MODEL, WORKER
from tests.support.ports import free_port

GPU_POOL = "gpu"  # the local runner's GPU steps take a slot each (SYNTHFACTORY_GPU_POOL)


class Api:
    """The Airflow REST API (v2), with a bearer token once logged in."""

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


def while_locked(call, seconds: float = 180):
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


def ensure_pool(api: Api, name: str, slots: int) -> None:
    """The Airflow pool ``name`` with ``slots`` slots, created or resized."""
    try:
        while_locked(lambda: api.call("PATCH", f"/api/v2/pools/{name}?update_mask=slots", {
            "name": name, "slots": slots, "include_deferred": False}))  # checked whole
    except urllib.error.HTTPError as exc:
        if exc.code != 404:
            raise
        while_locked(lambda: api.call("POST", "/api/v2/pools", {
            "name": name, "slots": slots, "include_deferred": False}))


def wait_for(predicate, seconds: float, what: str, every: float = 2.0):
    """The predicate's first truthy value; OSError (server not up yet) counts as not yet."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            value = predicate()
            if value:
                return value
        except OSError:
            pass
        time.sleep(every)
    raise AssertionError(f"timed out waiting for {what}")


@dataclass
class Standalone:
    api: Api
    base: str
    home: Path  # SYNTHFACTORY_HOME of the DAG's default Params
    password: str
    log: Path


def make_home(tmp: Path) -> None:
    """A SYNTHFACTORY_HOME for the DAG's defaults, with the prepared model linked in."""
    (tmp / "var" / "models").mkdir(parents=True, exist_ok=True)
    link = tmp / "var" / "models" / MODEL.name
    if not link.exists():
        link.symlink_to(MODEL)


def write_corpus(home: Path, end_date: str, days: int, docs_per_day: int) -> None:
    subprocess.run([str(WORKER), "corpus", "--out", f"file://{home}/var/corpus",
                    "--days", str(days), "--docs-per-day", str(docs_per_day),
                    "--end-date", end_date], check=True, capture_output=True)


@contextlib.contextmanager
def standalone(home: Path, extra_env: dict[str, str] | None = None,
               command: list[str] | None = None, gpu_slots: int = 1) -> Iterator[Standalone]:
    """`airflow standalone` (or ``command``, e.g. `make standalone`) with AIRFLOW_HOME under
    ``home``; yields once the API server answers and the admin can log in, and the gpu
    pool the GPU steps take exists (``gpu_slots`` slots, unless it did already); stops the
    whole process group on exit."""
    port = free_port()
    env = {**airflow_env(home / "airflow"),
           "AIRFLOW__CORE__PARALLELISM": "2",
           "AIRFLOW__DAG_PROCESSOR__PARSING_PROCESSES": "1",
           "AIRFLOW__API__PORT": str(port),
           "AIRFLOW__API__HOST": "127.0.0.1",  # test traffic stays on the loopback
           # the log servers' fixed defaults (8793, 8794) would clash with another
           # standalone on the machine
           "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(free_port()),
           "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(free_port()),
           # task supervisors reach the API server here (default: port 8080)
           "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{port}/execution/",
           "AIRFLOW__SCHEDULER__MIN_FILE_PROCESS_INTERVAL": "5",
           # a task's supervisor gives up on a slow API server after 5 s by default and
           # kills the task: a loaded 2-core machine answers in seconds, not milliseconds
           "AIRFLOW__WORKERS__EXECUTION_API_TIMEOUT": "60",
           "SYNTHFACTORY_RUNNER": "local", "SYNTHFACTORY_HOME": str(home),
           "SYNTHFACTORY_WORKER_BIN": str(WORKER),
           # standalone starts its components as `airflow ...` from PATH
           "PATH": f"{AIRFLOW.parent}{os.pathsep}{os.environ.get('PATH', '')}",
           **(extra_env or {})}
    log_path = home / "standalone.log"
    log = open(log_path, "w")
    proc = subprocess.Popen(command or [str(AIRFLOW), "standalone"], env=env, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)
    try:
        base = f"http://127.0.0.1:{port}"
        # first start migrates the database: a minute alone, several on a busy machine
        wait_for(lambda: Api(base).call("GET", "/api/v2/monitor/health"), 600, "the API server")
        passwords = home / "airflow" / "simple_auth_manager_passwords.json.generated"
        wait_for(passwords.exists, 60, "the admin password")
        password = json.loads(passwords.read_text())["admin"]
        token = Api(base).call("POST", "/auth/token",
                               {"username": "admin", "password": password})["access_token"]
        api = Api(base, token)
        try:  # `make standalone` creates it (scripts/local_airflow.py): leave it as it is
            while_locked(lambda: api.call("GET", f"/api/v2/pools/{GPU_POOL}"))
        except urllib.error.HTTPError as exc:
            if exc.code != 404:
                raise
            ensure_pool(api, GPU_POOL, gpu_slots)
        yield Standalone(api, base, home, password, log_path)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)  # the whole group: scheduler, API server, ...
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            pass
        with contextlib.suppress(ProcessLookupError):  # a task process that outlived it
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()
