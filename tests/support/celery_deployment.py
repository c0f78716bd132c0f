"""One Airflow deployment as platform teams run it (docs/celery.md), shared by the tests
of test_celery_deployment.py: starting it costs minutes on two cores, so it starts once
(fixture ``celery_run``) and carries the whole DAG run, the worker kill and the
remote-log read, and leaves no process behind.

The deployment is `scripts/celery_airflow.py` (what `make celery` runs): scheduler, API
server, DAG processor, triggerer and two Celery workers, each its own process group; a
private Redis as the broker (a test may stop it), a fresh PostgreSQL database as the
metadata database and Celery's result backend. Nothing is on a disk two tasks share:
the corpus, the run folder, the warehouse and the task logs are on S3 (a moto server),
the catalog is PostgreSQL reached through an Airflow connection, and each worker has a
folder of its own for scratch and logs. Both workers serve every queue, so a task whose
worker dies can go to the other one; which queue each task took is read from the
scheduler's records.

The run: the echo engine (support/echo_worker.py) rephrases one shard group. Every
worker carries SYNTHFACTORY_PAUSE_AT=rephrase:part-written, so the rephrase step stops
after its first checkpoint part and writes the marker (its pid); the fixture then
SIGKILLs that worker's process group and the step's (a node gone: nothing of it runs
on), and the scheduler, told to give up on a silent task after
TASK_HEARTBEAT_TIMEOUT_S, hands the retry to the other worker. The marker stays, so the
retry passes the point and resumes from the parts. Meanwhile the broker is restarted
(its queues lost: no persistence) and a new commit of the DAGs is pushed to the git
repository the deployment's DAG bundle tracks; once the run has finished, a backfill of
the three days before it runs on the new commit (BACKFILL_DAYS, the gpu pool's one slot:
their rephrase waves take it in turn).
"""

from __future__ import annotations

import json
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.support.airflow_home import airflow_env
from tests.support.airflow_standalone import Api, ensure_pool, wait_for
from tests.support.binaries import required_binary
from tests.support.dag_run import _missing
from tests.support.echo_worker import echo_worker
from tests.support.paths import AIRFLOW_BIN, MODEL, MOTO_SERVER, ROOT, WORKER
from tests.support.ports import free_port
from tests.support.postgres import create_canary_role, drop_role, postgres_database, query
from tests.support.scheduler import backfill

DAG = "synthetic_rephrase"
BUCKET = "lake"
REGION = "us-east-1"
AWS_CONN_ID = "synthfactory_aws"
CATALOG_CONN_ID = "synthfactory_catalog"
WORKERS = ("worker-a", "worker-b")
QUEUES = "default,cpu,gpu"
PAUSE_AT = "rephrase:part-written"
DAY = "2026-11-29"  # the run's data interval: a fixed day of the corpus written here
NEXT_DAY = "2026-11-30"
BROKER_DOWN_S = 5  # the broker's outage: the workers and the scheduler lose it meanwhile
# Airflow's default is 300 s: a dead worker's task waits that long. 60 s: a live task on
# a loaded 2-core machine (the suite's two halves side by side) must not be taken for dead
TASK_HEARTBEAT_TIMEOUT_S = 60
RUN_TIMEOUT_S = 1500
REMOTE_LOGS = f"s3://{BUCKET}/airflow-logs"
BUNDLE = "synthfactory-dags"
NEW_LICENSE = "cc-by-sa-4.0"  # the second commit's default for the license Param
# the backfill on the second commit: the three days before DAY (interval starts)
BACKFILL_DAYS = ("2026-11-26", "2026-11-27", "2026-11-28")
CORPUS_DAYS = 4  # BACKFILL_DAYS and DAY


@dataclass
class Worker:
    name: str
    pid: int  # its process group


