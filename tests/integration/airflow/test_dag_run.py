"""A whole synthetic_rephrase run through `airflow dags test` on SQLite, local runner:
real listing, real Spark, real vLLM (CPU), a real Iceberg table, a real training loop.
Then the same interval again: committed shards are skipped and the catalog keeps one
copy of the run's rows."""

from __future__ import annotations

import json
import sqlite3
import subprocess

import pytest

from tests.support.paths import MODEL, WORKER

pytestmark = pytest.mark.skipif(
    not (WORKER.exists() and (MODEL / "config.json").exists()),
    reason="needs .venv-worker and the prepared model (make setup)",
)


def _last_json(stdout: str) -> dict:
    return json.loads(stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def demo(dag_run):
    """The session's DAG run (tests/support/dag_run.py): PostgreSQL catalog, S3 warehouse."""
    return dag_run.tmp, dag_run.conf, dag_run.first, dag_run.second


@pytest.fixture(scope="module")
def catalog_show(dag_run):
    """``catalog show`` of the run's catalog, its URI and keys in the environment."""
    def show() -> dict:
        shown = subprocess.run(
            [str(WORKER), "catalog", "show", "synthetic.rephrased", "--warehouse",
             dag_run.conf["warehouse"]],
            capture_output=True, text=True, check=True, env=dag_run.worker_env)
        return _last_json(shown.stdout)
    return show


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


def test_catalog_table_holds_the_run_and_asset_event_carries_it(demo, catalog_show):
    tmp, conf, first, _ = demo
    assert first.returncode == 0
    table = catalog_show()
    run = tmp / "data" / "synthetic_rephrase" / "2026-11-29"
    commits = [json.loads(p.read_text()) for p in run.glob("generated/*/_COMMITTED.json")]
    quality = [json.loads(p.read_text())["quality"] for p in run.glob("validation/*.json")]
    # the table reads the rows the quality gate let through; every generated row has a verdict
    assert sum(q["usable"] + q["rejected"] for q in quality) == sum(
        c["rows_generated"] for c in commits)
    assert table["rows"] == sum(q["usable"] for q in quality)

    db = sqlite3.connect(tmp / "airflow" / "airflow.db")
    extras = [json.loads(row[0]) for row in db.execute("SELECT extra FROM asset_event")]
    assert extras, "register_catalog emitted no Asset event"
    event = extras[-1]
    assert event["table"] == "synthetic.rephrased"
    assert event["rows"] == table["rows"]
    assert event["interval"].startswith("2026-11-29T00:00:00")
    assert event["templates"] and event["model"].endswith("SmolLM2-135M-Instruct")


def test_rerun_of_the_interval_redoes_nothing_and_keeps_one_copy(demo, catalog_show):
    tmp, conf, first, second = demo
    assert second.returncode == 0, _task_states(second.stdout + second.stderr)
    assert "already committed" in second.stdout + second.stderr
    run = tmp / "data" / "synthetic_rephrase" / "2026-11-29"
    quality = [json.loads(p.read_text())["quality"] for p in run.glob("validation/*.json")]
    assert catalog_show()["rows"] == sum(q["usable"] for q in quality)
