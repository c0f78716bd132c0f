"""The session's whole DAG run (tests/support/dag_run.py) ends with write_report: a complete report
whose figures are the run's, and the report view finds it through Airflow's database."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from synthfactory.hardware import cpu_hardware, default_dtype
from tests.support.paths import ROOT

FIGURES = {"rows_generated", "tokens_per_s", "prompt_lengths", "output_lengths"}

# In the DAG run's own Airflow (its AIRFLOW_HOME): resolve the run through the metadata
# database and render the DAG-run view, as the API server would.
VIEW = """
import json, sys
from fastapi.testclient import TestClient
from synthfactory_airflow.plugins.run_report.app import create_app
from synthfactory_airflow.plugins.run_report.dag_runs import run_folder
run_id = sys.argv[1]
client = TestClient(create_app(authorize=False), root_path="/synthfactory")
page = client.get("/dags/synthetic_rephrase/runs/" + run_id)
print(json.dumps({"folder": run_folder("synthetic_rephrase", run_id),
                  "status": page.status_code, "html": page.text}))
"""


def test_dag_run_ends_with_a_report_that_adds_up(dag_run):
    assert dag_run.first.returncode == 0, (dag_run.first.stdout + dag_run.first.stderr)[-3000:]
    run = dag_run.run_folder
    report = json.loads((run / "report" / "report.json").read_text())
    plan = json.loads((run / "prompts" / "shards.json").read_text())
    commits = [json.loads(p.read_text()) for p in run.glob("generated/*/_COMMITTED.json")]

    assert report["complete"] is True, report["missing"]
    assert report["dag_id"] == "synthetic_rephrase" and report["airflow_run_id"]
    assert report["documents_in"] == plan["rows_in"] == 10
    assert report["prompts"]["rows"] == plan["prompt_rows"]
    assert report["prompts"]["shards"] == len(plan["shards"]) == len(commits)
    rephrase = report["rephrase"]
    assert rephrase["rows_generated"] == sum(c["rows_generated"] for c in commits)
    assert rephrase["rows_quarantined"] == sum(c["rows_quarantined"] for c in commits)
    assert rephrase["rows_generated"] + rephrase["rows_quarantined"] == plan["prompt_rows"]
    assert report["tokens"]["output"] == sum(c["output_tokens"] for c in commits) > 0
    assert report["tokens"]["device_seconds"] == pytest.approx(
        sum(c["device_seconds"] for c in commits), abs=0.01)
    assert report["lengths"]["output_tokens"]["count"] == rephrase["rows_generated"]
    assert report["cost"]["usd_per_1b_output_tokens"] > 0
    # one engine choice for the run, the dtype this host's CPU runs natively (ADR 0130)
    dtype, reason = default_dtype(cpu_hardware())
    assert [(e["dtype"], e["dtype_reason"], e["shards"]) for e in report["tokens"]["engines"]
            ] == [(dtype, reason, len(commits))]
    assert {e["template_id"] for e in report["examples"]} == {"summary", "qa"}
    quality = report["quality"]  # every generated row got a verdict
    assert quality["usable"] + quality["rejected"] == rephrase["rows_generated"]
    assert set(report["figures"]) == FIGURES | (
        {"rejection_reasons"} if quality["rejected"] else set())
    for name in report["figures"].values():
        assert (run / "report" / name).read_bytes().startswith(b"\x89PNG")

    view = subprocess.run([sys.executable, "-c", VIEW, report["airflow_run_id"]],
                          capture_output=True, text=True, cwd=ROOT, env=dag_run.airflow_env)
    assert view.returncode == 0, view.stderr[-3000:]
    shown = json.loads(view.stdout.strip().splitlines()[-1])
    assert shown["folder"] == f"file://{run}"
    assert shown["status"] == 200
    assert (f'data-figure="rows_generated" data-value="{rephrase["rows_generated"]}"'
            in shown["html"])
    assert 'data-complete="true"' in shown["html"]
    assert f'data-figure="engine_dtype" data-value="{dtype}"' in shown["html"]
    assert reason in shown["html"]