@dataclass
class CeleryRun:
    api: Api
    home: Path
    db: str  # the metadata database's SQLAlchemy URL
    s3_endpoint: str
    aws: dict[str, str]  # the keys the deployment's connection holds
    run_id: str
    run: dict  # the DAG run as the API gives it once finished
    conf: dict
    killed: Worker | None
    killed_step_pid: int | None
    workers: dict[str, Worker]
    deployment_log: Path
    canaries: dict[str, str] = field(default_factory=dict)
    scheduled_run: dict | None = None  # the run unpausing scheduled, on the default Params
    commits: tuple[str, str] = ("", "")  # the DAG repository's first and second commits
    backfill_runs: list[dict] = field(default_factory=list)  # on the second commit
    broker_away_s: float = 0.0  # how long the restarted broker was down

    @property
    def run_url(self) -> str:
        return f"s3://{BUCKET}/data/{DAG}/{DAY}"

    def query(self, sql: str, *args) -> list[tuple]:
        """Rows of the metadata database (``%s`` placeholders)."""
        return query(self.db, sql, *args)

    def s3(self):
        import boto3

        return boto3.client("s3", endpoint_url=self.s3_endpoint, region_name=REGION,
                            aws_access_key_id=self.aws["key"],
                            aws_secret_access_key=self.aws["secret"])

    def keys(self, prefix: str) -> list[str]:
        pages = self.s3().get_paginator("list_objects_v2").paginate(Bucket=BUCKET,
                                                                     Prefix=prefix)
        return [o["Key"] for page in pages for o in page.get("Contents", [])]

    def tail(self) -> str:
        logs = self.home / "airflow" / "logs" / "celery-deployment"
        return "\n".join(f"== {p.name}\n{p.read_text()[-2500:]}"
                         for p in sorted(logs.glob("*.log")))


def _redis(port: int, folder: Path) -> subprocess.Popen:
    binary = required_binary("redis-server", "redis-server")
    folder.mkdir(parents=True, exist_ok=True)
    return subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                             "--appendonly", "no", "--dir", str(folder)],
                            stdout=open(folder / "redis.log", "w"), stderr=subprocess.STDOUT,
                            start_new_session=True)


