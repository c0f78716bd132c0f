"""No secret of the session's DAG run (tests/support/dag_run.py) lands anywhere it should not be.

The run used a catalog connection whose password is a canary and an AWS connection whose
secret key is another. First: both really were used (else finding nothing proves
nothing). Then each place a secret must never land is searched for both, and each
search is shown to see real content (a known, non-secret string is found the same way).
"""

from __future__ import annotations

import copy
import json
import sqlite3
import subprocess
from pathlib import Path

import pendulum
import pytest

from tests.support.dag_run import BUCKET, CATALOG_CONN_ID, PG, REGION, DagRun
from tests.support.paths import WORKER_PYTHON


def leaks(run: DagRun, content: str | bytes) -> list[str]:
    """Which canaries ``content`` holds, raw or URL-quoted."""
    from urllib.parse import quote

    text = content.decode("utf-8", "replace") if isinstance(content, bytes) else content
    return [name for name, secret in run.canaries.items()
            if secret in text or quote(secret, safe="") in text]


def _files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file())


def _db(run: DagRun) -> sqlite3.Connection:
    return sqlite3.connect(run.tmp / "airflow" / "airflow.db")


def _s3(run: DagRun, secret: str | None = None):
    import boto3

    env = run.worker_env
    return boto3.client("s3", endpoint_url=run.s3_endpoint, region_name=REGION,
                        aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
                        aws_secret_access_key=secret or env["AWS_SECRET_ACCESS_KEY"])


@pytest.fixture(scope="module")
def run(dag_run) -> DagRun:
    assert dag_run.first.returncode == 0, (dag_run.first.stdout + dag_run.first.stderr)[-4000:]
    return dag_run


# -- the canaries were used ---------------------------------------------------------------

def test_the_catalog_connection_with_its_password_was_used(run):
    import psycopg2

    with psycopg2.connect(**{**PG, "dbname": run.pg_role}) as db, db.cursor() as cur:
        cur.execute("SELECT table_namespace, table_name FROM iceberg_tables")
        tables = set(cur.fetchall())
        cur.execute("SELECT tableowner FROM pg_tables WHERE tablename = 'iceberg_tables'")
        (owner,) = cur.fetchone()
    assert ("synthetic", "rephrased") in tables
    assert owner == run.pg_role  # created by the connection's login, in its database
    events = [json.loads(e) for (e,) in _db(run).execute("SELECT extra FROM asset_event")]
    # The step's own (redacted) view of its URI: it held a password, from the environment.
    assert events[-1]["catalog_uri"] == (
        f"postgresql+psycopg2://{run.pg_role}:***@{PG['host']}:{PG['port']}/{run.pg_role}")
    assert events[-1]["catalog_source"] == "environment + flags"


def test_the_aws_secret_key_reached_the_step(run):
    """The server checks signatures: the warehouse could only be written with the secret."""
    from botocore.exceptions import ClientError

    listed = _s3(run).list_objects_v2(Bucket=BUCKET, Prefix="warehouse/synthetic/rephrased/")
    # the table's metadata, written by register at every commit: data files only where
    # the run had usable rows (the embedded model's 10 rows may give none)
    assert any(o["Key"].endswith(".metadata.json") for o in listed.get("Contents", []))
    with pytest.raises(ClientError, match="Signature|AccessDenied|InvalidAccessKey"):
        _s3(run, secret="wrong-" + "x" * 34).list_objects_v2(Bucket=BUCKET)


# -- ... and found nowhere ----------------------------------------------------------------

def test_not_in_task_logs_nor_the_command_output(run):
    logs = _files(run.tmp / "airflow" / "logs")
    texts = {str(p): p.read_bytes() for p in logs}
    texts["dags test output"] = "".join(
        r.stdout + r.stderr for r in (run.first, run.second)).encode()
    assert {where: leaks(run, text) for where, text in texts.items() if leaks(run, text)} == {}
    everything = b"".join(texts.values())
    assert b"register_catalog" in everything and b"registered" in everything  # step output


