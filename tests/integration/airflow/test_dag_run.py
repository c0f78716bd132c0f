"""A whole synthetic_rephrase run through `airflow dags test` on SQLite, local runner:
real listing, real Spark, real vLLM (CPU), a real Iceberg table, a real training loop.
Then the same interval again: committed shards are skipped and the catalog keeps one
copy of the run's rows."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
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


def _last_json(stdout: str) -> dict:
    return json.loads(stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("dagrun")
    env = {**os.environ, "AIRFLOW_HOME": str(tmp / "airflow"),
           "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
           "AIRFLOW__CORE__DAGS_FOLDER": str(ROOT / "dags"),
           "AIRFLOW__CORE__PLUGINS_FOLDER": str(ROOT / "plugins"),
           "SYNTHFACTORY_RUNNER": "local", "SYNTHFACTORY_HOME": str(ROOT)}
    subprocess.run([str(WORKER), "corpus", "--out", f"file://{tmp}/corpus", "--days", "2",
                    "--docs-per-day", "10", "--end-date", "2026-11-29"],
                   check=True, capture_output=True, env=env)
    subprocess.run([str(AIRFLOW), "db", "migrate"], check=True, capture_output=True, env=env)
    conf = {"source": f"file://{tmp}/corpus", "output_root": f"file://{tmp}/data",
            "catalog_uri": f"sqlite:///{tmp}/catalog.db", "warehouse": f"file://{tmp}/warehouse",
            "templates": ["summary", "qa"], "styles_per_doc": 1, "shard_tokens": 2048,
            "max_new_tokens": 24, "checkpoint_rows": 4, "max_shard_groups": 2,
            "smoke_steps": 3}

    def run_dag() -> subprocess.CompletedProcess:
        return subprocess.run(
            [str(AIRFLOW), "dags", "test", "synthetic_rephrase", "2026-11-30T00:00:00+00:00",
             "--conf", json.dumps(conf)],
            capture_output=True, text=True, env=env, timeout=900,
        )

    first = run_dag()
    second = run_dag()
    return tmp, conf, first, second


def _task_states(log: str) -> str:
    return log[-4000:]


def test_dag_run_succeeds_end_to_end(demo):
    tmp, _, first, _ = demo
    assert first.returncode == 0, _task_states(first.stdout + first.stderr)
    assert "state=success" in first.stdout + first.stderr
    run = tmp / "data" / "synthetic_rephrase" / "2026-11-29"  # the data interval's day
    plan = json.loads((run / "prompts" / "shards.json").read_text())
    assert plan["rows_in"] == 10
    assert len(plan["shards"]) >= 2
    commits = [json.loads(p.read_text()) for p in run.glob("generated/*/_COMMITTED.json")]
    assert len(commits) == len(plan["shards"])
    generated = sum(c["rows_generated"] for c in commits)
    assert generated + sum(c["rows_quarantined"] for c in commits) == plan["prompt_rows"]
    assert generated > 0 and sum(c["output_tokens"] for c in commits) > 0
    assert len(list(run.glob("validation/shard-*.json"))) == len(plan["shards"])


def test_catalog_table_holds_the_run_and_asset_event_carries_it(demo):
    tmp, conf, first, _ = demo
    assert first.returncode == 0
    shown = subprocess.run(
        [str(WORKER), "catalog", "show", "synthetic.rephrased", "--catalog-uri",
         conf["catalog_uri"], "--warehouse", conf["warehouse"]],
        capture_output=True, text=True, check=True)
    table = _last_json(shown.stdout)
    run = tmp / "data" / "synthetic_rephrase" / "2026-11-29"
    commits = [json.loads(p.read_text()) for p in run.glob("generated/*/_COMMITTED.json")]
    assert table["rows"] == sum(c["rows_generated"] for c in commits)

    db = sqlite3.connect(tmp / "airflow" / "airflow.db")
    extras = [json.loads(row[0]) for row in db.execute("SELECT extra FROM asset_event")]
    assert extras, "register_catalog emitted no Asset event"
    event = extras[-1]
    assert event["table"] == "synthetic.rephrased"
    assert event["rows"] == table["rows"]
    assert event["interval"].startswith("2026-11-29T00:00:00")
    assert event["templates"] and event["model"].endswith("SmolLM2-135M-Instruct")


def test_rerun_of_the_interval_redoes_nothing_and_keeps_one_copy(demo):
    tmp, conf, first, second = demo
    assert second.returncode == 0, _task_states(second.stdout + second.stderr)
    assert "already committed" in second.stdout + second.stderr
    shown = subprocess.run(
        [str(WORKER), "catalog", "show", "synthetic.rephrased", "--catalog-uri",
         conf["catalog_uri"], "--warehouse", conf["warehouse"]],
        capture_output=True, text=True, check=True)
    run = tmp / "data" / "synthetic_rephrase" / "2026-11-29"
    commits = [json.loads(p.read_text()) for p in run.glob("generated/*/_COMMITTED.json")]
    assert _last_json(shown.stdout)["rows"] == sum(c["rows_generated"] for c in commits)