def _moto(port: int) -> subprocess.Popen:
    if not MOTO_SERVER.exists():
        _missing(".venv-worker's moto_server")
    return subprocess.Popen([str(MOTO_SERVER), "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)


def _stop(process: subprocess.Popen, seconds: float = 60) -> None:
    if process.poll() is not None:
        return
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=seconds)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        pass
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait()


def deployment_env(home: Path, db: str, broker_port: int, api_port: int, s3: str,
                   aws: dict[str, str], role: str, pg_password: str,
                   worker_bin: Path, bare: Path) -> dict[str, str]:
    aws_conn = {"conn_type": "aws", "login": aws["key"], "password": aws["secret"],
                "extra": {"endpoint_url": s3, "region_name": REGION}}
    catalog_conn = {"conn_type": "postgres", "host": "127.0.0.1", "port": 5432,
                    "login": role, "password": pg_password, "schema": role}
    return {
        **airflow_env(home / "airflow"),
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": db,
        "AIRFLOW__CELERY__BROKER_URL": f"redis://127.0.0.1:{broker_port}/0",
        # one task at a time a worker: two tasks starting at once on one worker on a bundle
        # version it has not cloned yet can fail at start (the git provider's clone race,
        # apache/airflow#61716)
        "AIRFLOW__CELERY__WORKER_CONCURRENCY": "1",
        "SYNTHFACTORY_CELERY_WORKERS": " ".join(f"{w}:{QUEUES}" for w in WORKERS),
        "SYNTHFACTORY_API_PORT": str(api_port),
        "AIRFLOW__API__HOST": "127.0.0.1",  # test traffic stays on the loopback
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{api_port}/execution/",
        "SYNTHFACTORY_FIRST_LOG_PORT": str(free_port()),
        "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(free_port()),
        "AIRFLOW__WORKERS__EXECUTION_API_TIMEOUT": "60",  # a loaded 2-core machine
        "AIRFLOW__CORE__PARALLELISM": "4",
        "AIRFLOW__DAG_PROCESSOR__PARSING_PROCESSES": "1",
        "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT": str(TASK_HEARTBEAT_TIMEOUT_S),
        "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT_DETECTION_INTERVAL": "5",
        # each worker's task logs go to S3 once the task ends; its own copy is deleted,
        # so the API server can only read them from there
        "AIRFLOW__LOGGING__REMOTE_LOGGING": "True",
        "AIRFLOW__LOGGING__REMOTE_BASE_LOG_FOLDER": REMOTE_LOGS,
        "AIRFLOW__LOGGING__REMOTE_LOG_CONN_ID": AWS_CONN_ID,
        "AIRFLOW__LOGGING__DELETE_LOCAL_LOGS": "True",
        # the DAGs come from a versioned git bundle: each run keeps the commit it started on
        "AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE_CONFIG_LIST": json.dumps([{
            "name": BUNDLE, "classpath": "airflow.providers.git.bundles.git.GitDagBundle",
            "kwargs": {"repo_url": str(bare), "tracking_ref": "main", "subdir": "dags",
                       "refresh_interval": 5}}]),
        # two workers on one machine: tell their task instances apart by worker name
        "AIRFLOW__CORE__HOSTNAME_CALLABLE": "tests.support.worker_hostname.hostname",
        "PYTHONPATH": str(ROOT),
        f"AIRFLOW_CONN_{AWS_CONN_ID.upper()}": json.dumps(aws_conn),
        f"AIRFLOW_CONN_{CATALOG_CONN_ID.upper()}": json.dumps(catalog_conn),
        "SYNTHFACTORY_AWS_CONN_ID": AWS_CONN_ID,
        "SYNTHFACTORY_RUNNER": "local", "SYNTHFACTORY_HOME": str(home),
        "SYNTHFACTORY_WORKER_BIN": str(worker_bin),
        "SYNTHFACTORY_PAUSE_AT": PAUSE_AT,
        "SYNTHFACTORY_PAUSE_MARKER": str(home / "rephrase-paused"),
        "PATH": f"{AIRFLOW_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
    }


def _write_corpus(s3: str, aws: dict[str, str]) -> None:
    """CORPUS_DAYS days of seed documents on S3: crawl lists them, stitch reads them, on
    whichever workers those tasks land."""
    env = {**os.environ, "AWS_ACCESS_KEY_ID": aws["key"], "AWS_SECRET_ACCESS_KEY": aws["secret"],
           "AWS_ENDPOINT_URL": s3, "AWS_REGION": REGION}
    subprocess.run([str(WORKER), "corpus", "--out", f"s3://{BUCKET}/corpus",
                    "--days", str(CORPUS_DAYS), "--docs-per-day", "4", "--end-date", DAY],
                   check=True,
                   capture_output=True, env=env)


def _git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", "-c", "user.name=synthfactory tests",
                           "-c", "user.email=tests@synthfactory.invalid", *args], cwd=cwd,
                          check=True, capture_output=True, text=True).stdout.strip()


def dag_repository(home: Path) -> tuple[Path, Path, str]:
    """A bare repository holding this checkout's dags/ in one commit on ``main`` (what a
    team's deploy pipeline pushes), and a clone to commit the next version from:
    (bare, clone, first commit)."""
    bare, clone = home / "dags.git", home / "dags-clone"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(bare)], check=True)
    subprocess.run(["git", "clone", "-q", str(bare), str(clone)], check=True,
                   capture_output=True)
    (clone / "dags").mkdir()
    for dag_file in sorted((ROOT / "dags").glob("*.py")):
        (clone / "dags" / dag_file.name).write_text(dag_file.read_text())
    _git("add", "dags", cwd=clone)
    _git("commit", "-q", "-m", "synthfactory DAGs as installed", cwd=clone)
    _git("push", "-q", "origin", "HEAD:main", cwd=clone)
    return bare, clone, _git("rev-parse", "HEAD", cwd=clone)