def test_not_in_xcom_nor_asset_events(run):
    rows = _db(run).execute("SELECT task_id, value FROM xcom").fetchall()
    rows += [("asset_event", e) for (e,) in _db(run).execute("SELECT extra FROM asset_event")]
    assert [(task, leaks(run, str(value))) for task, value in rows if leaks(run, str(value))] == []
    assert any(task == "register_catalog" and "synthetic.rephrased" in str(value)
               for task, value in rows)


def test_not_in_rendered_template_fields(run):
    rows = _db(run).execute(
        "SELECT task_id, rendered_fields FROM rendered_task_instance_fields").fetchall()
    assert [(task, leaks(run, fields)) for task, fields in rows if leaks(run, fields)] == []
    register = [json.loads(fields) for task, fields in rows if task == "register_catalog"]
    assert register and register[0]["catalog_conn_id"] == CATALOG_CONN_ID
    argv = register[0]["arguments"]
    assert argv[argv.index("--catalog-uri") + 1] == ""


def test_not_in_the_airflow_home_at_all(run):
    """The metadata database file whole (dag_run conf, task instances, logs tables...)."""
    found = {str(p): leaks(run, p.read_bytes()) for p in _files(run.tmp / "airflow")}
    assert {where: names for where, names in found.items() if names} == {}


def test_not_in_any_file_of_the_run_folder(run):
    files = _files(run.run_folder)
    assert len(files) >= 10 and any(p.suffix == ".parquet" for p in files)
    found = {str(p): leaks(run, p.read_bytes()) for p in files}
    assert {where: names for where, names in found.items() if names} == {}


DUMP_ICEBERG = """
import json, os, sys
from pyiceberg.catalog import load_catalog
# the SQL catalog keys its rows by catalog name: the package's default one
catalog = load_catalog("synthfactory", uri=os.environ["SYNTHFACTORY_CATALOG_URI"],
                       warehouse=sys.argv[1], **{"s3.endpoint": os.environ["AWS_ENDPOINT_URL"]})
out = {}
for ident in catalog.list_tables("synthetic"):
    table = catalog.load_table(ident)
    out[".".join(ident)] = {
        "properties": table.properties,
        "snapshots": [s.summary.model_dump() if s.summary else {} for s in table.snapshots()],
    }
print(json.dumps(out, default=str))
"""


def test_not_in_iceberg_properties_snapshots_or_warehouse_files(run):
    dumped = subprocess.run([str(WORKER_PYTHON), "-c", DUMP_ICEBERG, run.conf["warehouse"]],
                            capture_output=True, text=True, env=run.worker_env)
    assert dumped.returncode == 0, dumped.stderr[-3000:]
    tables = json.loads(dumped.stdout)
    assert leaks(run, dumped.stdout) == []
    snapshots = tables["synthetic.rephrased"]["snapshots"]
    assert snapshots and any("synthfactory.run-url" in s for s in snapshots)

    s3 = _s3(run)
    keys = [o["Key"] for page in s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET)
            for o in page.get("Contents", [])]
    assert any(k.endswith(".metadata.json") for k in keys)
    found = {k: leaks(run, s3.get_object(Bucket=BUCKET, Key=k)["Body"].read()) for k in keys}
    assert {k: names for k, names in found.items() if names} == {}

    import psycopg2

    with psycopg2.connect(**{**PG, "dbname": run.pg_role}) as db, db.cursor() as cur:
        cur.execute("SELECT * FROM iceberg_tables")
        catalog_rows = cur.fetchall()
        cur.execute("SELECT * FROM iceberg_namespace_properties")
        catalog_rows += cur.fetchall()
    assert catalog_rows and leaks(run, repr(catalog_rows)) == []


