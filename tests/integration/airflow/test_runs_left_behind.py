"""Runs an interrupted `make demo` leaves behind (docs/adr/0127), under the session's real
scheduler (support/scheduler.py): one demo interrupted mid-task by Ctrl-C, one killed
mid-task with SIGKILL, then `make standalone`, then a run triggered from the API.

Left alone, a `dags test` run whose process is gone stays `running` in the metadata
database forever, holding a place in max_active_runs: runs triggered later queue behind
such runs, and nothing says why.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

import psutil

from tests.support.airflow_standalone import wait_for, while_locked
from tests.support.scheduler import DAG, demo_runs

RUN_S = 900  # to its first step, behind whatever else runs


def _state(scheduler, run_id: str) -> tuple[str, str | None]:
    (row,) = [(state, note) for rid, state, note in demo_runs(scheduler) if rid == run_id]
    return row


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_ctrl_c_marks_the_demos_own_run_failed_and_stops_its_step(scheduler):
    demo = scheduler.demos["ctrl-c"]
    line = (f"synthfactory: marked run {demo.run_id} of {DAG} failed: make demo was "
            f"interrupted; its process (pid ")
    assert line in demo.output and "and the step it ran are stopped" in demo.output, demo.output
    assert demo.returncode != 0
    assert _gone(demo.step_pid)  # no crawl left running on its own
    state, note = _state(scheduler, demo.run_id)
    assert state == "failed" and "make demo was interrupted" in note  # shown on the run's page
    ((task_state,),) = scheduler.query(
        "SELECT state FROM task_instance WHERE run_id = %s AND task_id = 'crawl_metadata'",
        demo.run_id)
    assert task_state == "failed"


def test_make_standalone_marks_failed_the_run_a_killed_demo_left(scheduler):
    demo = scheduler.demos["sigkill"]
    assert "marked run" not in demo.output  # killed: no trap ran
    printed = [line for line in scheduler.standalone_log.read_text().splitlines()
               if line.startswith("synthfactory: marked run")]
    # one line, for the killed demo's run only: the interrupted one was marked already
    assert len(printed) == 1, printed
    assert re.fullmatch(rf"synthfactory: marked run {re.escape(demo.run_id)} of {DAG} failed: "
                        r"its process \(pid \d+, make demo\) is gone", printed[0]), printed
    state, note = _state(scheduler, demo.run_id)
    assert state == "failed" and "is gone" in note


def test_a_run_triggered_after_the_interrupted_demos_runs(scheduler):
    """Triggered as from the UI: it starts at once, not queued behind runs nobody owns,
    and its steps run (its end is the backfill tests' business; the session's teardown
    stops it if it is still going)."""
    api = scheduler.api
    conf = {"output_root": f"file://{scheduler.home}/var/data-triggered",
            "templates": ["summary"], "shard_tokens": 2048, "max_new_tokens": 16,
            "checkpoint_rows": 2, "max_shard_groups": 1, "smoke_steps": 2,
            "spark_partitions": 1}
    run = while_locked(lambda: api.call("POST", f"/api/v2/dags/{DAG}/dagRuns", {
        "logical_date": datetime.now(UTC).isoformat(), "conf": conf}))
    path = f"/api/v2/dags/{DAG}/dagRuns/{run['dag_run_id']}/taskInstances/crawl_metadata"

    def crawled():
        state = api.call("GET", path)["state"]
        assert state not in ("failed", "upstream_failed"), scheduler.standalone_log
        return state == "success"

    wait_for(crawled, RUN_S, "the triggered run's crawl_metadata", every=5)
    assert api.call("GET", f"/api/v2/dags/{DAG}/dagRuns/{run['dag_run_id']}")["state"] in (
        "running", "success")
    # nothing the demos left is running any more
    assert {state for _, state, _ in demo_runs(scheduler)} == {"failed"}
