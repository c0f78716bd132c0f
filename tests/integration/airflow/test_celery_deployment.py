"""synthetic_rephrase under the CeleryExecutor, as platform teams run Airflow (issue 40,
docs/celery.md): two Celery workers, a Redis broker, PostgreSQL, task logs in S3, nothing
on a disk two tasks share. One deployment and one run carry every test here (fixture
``celery_run``, support/celery_deployment.py): the run's rephrase worker is SIGKILLed
after the step's first checkpoint part, the broker is restarted while the scheduler
waits out the dead task, a new version of the DAGs is pushed to their git repository,
and the run must still finish on its own version with every row exactly once; a three-day
backfill then runs on the new version."""

from __future__ import annotations

import json
import subprocess
import urllib.parse
from datetime import datetime

from synthfactory.contract import steps
from tests.support.airflow_standalone import wait_for
from tests.support.celery_deployment import BACKFILL_DAYS, BUCKET, DAG, NEW_LICENSE, WORKERS
from tests.support.intervals import most_at_once, overlaps
from tests.support.paths import ROOT, WORKER_PYTHON

COUNT_ROWS = ROOT / "tests" / "integration" / "kubernetes" / "count_rows.py"
STEP_TASKS = {"crawl_metadata": steps.CRAWL, "stitch_prompts": steps.STITCH,
              "plan_shards": steps.PLAN, "shard.rephrase": steps.REPHRASE,
              "shard.validate": steps.VALIDATE, "join_chunks": steps.JOIN,
              "register_catalog": steps.REGISTER, "audit_run": steps.AUDIT}


def _tries(celery_run) -> list[tuple[str, int, int, str, str, str]]:
    """(task_id, map_index, try_number, state, hostname, queue) of every try of the run:
    the earlier tries from task_instance_history, the last from task_instance."""
    columns = "task_id, map_index, try_number, state, hostname, queue"
    sql = (f"SELECT {columns} FROM task_instance WHERE dag_id = %s AND run_id = %s UNION ALL "
           f"SELECT {columns} FROM task_instance_history WHERE dag_id = %s AND run_id = %s")
    return sorted(celery_run.query(sql, DAG, celery_run.run_id, DAG, celery_run.run_id))


def _host(name: str, hostnames: set[str]) -> str:
    return next(h for h in hostnames if h.split(".", 1)[0] == name)


def _log(celery_run, run_id: str, task_id: str, try_number: int, map_index: int = -1) -> str:
    path = (f"/api/v2/dags/{DAG}/dagRuns/{urllib.parse.quote(run_id)}/taskInstances/"
            f"{task_id}/logs/{try_number}?map_index={map_index}&full_content=true")
    content = celery_run.api.call("GET", path)["content"]
    return "\n".join(e if isinstance(e, str) else json.dumps(e) for e in content)


def test_the_whole_dag_runs_on_two_workers_sharing_no_disk(celery_run):
    assert celery_run.run["state"] == "success", celery_run.tail()
    tries = _tries(celery_run)
    last = {(t, i): s for t, i, _, s, _, _ in tries}
    # export_dataset runs when the export_url Param asks (none here): skipped, not failed
    assert {t for (t, _), s in last.items() if s != "success"} == {"export_dataset"}, tries
    assert last[("export_dataset", -1)] == "skipped"
    hostnames = {h for *_, h, _ in tries}
    assert {h.split(".", 1)[0] for h in hostnames} == set(WORKERS), hostnames
    # every step's task went to the Celery queue of its kind in the steps table
    for task_id, _, _, _, _, queue in tries:
        step = STEP_TASKS.get(task_id)
        if step is not None:
            assert queue == ("gpu" if step.kind == steps.GPU else "cpu"), (task_id, queue)
    assert {q for t, *_, q in tries if t in ("check_params", "wait_for_capacity")} == {"default"}
    # the run folder and the exported table are on S3, nothing of them on a worker's disk
    run = f"data/{DAG}/2026-11-29/"
    keys = celery_run.keys(run)
    assert any(k.endswith("/_COMMITTED.json") for k in keys if "/generated/" in k), keys
    assert any("/joined/" in k for k in keys), keys
    assert celery_run.keys("warehouse/"), "register wrote no data files to the warehouse"
    # each step's temporary folder (its result file) was on its worker's own disk, and gone
    # once the step ended
    for worker in WORKERS:
        scratch = celery_run.home / "airflow" / "workers" / worker / "tmp"
        assert scratch.is_dir() and not list(scratch.glob("synthfactory-step-*")), worker


