"""One whole synthetic_rephrase run (twice: the rerun resumes), shared by the tests of
tests/integration/airflow: a DAG run costs minutes on 2 cores, so it happens once per
session (fixture ``dag_run``; the services it uses: ``canary_pg_role``, ``signing_s3``).

It runs in the production shape as far as one machine allows: the catalog database is
a PostgreSQL role reached through an Airflow connection with a password, the warehouse
is on S3 (a moto server that checks request signatures) reached through an Airflow AWS
connection. The password and the secret key are canaries test_secrets.py searches for.

Its steps push their metrics to a session Pushgateway that a session Prometheus scrapes
every second (fixture ``run_metrics``, Debian's binaries on 127.0.0.1; without them the
run goes on unwatched and the tests that read the metrics skip, or fail under CI=true):
test_run_metrics_live.py evaluates the dashboard's queries and the alerts' expressions
against this run, test_secrets.py searches the scraped series for the canaries.
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import subprocess
import time
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.support.airflow_home import airflow_env, migrate
from tests.support.paths import AIRFLOW, MODEL, MOTO_SERVER, ROOT, WORKER, WORKER_PYTHON
from tests.support.ports import free_port
from tests.support.postgres import create_canary_role, drop_role
from tests.support.prometheus import have_binaries, prometheus, pushgateway

PG = {"host": "127.0.0.1", "port": 5432, "user": "postgres", "dbname": "postgres"}
CATALOG_CONN_ID = "synthfactory_catalog"
AWS_CONN_ID = "synthfactory_aws"
BUCKET = "lake"
REGION = "us-east-1"
# OpenLineage: both runs' events, through the provider's file transport (docs/lineage.md)
LINEAGE_NAMESPACE = "synthfactory-test"
# seconds per `airflow dags test`, a bound for a hang, not a speed target. 900 was too
# tight: both runs took 888 s in one full suite (2026-12-06), and in the next the first
# alone passed 900 s while the engine half's vLLM tests loaded both cores beside it
DAG_TEST_TIMEOUT = int(os.environ.get("SYNTHFACTORY_DAG_TEST_TIMEOUT", "1800"))
# the rate the run's rephrase tasks are told to expect (the dashboard's "against its plan"
# and the slow-step alert read it). The rate is output tokens/s since the shard started,
# counted as rows end: on 2 loaded cores (load 3) a task read 0.8 tokens/s right after its
# first row, so a quarter of this is 6 times under the lowest figure seen
EXPECTED_TOKENS_PER_S = 0.5


@dataclass
class RunMetrics:
    """The session's Pushgateway and the Prometheus scraping it (every second)."""
    pushgateway: str
    prometheus: str


@dataclass
class DagRun:
    tmp: Path
    conf: dict
    first: subprocess.CompletedProcess
    second: subprocess.CompletedProcess
    airflow_env: dict[str, str]
    worker_env: dict[str, str]  # what a step of this run gets: catalog URI, AWS keys
    canaries: dict[str, str] = field(default_factory=dict)  # name -> secret value
    pg_role: str = ""
    s3_endpoint: str = ""
    first_states: dict[str, str] = field(default_factory=dict)  # task_states after each run
    second_states: dict[str, str] = field(default_factory=dict)
    metrics: RunMetrics | None = None  # None: no Prometheus here, the run went unwatched
    first_run_id: str = ""  # Airflow's run_id of the first run (its metrics' run_id label)
    first_window: tuple[float, float] = (0.0, 0.0)  # Unix seconds the first run began, ended

    @property
    def metadata_db(self) -> Path:
        return self.tmp / "airflow" / "airflow.db"

    @property
    def run_folder(self) -> Path:
        return self.tmp / "data" / "synthetic_rephrase" / "2026-11-29"  # the interval's day

    @property
    def lineage_events(self) -> Path:
        """One OpenLineage event a line, of both runs (test_lineage_events.py)."""
        return self.tmp / "lineage" / "events.jsonl"


def _missing(service: str) -> None:
    """With CI=true a missing service fails the suite; elsewhere the tests skip."""
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{service} is required with CI=true")
    pytest.skip(f"needs {service}")