def push_license_change(clone: Path, license_id: str) -> str:
    """The next version of the DAGs: the `license` Param's default changed (what the
    dataset card of a run that does not set it says). Returns the commit."""
    dag_file = clone / "dags" / "synthetic_rephrase.py"
    text = dag_file.read_text()
    changed = re.sub(r'("license": Param\()("[^"]*")', rf'\1"{license_id}"', text, count=1)
    assert changed != text, "the license Param's default was not found in the DAG file"
    dag_file.write_text(changed)
    _git("commit", "-q", "-am", f"license default {license_id}", cwd=clone)
    _git("push", "-q", "origin", "HEAD:main", cwd=clone)
    return _git("rev-parse", "HEAD", cwd=clone)


def _started_workers(log: Path) -> dict[str, Worker]:
    found = {}
    for name, pid in re.findall(r"^started (\S+) \(pid (\d+)\)", log.read_text(), re.M):
        if name in WORKERS:
            found[name] = Worker(name, int(pid))
    return found


def _login(base: str, home: Path) -> Api:
    passwords = home / "airflow" / "simple_auth_manager_passwords.json.generated"
    wait_for(passwords.exists, 120, "the admin password")
    password = json.loads(passwords.read_text())["admin"]
    token = Api(base).call("POST", "/auth/token",
                           {"username": "admin", "password": password})["access_token"]
    return Api(base, token)


def _parsed_versions(db: str) -> set[str]:
    return {v for (v,) in query(db, "SELECT bundle_version FROM dag_version WHERE "
                                "dag_id = %s", DAG)}


def _run_state(db: str, run_id: str) -> str | None:
    rows = query(db, "SELECT state FROM dag_run WHERE dag_id = %s AND run_id = %s", DAG, run_id)
    return rows[0][0] if rows else None


def _hostname_of(db: str, run_id: str, task_id: str) -> str | None:
    rows = query(db, "SELECT hostname FROM task_instance WHERE dag_id = %s AND run_id = %s "
                 "AND task_id = %s", DAG, run_id, task_id)
    return rows[0][0] if rows and rows[0][0] else None