def test_not_in_the_scraped_metrics(run):
    """Every series the session Prometheus scraped from the Pushgateway the run's steps and
    sensor pushed to (tests/support/dag_run.py, ``run_metrics``), both runs: each label
    name and value; and the Pushgateway's own /metrics text as it is now (the runs deleted
    their groups at their ends: write_report).

    Break used: the capacity sensor's labels (plugins/capacity/metrics.py, sensor_labels)
    given one more, the worker's AIRFLOW_CONN_SYNTHFACTORY_CATALOG: its password lands in
    a scraped label, and this test fails."""
    import time
    import urllib.request

    from tests.support.binaries import required_binary
    from tests.support.prometheus import series

    required_binary("prometheus", "prometheus")
    required_binary("prometheus-pushgateway", "prometheus-pushgateway")
    assert run.metrics is not None
    scraped = series(run.metrics.prometheus, '{job="synthfactory"}',
                     run.first_window[0] - 60, time.time())
    # real content: the run's steps and sensor, under the run's run_id
    assert {"register_catalog", "shard.rephrase", "wait_for_capacity"} <= {
        s.get("task") for s in scraped}
    assert run.first_run_id in {s.get("run_id") for s in scraped}
    found = [labels for labels in scraped if leaks(run, json.dumps(labels))]
    assert found == []
    text = urllib.request.urlopen(f"{run.metrics.pushgateway}/metrics", timeout=10).read()
    assert b"pushgateway_build_info" in text and leaks(run, text) == []


# -- the kubernetes runner's pods, built offline for every task of the same run -----------

def test_not_in_any_pod_spec_of_the_kubernetes_runner(run, tmp_path):
    from tests.support.dag_pods import built_pod, offline_kube, pod_tasks

    # The run's connections are in this process's environment too: no pod may copy them.
    env = {k: v for k, v in run.airflow_env.items()
           if k.startswith(("AIRFLOW_CONN_", "SYNTHFACTORY_")) and k != "SYNTHFACTORY_RUNNER"}
    (plan,) = [json.loads(v) for (v,) in _db(run).execute(
        "SELECT value FROM xcom WHERE task_id = 'plan_shards'")][:1]
    with offline_kube(tmp_path), pytest.MonkeyPatch.context() as mp:
        for name, value in env.items():
            mp.setenv(name, value)
        tasks = {task_id: task for (dag_id, task_id), task in pod_tasks(env).items()
                 if dag_id == "synthetic_rephrase"}
        dag = next(iter(tasks.values())).dag
        start = pendulum.datetime(2026, 11, 29, tz="UTC")
        context = {"params": {name: dag.params[name] for name in dag.params} | run.conf,
                   "data_interval_start": start, "data_interval_end": start.add(days=1),
                   "run_id": "manual__canary", "ds": start.to_date_string(), "dag": dag}
        specs = {}
        for task_id, task in tasks.items():
            mapped = {"shard.rephrase": "rephrase", "shard.validate": "validate"}.get(task_id)
            # a mapped group's task: one pod per shard group, its argv from the plan
            argvs = [group[mapped] for group in plan] if mapped else [None]
            for i, argv in enumerate(argvs):
                task = copy.copy(task)
                if argv is not None:
                    task.arguments = argv
                task.render_template_fields(dict(context))
                specs[f"{task_id}[{i}]" if mapped else task_id] = json.dumps(built_pod(task))
    assert {"crawl_metadata", "stitch_prompts", "plan_shards", "shard.rephrase[0]",
            "shard.validate[0]", "register_catalog", "audit_run", "smoke_test_training"} <= set(
        specs)
    assert {name: leaks(run, spec) for name, spec in specs.items() if leaks(run, spec)} == {}
    register = json.loads(specs["register_catalog"])["spec"]["containers"][0]
    assert register["args"][0] == "register"
    assert register["args"][register["args"].index("--catalog-uri") + 1] == ""
    assert {"secretRef": {"name": "synthfactory-worker-env", "optional": True}} in \
        register["envFrom"]
