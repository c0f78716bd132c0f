"""A whole synthetic_rephrase run through `airflow dags test` on SQLite, local runner:
real listing, real Spark, real vLLM (CPU), a real Iceberg table, a real training loop.
Then the same interval again: committed shards are skipped and the catalog keeps one
copy of the run's rows."""

from __future__ import annotations

import io
import json
import re
import shutil
import sqlite3
import subprocess
from contextlib import closing

import pytest

from tests.support.dag_run import task_states
from tests.support.paths import MODEL, WORKER, WORKER_PYTHON
from tests.support.scripts import load_script

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


# every task of the DAG, as the metadata database names them (shard groups are mapped)
TASKS = {"check_params", "crawl_metadata", "stitch_prompts", "plan_shards",
         "wait_for_capacity", "shard.rephrase", "shard.validate", "join_chunks",
         "register_catalog", "audit_run", "smoke_test_training", "write_card",
         "export_dataset", "write_report"}


def _not_succeeded(states: dict[str, str]) -> dict[str, str]:
    """The task instances of a run that did not succeed, and the tasks that never ran."""
    ran = {key.split("[")[0] for key in states}
    return ({key: str(state) for key, state in states.items() if state != "success"}
            | {task: "missing" for task in TASKS - ran})


def test_dag_run_succeeds_end_to_end(demo, dag_run):
    tmp, _, first, _ = demo
    assert first.returncode == 0, (first.stdout + first.stderr)[-4000:]
    # each task's state from Airflow's metadata database, not the log: `dags test` also
    # exits 0 when a task failed, and "state=success" is in its log while any task succeeds
    assert not _not_succeeded(dag_run.first_states), dag_run.first_states
    assert sum(key.startswith("shard.rephrase[") for key in dag_run.first_states) >= 2
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


def test_the_run_is_decontaminated_described_and_exported(demo, dag_run):
    """The conf names a made-up benchmark quoting the day's first document, a license and
    an export folder on S3: that document's rows are rejected as contaminated, the card
    says so, and the export on S3 holds the usable rows with the card beside them."""
    import boto3

    tmp, conf, first, _ = demo
    assert first.returncode == 0
    run = tmp / "data" / "synthetic_rephrase" / "2026-11-29"
    validations = [json.loads(p.read_text()) for p in run.glob("validation/*.json")]
    contaminated = sum(v["quality"].get("contaminated_by", {}).get("made_up_quiz", 0)
                       for v in validations)
    assert contaminated >= 1  # the quoted document's row(s)
    assert all(v["decontamination"]["benchmarks"] == ["made_up_quiz"] and
               v["decontamination"]["n"] == 13 for v in validations)
    card = (run / "card" / "README.md").read_text()
    assert card.startswith("---\nlicense: cc-by-4.0\n")
    assert "| made_up_quiz |" in card and "| Airflow DAG | synthetic_rephrase |" in card
    assert "| loss_last |" in card  # the smoke test ran before the card
    env = dag_run.worker_env
    s3 = boto3.client("s3", endpoint_url=env["AWS_ENDPOINT_URL"], region_name=env["AWS_REGION"],
                      aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
                      aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"])
    keys = sorted(o["Key"] for o in s3.list_objects_v2(
        Bucket="lake", Prefix="exports/2026-11-29/")["Contents"])
    assert keys[0] == "exports/2026-11-29/README.md"
    assert "exports/2026-11-29/data/train-00000.parquet" in keys
    exported = s3.get_object(Bucket="lake", Key="exports/2026-11-29/README.md")["Body"].read()
    usable = json.loads((run / "joined" / "_JOINED.json").read_text())["usable"]
    assert f"num_examples: {usable}\n".encode() in exported
    # the exported rows are the usable ones, as many as the join counted. How many the
    # embedded 135M model's 10 rows of this day give is its luck at sampling: 0 happens
    # (seen on 2026-12-07), and the export is then an empty train split that says so
    data = s3.get_object(Bucket="lake", Key="exports/2026-11-29/data/train-00000.parquet")
    exported_rows = subprocess.run(
        [str(WORKER_PYTHON), "-c", "import io, sys, pyarrow.parquet as pq; "
         "print(pq.read_metadata(io.BytesIO(sys.stdin.buffer.read())).num_rows)"],
        input=data["Body"].read(), capture_output=True, check=True).stdout
    assert int(exported_rows) == usable


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


def test_rerun_of_the_interval_redoes_nothing_and_keeps_one_copy(demo, dag_run, catalog_show):
    tmp, conf, first, second = demo
    assert second.returncode == 0, (second.stdout + second.stderr)[-4000:]
    assert not _not_succeeded(dag_run.second_states), dag_run.second_states
    assert "already committed" in second.stdout + second.stderr
    run = tmp / "data" / "synthetic_rephrase" / "2026-11-29"
    quality = [json.loads(p.read_text())["quality"] for p in run.glob("validation/*.json")]
    assert catalog_show()["rows"] == sum(q["usable"] for q in quality)


def test_a_failed_or_missing_task_is_seen_in_the_metadata_database(dag_run, tmp_path):
    """The check above, made to fail: the run's database with one shard's rephrase marked
    failed, and one without write_report's row, as a run that broke there would leave it."""
    db = tmp_path / "airflow.db"
    shutil.copy(dag_run.metadata_db, db)
    with closing(sqlite3.connect(db)) as conn:
        conn.execute("UPDATE task_instance SET state = 'failed' "
                     "WHERE task_id = 'shard.rephrase' AND map_index = 1")
        conn.execute("DELETE FROM task_instance WHERE task_id = 'write_report'")
        conn.commit()
    assert _not_succeeded(task_states(db)) == {"shard.rephrase[1]": "failed",
                                               "write_report": "missing"}


def test_make_demos_terminal_lines_over_a_real_dags_test_output(dag_run):
    """scripts/demo_progress.py over this run's `dags test` output, as `make demo` pipes
    it: a started and a done line for every task instance, none FAILED, and the
    rephrase progress of the shards."""
    follow = load_script("demo_progress").follow
    out = io.StringIO()
    output = dag_run.first.stdout + dag_run.first.stderr
    failed = follow(io.StringIO(output), io.StringIO(), out, every=10.0)
    shown = [line.split("  ", 1)[1] for line in out.getvalue().splitlines()]
    assert failed == 0
    for task in dag_run.first_states:
        assert f"{task} started" in shown, shown
        assert any(line.startswith(f"{task} done in ") for line in shown), shown
    assert any(re.fullmatch(r"  shard-\d{5}: \d+/\d+ rows, \d+ output tokens/s, ETA \d+s", line)
               for line in shown), shown