def _kill_paused_rephrase(marker: Path, db: str, run_id: str,
                          workers: dict[str, Worker]) -> tuple[Worker, int]:
    """Once the rephrase step wrote its first part and paused: SIGKILL its worker's process
    group (the Celery worker, its task supervisors) and the step's own (it leads a
    session of its own), as if the worker's machine were gone."""
    wait_for(lambda: marker.exists() or _run_state(db, run_id) in ("success", "failed"),
             900, f"the rephrase step to pause at {PAUSE_AT}", every=1)
    assert marker.exists(), f"the run {run_id} ended {_run_state(db, run_id)} before rephrase"
    step_pid = int(marker.read_text().split()[0])
    host = wait_for(lambda: _hostname_of(db, run_id, "shard.rephrase"), 60,
                    "the rephrase task's hostname")
    worker = workers[host.split(".", 1)[0]]
    os.killpg(worker.pid, signal.SIGKILL)
    try:
        os.killpg(step_pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    return worker, step_pid


def trigger(api: Api, run_id: str, conf: dict, day: str = DAY,
            next_day: str = NEXT_DAY) -> dict:
    return api.call("POST", f"/api/v2/dags/{DAG}/dagRuns", {
        "dag_run_id": run_id, "logical_date": f"{next_day}T00:00:00Z",
        "data_interval_start": f"{day}T00:00:00Z", "data_interval_end": f"{next_day}T00:00:00Z",
        "conf": conf})


def finished_run(api: Api, run_id: str, seconds: float) -> dict:
    def done():
        run = api.call("GET", f"/api/v2/dags/{DAG}/dagRuns/{run_id}")
        return run if run["state"] in ("success", "failed") else None

    return wait_for(done, seconds, f"the run {run_id} to finish", every=5)


def backfill_runs(api: Api, seconds: float) -> list[dict]:
    """The backfill's runs, by day, once every one of BACKFILL_DAYS has finished."""
    def done():
        runs = [r for r in api.call("GET", f"/api/v2/dags/{DAG}/dagRuns?limit=100")["dag_runs"]
                if r["run_type"] == "backfill"]
        finished = [r for r in runs if r["state"] in ("success", "failed")]
        ready = sorted(r["data_interval_start"][:10] for r in finished) == list(BACKFILL_DAYS)
        return sorted(finished, key=lambda r: r["data_interval_start"]) if ready else None

    return wait_for(done, seconds, "the backfill of " + ", ".join(BACKFILL_DAYS), every=5)


# module scope: the deployment (six processes, a DAG processor re-reading the bundle every
# few seconds) must be gone before the next module's tests; kept for the session, it
# slowed the session DAG run past its timeout
@pytest.fixture(scope="module")
def celery_run(tmp_path_factory) -> Iterator[CeleryRun]:
    if not (WORKER.exists() and (MODEL / "config.json").exists()):
        pytest.skip("needs .venv-worker and the prepared model (make setup)")
    home = tmp_path_factory.mktemp("celery")
    (home / "var" / "models").mkdir(parents=True)
    (home / "var" / "models" / MODEL.name).symlink_to(MODEL)
    aws = {"key": "AKIACELERYTEST", "secret": "awscanary-" + secrets.token_hex(8)}
    broker_port, s3_port, api_port = free_port(), free_port(), free_port()
    broker = {"redis": _redis(broker_port, home / "redis")}
    moto = _moto(s3_port)
    s3 = f"http://127.0.0.1:{s3_port}"
    try:
        import psycopg2

        try:
            psycopg2.connect(connect_timeout=3, host="127.0.0.1", port=5432, user="postgres",
                             dbname="postgres").close()
        except psycopg2.OperationalError:
            _missing("PostgreSQL on 127.0.0.1:5432")
        role, pg_password = create_canary_role("sf_celery_")
        try:
            with postgres_database() as db:
                yield from _deployment(home, db, broker_port, api_port, s3, aws, role,
                                       pg_password, broker)
        finally:
            drop_role(role)
    finally:
        _stop(moto, 10)
        _stop(broker["redis"], 10)


def _answers(port: int) -> bool:
    """Something accepts connections on 127.0.0.1:``port`` (OSError, which wait_for takes
    for "not yet", while nothing does)."""
    socket.create_connection(("127.0.0.1", port), timeout=2).close()
    return True


def restart_broker(broker: dict, port: int, folder: Path) -> float:
    """Stop the private Redis and start it again on its port (its queues empty: no
    persistence); returns the seconds it was away."""
    stopped = time.monotonic()
    _stop(broker["redis"], 10)
    time.sleep(BROKER_DOWN_S)
    broker["redis"] = _redis(port, folder)
    wait_for(lambda: _answers(port), 120, "the restarted broker", every=0.5)
    return time.monotonic() - stopped


def _deployment(home, db, broker_port, api_port, s3, aws, role, pg_password, broker):
    import boto3

    # moto_server takes seconds to import and bind, minutes on a loaded machine; botocore's
    # EndpointConnectionError is no OSError, so wait for the port before the first call
    wait_for(lambda: _answers(int(s3.rsplit(":", 1)[1])), 300, "the moto server", every=1)
    boto3.client("s3", endpoint_url=s3, region_name=REGION, aws_access_key_id=aws["key"],
                 aws_secret_access_key=aws["secret"]).create_bucket(Bucket=BUCKET)
    _write_corpus(s3, aws)
    worker_bin = echo_worker(home / "echo-worker", 0)
    bare, clone, first_commit = dag_repository(home)
    env = deployment_env(home, db, broker_port, api_port, s3, aws, role, pg_password,
                         worker_bin, bare)
    log = home / "deployment.log"
    deployment = subprocess.Popen(
        [sys.executable, str(ROOT / "scripts" / "celery_airflow.py")], env=env, cwd=ROOT,
        stdout=open(log, "w"), stderr=subprocess.STDOUT, start_new_session=True)
    try:
        base = f"http://127.0.0.1:{api_port}"
        wait_for(lambda: deployment.poll() is None and Api(base).call(
            "GET", "/api/v2/monitor/health"), 600, "the API server")
        api = _login(base, home)
        workers = _started_workers(log)
        assert set(workers) == set(WORKERS), log.read_text()
        ensure_pool(api, "gpu", 1)
        wait_for(lambda: api.call("GET", f"/api/v2/dags/{DAG}"), 300, "the DAG to parse")
        conf = {"source": f"s3://{BUCKET}/corpus", "output_root": f"s3://{BUCKET}/data",
                "catalog_conn_id": CATALOG_CONN_ID, "warehouse": f"s3://{BUCKET}/warehouse",
                "templates": ["summary"], "styles_per_doc": 1, "shard_tokens": 8192,
                "max_new_tokens": 16, "checkpoint_rows": 2, "max_shard_groups": 1,
                "smoke_steps": 2, "spark_partitions": 1}
        run_id = "celery-" + secrets.token_hex(3)
        trigger(api, run_id, conf)
        api.call("PATCH", f"/api/v2/dags/{DAG}", {"is_paused": False})
        killed, step_pid = _kill_paused_rephrase(home / "rephrase-paused", db, run_id, workers)
        # while the scheduler waits out the killed task's heartbeat, the broker restarts:
        # the retry is sent through the new one, to a worker that had to reconnect
        broker_away_s = restart_broker(broker, broker_port, home / "redis")
        # mid-run, the team pushes the next version of the DAGs
        second_commit = push_license_change(clone, NEW_LICENSE)
        run = finished_run(api, run_id, RUN_TIMEOUT_S)
        # a backfill of the days before, once the DAG processor has parsed the new commit
        wait_for(lambda: second_commit in _parsed_versions(db), 300,
                 "the DAG processor to parse the second commit")
        backfill(api, list(BACKFILL_DAYS), conf, max_active_runs=len(BACKFILL_DAYS))
        backfilled = backfill_runs(api, RUN_TIMEOUT_S)
        scheduled = [r for r in api.call("GET", f"/api/v2/dags/{DAG}/dagRuns")["dag_runs"]
                     if r["run_type"] == "scheduled"]
        scheduled = [finished_run(api, r["dag_run_id"], 300) for r in scheduled]
        yield CeleryRun(api=api, home=home, db=db, s3_endpoint=s3, aws=aws, run_id=run_id,
                        run=run, conf=conf, killed=killed, killed_step_pid=step_pid,
                        workers=workers, deployment_log=log,
                        canaries={"catalog password": pg_password,
                                  "AWS secret key": aws["secret"]},
                        scheduled_run=scheduled[0] if scheduled else None,
                        commits=(first_commit, second_commit), backfill_runs=backfilled,
                        broker_away_s=broker_away_s)
    finally:
        _stop(deployment, 90)
        _leftovers(home, log)


def _leftovers(home: Path, log: Path) -> None:
    """Nothing the deployment started may outlive it: its components' process groups
    (a killed worker's task supervisors included) and the steps (each leads a session of
    its own; their command lines name this home's echo worker). Whatever is left is
    killed, and the session fails naming it."""
    groups = [int(pid) for pid in re.findall(r"^started \S+ \(pid (\d+)\)", log.read_text(),
                                             re.M)]
    left = []
    for group in groups:
        try:
            os.killpg(group, signal.SIGKILL)
            left.append(f"process group {group}")
        except ProcessLookupError:
            pass
    found = subprocess.run(["pgrep", "-f", str(home)], capture_output=True, text=True).stdout
    for pid in (int(p) for p in found.split()):
        try:
            os.kill(pid, signal.SIGKILL)
            left.append(f"step process {pid}")
        except ProcessLookupError:
            pass
    assert not left, f"the Celery deployment left {left} behind"