def test_a_worker_killed_and_a_broker_restarted_mid_rephrase_lose_no_row(
        celery_run, tmp_path):
    assert celery_run.killed is not None
    tries = [t for t in _tries(celery_run) if t[0] == "shard.rephrase"]
    assert [(n, s) for _, _, n, s, _, _ in tries] == [(1, "failed"), (2, "success")], tries
    hostnames = {h for *_, h, _ in _tries(celery_run)}
    killed_host = _host(celery_run.killed.name, hostnames)
    first, second = tries[0][4], tries[1][4]
    assert first == killed_host and second != killed_host, tries
    # the retry resumed from the killed try's parts: a part holds checkpoint_rows attempts
    summary = celery_run.api.call(
        "GET", f"/api/v2/dags/{DAG}/dagRuns/{celery_run.run_id}/taskInstances/shard.rephrase/"
               "xcomEntries/return_value?map_index=0")["value"]
    summary = json.loads(summary) if isinstance(summary, str) else summary
    (shard,) = summary["shards"]
    assert shard["status"] == "committed" and shard["resumed_attempts"] >= 2, summary
    # every prompt row exactly once in the generated and quarantined parts on S3
    run = f"data/{DAG}/2026-11-29/"
    s3 = celery_run.s3()
    for key in celery_run.keys(run):
        if key.startswith((run + "prompts/", run + "generated/", run + "quarantine/")):
            target = tmp_path / key[len(run):]
            target.parent.mkdir(parents=True, exist_ok=True)
            s3.download_file(BUCKET, key, str(target))
    counted = subprocess.run([str(WORKER_PYTHON), str(COUNT_ROWS), str(tmp_path)],
                             capture_output=True, text=True, check=True)
    rows = json.loads(counted.stdout.strip().splitlines()[-1])
    # one run took both faults: the worker's kill, then the broker's restart while the
    # scheduler waited out the killed task's heartbeat (so the retry crossed the new broker)
    for kind in ("worker-kill", "broker-restart"):
        print(f"RESULT celery_fault: kind={kind} lost={rows['lost']} "
              f"duplicated={rows['duplicated']} retried_on={second}")
    print(f"broker away {celery_run.broker_away_s:.1f} s")
    assert rows["prompts"] > 0 and rows["written"] == rows["prompts"], rows
    assert (rows["lost"], rows["duplicated"], rows["unknown"]) == (0, 0, 0), rows
    # the audit read the run on S3 and found every row once
    assert ("audit_run", -1, 1, "success") in {t[:4] for t in _tries(celery_run)}


def test_task_logs_are_read_from_s3_once_their_worker_is_gone(celery_run):
    """Each finished task's log is in S3 and the API server shows it from there: the
    workers keep no copy (delete_local_logs), and the killed worker serves nothing."""
    assert celery_run.run["state"] == "success", celery_run.tail()
    log_keys = celery_run.keys("airflow-logs/")
    hostnames = {h for *_, h, _ in _tries(celery_run)}
    killed_host = _host(celery_run.killed.name, hostnames)
    finished = [t for t in _tries(celery_run) if t[3] == "success"]
    by_killed = [t for t in finished if t[4] == killed_host]
    print(f"tasks the killed worker finished before it died: {[t[0] for t in by_killed]}")
    for task_id, map_index, try_number, _, _, _ in finished:
        assert any(f"run_id={celery_run.run_id}/task_id={task_id}/" in k
                   and k.endswith(f"attempt={try_number}.log") for k in log_keys), task_id
        shown = _log(celery_run, celery_run.run_id, task_id, try_number, map_index)
        if task_id in STEP_TASKS:  # the local runner's "running <argv>" line
            assert f"echo-worker {STEP_TASKS[task_id].name} " in shown, (task_id, shown[-2000:])
    # nothing kept on the live worker's disk: its copy of a log goes once the upload is
    # done, which may be just after the last task of the last run has ended
    def kept_locally() -> list[str]:
        return [str(p) for w in WORKERS if w != celery_run.killed.name
                for p in (celery_run.home / "airflow" / "workers" / w / "logs").rglob(
                    "attempt=*.log")]

    try:
        wait_for(lambda: not kept_locally(), 60, "the workers' local log copies to go")
    except AssertionError:
        raise AssertionError(f"task logs kept on a worker's disk: {kept_locally()}") from None


def test_no_secret_reaches_the_task_logs_in_s3(celery_run):
    s3 = celery_run.s3()
    logs = [s3.get_object(Bucket=BUCKET, Key=k)["Body"].read().decode(errors="replace")
            for k in celery_run.keys("airflow-logs/")]
    assert logs
    for name, value in celery_run.canaries.items():
        assert not any(value in text for text in logs), f"the {name} is in a task log"


def test_a_run_on_one_workers_disk_is_refused_before_any_work(celery_run):
    """Unpausing scheduled the latest day on the DAG's defaults, whose corpus, run folder,
    warehouse and catalog are on the local disk: check_params fails it, one line for each,
    and no step runs."""
    scheduled = celery_run.scheduled_run
    assert scheduled is not None
    run_id = scheduled["dag_run_id"]
    states = dict(celery_run.query(
        "SELECT task_id, state FROM task_instance WHERE dag_id = %s AND run_id = %s",
        DAG, run_id))
    assert states["check_params"] == "failed", states
    # no step ran; write_report, the teardown that reports every run, did
    assert {t for t, s in states.items() if s == "success"} == {"write_report"}, states
    assert states["crawl_metadata"] == "upstream_failed", states
    shown = _log(celery_run, run_id, "check_params", 1)
    for line in ("source=file://", "output_root=file://", "warehouse=file://",
                 "catalog_uri=sqlite"):
        assert line in shown, shown[-3000:]



