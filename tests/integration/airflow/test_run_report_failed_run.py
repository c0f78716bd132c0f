"""A run that fails at its first step still ends with write_report, and stays failed
(write_report is a teardown, docs/adr/0101). Real Airflow (`dags test`, SQLite), real
engine; no Spark or vLLM: crawl fails on an interval without a partition."""

from __future__ import annotations

import json
import sqlite3
import subprocess

import pytest

from tests.support.airflow_home import airflow_env, migrate
from tests.support.paths import AIRFLOW, ROOT, WORKER


@pytest.mark.slow
def test_failed_run_gets_a_report_and_stays_failed(tmp_path):
    if not WORKER.exists():
        pytest.skip("needs .venv-worker (make setup)")
    env = airflow_env(tmp_path / "airflow", SYNTHFACTORY_RUNNER="local",
                      SYNTHFACTORY_HOME=str(ROOT))
    (tmp_path / "corpus").mkdir()  # no dt=... partition: crawl refuses the interval
    migrate(env)
    conf = {"source": f"file://{tmp_path}/corpus", "output_root": f"file://{tmp_path}/data"}
    done = subprocess.run(
        [str(AIRFLOW), "dags", "test", "synthetic_rephrase", "2026-11-30T06:00:00+00:00",
         "--conf", json.dumps(conf)], capture_output=True, text=True, env=env, timeout=600)
    log = done.stdout + done.stderr

    with sqlite3.connect(tmp_path / "airflow" / "airflow.db") as db:
        states = dict(db.execute(
            "SELECT task_id, state FROM task_instance WHERE dag_id = 'synthetic_rephrase'"))
        (run_state,) = db.execute(
            "SELECT state FROM dag_run WHERE dag_id = 'synthetic_rephrase'").fetchone()
    assert states["crawl_metadata"] == "failed", log[-3000:]
    assert states["smoke_test_training"] == "upstream_failed"
    assert states["write_report"] == "success", log[-3000:]
    assert run_state == "failed"  # the report did not turn the run green

    report = json.loads((tmp_path / "data" / "synthetic_rephrase" / "2026-11-29" / "report"
                         / "report.json").read_text())
    assert report["complete"] is False
    assert [m.split(":")[0] for m in report["missing"]] == [
        "manifest/_SUMMARY.json", "prompts/shards.json"]
    assert report["dag_id"] == "synthetic_rephrase" and report["airflow_run_id"]
    assert list(report["figures"]) == ["rows_generated"]