@pytest.fixture(scope="session")
def canary_pg_role():
    """A login role with a canary password and a database it owns (PostgreSQL here
    trusts 127.0.0.1, so the role and database, not the password, prove which
    connection was used)."""
    import psycopg2  # apache-airflow[postgres]

    try:
        name, password = create_canary_role("sf_canary_")
    except psycopg2.OperationalError:
        _missing("PostgreSQL on 127.0.0.1:5432")
    yield name, password
    drop_role(name)


@pytest.fixture(scope="session")
def signing_s3():
    """A moto S3 server that authenticates requests (signature checked against an IAM
    access key it generated), so only the right secret key can write the warehouse."""
    if not MOTO_SERVER.exists():
        _missing(".venv-worker's moto_server")
    import boto3

    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    # The first three requests (the IAM set-up below) are let through unauthenticated.
    server = subprocess.Popen(
        [str(MOTO_SERVER), "-H", "127.0.0.1", "-p", str(port)],
        env={**os.environ, "INITIAL_NO_AUTH_ACTION_COUNT": "3"},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.2)
        anonymous = {"endpoint_url": endpoint, "region_name": REGION,
                     "aws_access_key_id": "setup", "aws_secret_access_key": "setup"}
        iam = boto3.client("iam", **anonymous)
        iam.create_user(UserName="synthfactory")
        iam.put_user_policy(UserName="synthfactory", PolicyName="s3", PolicyDocument=json.dumps(
            {"Version": "2012-10-17",
             "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}))
        key = iam.create_access_key(UserName="synthfactory")["AccessKey"]
        boto3.client("s3", endpoint_url=endpoint, region_name=REGION,
                     aws_access_key_id=key["AccessKeyId"],
                     aws_secret_access_key=key["SecretAccessKey"]).create_bucket(Bucket=BUCKET)
        yield endpoint, key["AccessKeyId"], key["SecretAccessKey"]
    finally:
        server.terminate()
        server.wait(timeout=30)


@pytest.fixture(scope="session")
def run_metrics(tmp_path_factory):
    """A Pushgateway and a Prometheus scraping it every second, for the session's DAG run;
    None where Debian's binaries are missing (the DAG run must not skip for them: the tests
    that read the metrics call ``required_binary`` themselves)."""
    if not have_binaries():
        yield None
        return
    with pushgateway() as gateway, prometheus(
            gateway, tmp_path_factory.mktemp("prometheus"), interval_s=1) as prom:
        yield RunMetrics(pushgateway=gateway, prometheus=prom)


def latest_run_id(db: Path, dag_id: str = "synthetic_rephrase") -> str:
    with closing(sqlite3.connect(db)) as conn:
        row = conn.execute("SELECT run_id FROM dag_run WHERE dag_id = ? ORDER BY id DESC "
                           "LIMIT 1", (dag_id,)).fetchone()
    return row[0] if row else ""


def task_states(db: Path, dag_id: str = "synthetic_rephrase") -> dict[str, str]:
    """Each task instance's state in the DAG's latest run, as Airflow's metadata database
    holds it: ``task_id`` (``task_id[i]`` for a mapped one) -> state (None: never queued)."""
    with closing(sqlite3.connect(db)) as conn:
        latest = conn.execute("SELECT run_id FROM dag_run WHERE dag_id = ? ORDER BY id DESC "
                              "LIMIT 1", (dag_id,)).fetchone()
        if latest is None:
            return {}
        rows = conn.execute("SELECT task_id, map_index, state FROM task_instance "
                            "WHERE dag_id = ? AND run_id = ?", (dag_id, latest[0])).fetchall()
    return {(task if index < 0 else f"{task}[{index}]"): state for task, index, state in rows}


@pytest.fixture(scope="session")
def dag_run(tmp_path_factory, canary_pg_role, signing_s3, run_metrics) -> DagRun:
    if not (WORKER.exists() and (MODEL / "config.json").exists()):
        pytest.skip("needs .venv-worker and the prepared model (make setup)")
    tmp = tmp_path_factory.mktemp("dagrun")
    role, pg_password = canary_pg_role
    endpoint, key_id, secret_key = signing_s3
    catalog_conn = {"conn_type": "postgres", "host": PG["host"], "port": PG["port"],
                    "login": role, "password": pg_password, "schema": role}
    aws_conn = {"conn_type": "aws", "login": key_id, "password": secret_key,
                "extra": {"endpoint_url": endpoint, "region_name": REGION}}
    env = {**airflow_env(tmp / "airflow"),
           "SYNTHFACTORY_RUNNER": "local", "SYNTHFACTORY_HOME": str(ROOT),
           f"AIRFLOW_CONN_{CATALOG_CONN_ID.upper()}": json.dumps(catalog_conn),
           f"AIRFLOW_CONN_{AWS_CONN_ID.upper()}": json.dumps(aws_conn),
           "SYNTHFACTORY_AWS_CONN_ID": AWS_CONN_ID,
           "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps(
               {"type": "file", "log_file_path": str(tmp / "lineage" / "events.jsonl"),
                "append": True}),
           "AIRFLOW__OPENLINEAGE__NAMESPACE": LINEAGE_NAMESPACE}
    if run_metrics is not None:  # every step pushes (every 2 s: more points to read)
        env.update({"SYNTHFACTORY_PUSHGATEWAY": run_metrics.pushgateway,
                    "SYNTHFACTORY_PUSH_SECONDS": "2",
                    "SYNTHFACTORY_EXPECTED_TOKENS_PER_S": str(EXPECTED_TOKENS_PER_S)})
    (tmp / "lineage").mkdir()
    subprocess.run([str(WORKER), "corpus", "--out", f"file://{tmp}/corpus", "--days", "2",
                    "--docs-per-day", "10", "--end-date", "2026-11-29"],
                   check=True, capture_output=True, env=env)
    migrate(env)
    # a made-up benchmark quoting 40 words of the day's first document: its rows are
    # rejected as contaminated (docs/decontamination.md)
    quote = subprocess.run(
        [str(WORKER_PYTHON), "-c", "import glob, sys, pyarrow.parquet as pq; "
         "f = sorted(glob.glob(sys.argv[1] + '/dt=2026-11-29/*.parquet'))[0]; "
         "print(' '.join(pq.read_table(f).column('text')[0].as_py().split()[:40]))",
         str(tmp / "corpus")], check=True, capture_output=True, text=True).stdout.strip()
    (tmp / "benchmarks").mkdir()
    (tmp / "benchmarks" / "made_up_quiz.jsonl").write_text(json.dumps({"text": quote}) + "\n")
    conf = {"source": f"file://{tmp}/corpus", "output_root": f"file://{tmp}/data",
            "catalog_conn_id": CATALOG_CONN_ID, "warehouse": f"s3://{BUCKET}/warehouse",
            "templates": ["summary", "qa"], "styles_per_doc": 1, "shard_tokens": 2048,
            "max_new_tokens": "auto", "checkpoint_rows": 4, "max_shard_groups": 2,
            "smoke_steps": 3, "benchmarks": f"file://{tmp}/benchmarks",
            "license": "cc-by-4.0", "export_url": f"s3://{BUCKET}/exports/2026-11-29"}

    def run_dag() -> subprocess.CompletedProcess:
        return subprocess.run(
            [str(AIRFLOW), "dags", "test", "synthetic_rephrase", "2026-11-30T00:00:00+00:00",
             "--conf", json.dumps(conf)],
            capture_output=True, text=True, env=env, timeout=DAG_TEST_TIMEOUT,
        )

    worker_env = {**os.environ,
                  "SYNTHFACTORY_CATALOG_URI": f"postgresql+psycopg2://{role}:{pg_password}@"
                                              f"{PG['host']}:{PG['port']}/{role}",
                  "AWS_ACCESS_KEY_ID": key_id, "AWS_SECRET_ACCESS_KEY": secret_key,
                  "AWS_ENDPOINT_URL": endpoint, "AWS_REGION": REGION}
    started = time.time()
    first = run_dag()
    first_window = (started, time.time())
    first_states = task_states(tmp / "airflow" / "airflow.db")
    first_run_id = latest_run_id(tmp / "airflow" / "airflow.db")
    second = run_dag()
    return DagRun(tmp=tmp, conf=conf, first=first, second=second, airflow_env=env,
                  worker_env=worker_env, first_states=first_states,
                  second_states=task_states(tmp / "airflow" / "airflow.db"),
                  canaries={"catalog password": pg_password, "AWS secret key": secret_key},
                  pg_role=role, s3_endpoint=endpoint, metrics=run_metrics,
                  first_run_id=first_run_id, first_window=first_window)