def _card_license(celery_run, day: str) -> str:
    body = celery_run.s3().get_object(Bucket=BUCKET, Key=f"data/{DAG}/{day}/card/README.md")
    text = body["Body"].read().decode()
    return next(line.split(":", 1)[1].strip() for line in text.splitlines()
                if line.startswith("license:"))


def _backfill_ids(celery_run) -> list[str]:
    return [r["dag_run_id"] for r in celery_run.backfill_runs]


def test_a_three_day_backfill_runs_under_celery(celery_run):
    """After the first run, a backfill of the three days before it (the UI's Backfill form,
    through the REST API): each day reads its own partition and commits its own run folder
    on S3, and with the gpu pool's one slot their GPU steps took it in turn, on whichever
    worker was free, while the runs overlapped."""
    runs = celery_run.backfill_runs
    assert [r["data_interval_start"][:10] for r in runs] == list(BACKFILL_DAYS)
    assert {r["state"] for r in runs} == {"success"}, celery_run.tail()
    s3 = celery_run.s3()
    for day in BACKFILL_DAYS:
        run = f"data/{DAG}/{day}/"
        summary = json.loads(s3.get_object(Bucket=BUCKET, Key=run + "manifest/_SUMMARY.json")
                             ["Body"].read())
        assert summary["partitions"] == 1 and summary["objects"] > 0, (day, summary)
        assert any(k.endswith("/_COMMITTED.json") and "/generated/" in k
                   for k in celery_run.keys(run)), day
    def timeline(task_id: str) -> list[tuple]:
        return sorted(celery_run.query(
            "SELECT run_id, map_index, start_date, end_date, hostname FROM task_instance "
            "WHERE dag_id = %s AND task_id = %s AND run_id = ANY(%s)",
            DAG, task_id, _backfill_ids(celery_run)), key=lambda t: t[2])

    rephrase = timeline("shard.rephrase")
    print("backfill shard.rephrase: " + ", ".join(
        f"{s:%H:%M:%S}-{e:%H:%M:%S} on {h}" for _, _, s, e, h in rephrase))
    assert len(rephrase) == len(BACKFILL_DAYS), rephrase
    # the gpu pool's one slot: the days' waves took it in turn, as did their smoke tests
    # (every GPU step) ...
    assert overlaps([t[:4] for t in rephrase]) == set(), rephrase
    gpu = [t[:4] for t in rephrase + timeline("smoke_test_training")]
    assert most_at_once(gpu) == 1, gpu
    # ... while the runs themselves overlapped: the pool serialised them, not the runs
    spans = [(r["dag_run_id"], 0, datetime.fromisoformat(r["start_date"]),
              datetime.fromisoformat(r["end_date"])) for r in runs]
    assert most_at_once(spans) >= 2, spans


def test_a_run_keeps_the_dag_version_it_started_on(celery_run):
    """The DAGs come from a git repository (a versioned DAG bundle). A commit pushed while
    the first run is under way changes the license Param's default: that run still
    finishes on its own commit (its card says the old licence), the backfill after it is
    on the new commit (its cards say the new one)."""
    first, second = celery_run.commits
    assert celery_run.run["state"] == "success", celery_run.tail()
    later = _backfill_ids(celery_run)
    assert later and {r["state"] for r in celery_run.backfill_runs} == {"success"}
    versions = dict(celery_run.query(
        "SELECT run_id, bundle_version FROM dag_run WHERE dag_id = %s AND run_id = ANY(%s)",
        DAG, [celery_run.run_id, *later]))
    print(f"DAG bundle versions: first run {versions[celery_run.run_id]}, "
          f"backfill runs {sorted({versions[r] for r in later})}")
    assert versions == {celery_run.run_id: first, **{r: second for r in later}}
    # every task of the first run, those after the push included, ran its first version
    task_versions = {v for (v,) in celery_run.query(
        "SELECT DISTINCT v.bundle_version FROM task_instance t JOIN dag_version v "
        "ON v.id = t.dag_version_id WHERE t.dag_id = %s AND t.run_id = %s",
        DAG, celery_run.run_id)}
    assert task_versions == {first}, task_versions
    assert _card_license(celery_run, "2026-11-29") == "other"
    for day in BACKFILL_DAYS:
        assert _card_license(celery_run, day) == NEW_LICENSE, day


def test_each_run_records_the_installed_package_it_ran_with(celery_run):
    """A bundle versions dags/ only: the operators come with the installed package, whose
    version check_params records in the run's XCom."""
    from importlib.metadata import version

    for run_id in (celery_run.run_id, *_backfill_ids(celery_run)):
        value = celery_run.api.call(
            "GET", f"/api/v2/dags/{DAG}/dagRuns/{run_id}/taskInstances/check_params/"
                   "xcomEntries/return_value")["value"]
        value = json.loads(value) if isinstance(value, str) else value
        assert value["installed"] == {"synthfactory": version("synthfactory")}, value
