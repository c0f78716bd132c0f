"""The local runner: the argv runs in a subprocess, its summary becomes the XCom, a
failure fails the task, and an AWS connection reaches the step as AWS_* variables."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from synthfactory_airflow.operators.local import LocalStepOperator, StepFailed
from tests.support.events import OutletEvents


@pytest.fixture
def fake_worker(tmp_path) -> Path:
    """A stand-in console script that honours the engine's result-file contract."""
    script = tmp_path / "synthfactory"
    script.write_text(textwrap.dedent("""\
        #!/usr/bin/env python3
        import json, os, sys
        if sys.argv[1] == "fail":
            print("boom", file=sys.stderr); sys.exit(int(sys.argv[2]))
        summary = {"argv": sys.argv[1:],
                   "aws": {k: v for k, v in os.environ.items() if k.startswith("AWS_")}}
        open(os.environ["SYNTHFACTORY_RESULT_FILE"], "w").write(json.dumps(summary))
        print("last line")
    """))
    script.chmod(0o755)
    return script


def test_summary_becomes_the_return_value(fake_worker):
    task = LocalStepOperator(task_id="crawl_metadata", arguments=["crawl", "--out", "x"],
                             worker_bin=str(fake_worker))
    summary = task.execute(context={"outlet_events": OutletEvents()})
    assert summary["argv"] == ["crawl", "--out", "x"]


def test_non_zero_exit_fails_the_task_and_may_be_retried(fake_worker):
    task = LocalStepOperator(task_id="t", arguments=["fail", "1"], worker_bin=str(fake_worker))
    with pytest.raises(StepFailed, match="exited with code 1"):
        task.execute(context={"outlet_events": OutletEvents()})


@pytest.mark.parametrize("code", [2, 3])
def test_bad_input_exit_codes_fail_without_retries(fake_worker, code):
    """2 (bad option) and 3 (PermanentError): the same argv would fail the same way."""
    from airflow.sdk.exceptions import AirflowFailException

    task = LocalStepOperator(task_id="t", arguments=["fail", str(code)],
                             worker_bin=str(fake_worker))
    with pytest.raises(AirflowFailException, match=f"exit code {code}: bad input, not retried"):
        task.execute(context={"outlet_events": OutletEvents()})


def test_missing_worker_environment_is_named(tmp_path):
    task = LocalStepOperator(task_id="t", arguments=["crawl"],
                             worker_bin=str(tmp_path / "nope" / "synthfactory"))
    with pytest.raises(StepFailed, match="worker environment missing"):
        task.execute(context={"outlet_events": OutletEvents()})


def test_summary_rides_on_outlet_asset_events(fake_worker):
    from airflow.sdk import Asset

    asset = Asset("iceberg://synthfactory/synthetic.rephrased")
    events = OutletEvents()
    task = LocalStepOperator(task_id="register_catalog", arguments=["register"],
                             worker_bin=str(fake_worker), outlets=[asset])
    task.execute(context={"outlet_events": events})
    assert events[asset].extra["argv"] == ["register"]


def test_aws_connection_reaches_the_step_as_standard_variables(fake_worker, monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_SF_S3", json.dumps({
        "conn_type": "aws", "login": "AKIAEXAMPLE", "password": "s3cr3t",
        "extra": {"endpoint_url": "http://127.0.0.1:9000", "region_name": "eu-west-1"},
    }))
    task = LocalStepOperator(task_id="t", arguments=["crawl"], worker_bin=str(fake_worker),
                             aws_conn_id="sf_s3")
    aws = task.execute(context={"outlet_events": OutletEvents()})["aws"]
    assert aws["AWS_ACCESS_KEY_ID"] == "AKIAEXAMPLE"
    assert aws["AWS_SECRET_ACCESS_KEY"] == "s3cr3t"
    assert aws["AWS_ENDPOINT_URL"] == "http://127.0.0.1:9000"
    assert aws["AWS_REGION"] == "eu-west-1"
