"""register_catalog through the real local runner, with real connections: the catalog
password (a PostgreSQL role) and the AWS secret key (a moto server that checks
signatures) reach the step as environment and appear in none of its argv, log lines,
summary (the XCom) or Iceberg metadata. Seconds, where the whole DAG run takes minutes;
test_secrets.py makes the same search over a whole run."""

from __future__ import annotations

import json
import logging
import subprocess

import pytest

from tests.support.dag_run import BUCKET, PG, REGION
from tests.support.events import OutletEvents
from tests.support.paths import ROOT, WORKER, WORKER_PYTHON

BUILD_RUN = """
import sys
from tests.support.run_folders import build_run
print(build_run(sys.argv[1], shard_rows=(3, 2), quarantined=1).run_url)
"""


@pytest.fixture
def registered(tmp_path, monkeypatch, capsys, caplog, canary_pg_role, signing_s3):
    from synthfactory_airflow.operators.local import LocalStepOperator

    if not WORKER.exists():
        pytest.skip("needs .venv-worker (make setup)")
    role, password = canary_pg_role
    endpoint, key_id, secret_key = signing_s3
    monkeypatch.setenv("AIRFLOW_CONN_SF_CATALOG", json.dumps(
        {"conn_type": "postgres", "host": PG["host"], "port": PG["port"], "login": role,
         "password": password, "schema": role}))
    monkeypatch.setenv("AIRFLOW_CONN_SF_AWS", json.dumps(
        {"conn_type": "aws", "login": key_id, "password": secret_key,
         "extra": {"endpoint_url": endpoint, "region_name": REGION}}))
    run_url = subprocess.run(
        [str(WORKER_PYTHON), "-c", BUILD_RUN, f"file://{tmp_path}/runs"],
        capture_output=True, text=True, check=True, cwd=ROOT).stdout.strip().splitlines()[-1]
    argv = ["register", "--run", run_url, "--table", "steps.rephrased", "--catalog-uri", "",
            "--warehouse", f"s3://{BUCKET}/step-warehouse"]
    task = LocalStepOperator(task_id="register_catalog", arguments=argv, worker_bin=str(WORKER),
                             aws_conn_id="sf_aws", catalog_conn_id="sf_catalog")
    capsys.readouterr()
    with caplog.at_level(logging.INFO):
        summary = task.execute(context={"outlet_events": OutletEvents()})
    out, err = capsys.readouterr()  # Airflow's log lines, wherever its logging sends them
    log = out + err + caplog.text
    return summary, log, (role, password), (endpoint, key_id, secret_key)


def test_the_step_used_both_secrets_and_shows_neither(registered):
    import boto3
    import psycopg2
    from botocore.exceptions import ClientError

    summary, log, (role, password), (endpoint, key_id, secret_key) = registered
    rows = summary["rows_generated"]  # the step really ran, and its output was logged
    assert summary["rows"] == rows > 0 and f"registered {rows} rows" in log
    # used: the table is in the connection's database, the data files in the signed bucket
    assert summary["catalog_uri"] == f"postgresql+psycopg2://{role}:***@127.0.0.1:5432/{role}"
    with psycopg2.connect(**{**PG, "dbname": role}) as db, db.cursor() as cur:
        cur.execute("SELECT table_name FROM iceberg_tables WHERE table_namespace = 'steps'")
        assert ("rephrased",) in cur.fetchall()
    s3 = boto3.client("s3", endpoint_url=endpoint, region_name=REGION,
                      aws_access_key_id=key_id, aws_secret_access_key=secret_key)
    keys = [o["Key"] for o in s3.list_objects_v2(
        Bucket=BUCKET, Prefix="step-warehouse/")["Contents"]]
    assert any(k.endswith(".parquet") for k in keys) and any(k.endswith(".json") for k in keys)
    wrong = boto3.client("s3", endpoint_url=endpoint, region_name=REGION,
                         aws_access_key_id=key_id, aws_secret_access_key="x" * 40)
    with pytest.raises(ClientError):
        wrong.list_objects_v2(Bucket=BUCKET)
    # shown nowhere: not in the log lines (no masker in this process), the summary, the
    # Iceberg metadata and data files
    objects = b"".join(s3.get_object(Bucket=BUCKET, Key=k)["Body"].read() for k in keys)
    for secret in (password, secret_key):
        assert secret not in log
        assert secret not in json.dumps(summary)
        assert secret.encode() not in objects
