"""scripts/demo_progress.py, what `make demo` prints while its DAG runs: each task's start
and end (FAILED when a failure was logged in between), the worker's progress lines at
most every N seconds a shard, and every line in the log file. The same filter over a
real `dags test` output: tests/integration/airflow/test_dag_run.py."""

from __future__ import annotations

import io
import re

import pytest

from tests.support.scripts import load_script

# as `dags test` logs them (structlog's console format), and the local step's lines
START = "2026-12-04T10:00:00Z [info] [DAG TEST] starting task_id={} map_index={} [airflow]\n"
END = "2026-12-04T10:00:01Z [info] [DAG TEST] end task task_id={} map_index={} [airflow]\n"
STEP = "2026-12-04T10:00:00Z [info] shard-00000: {}/8 rows, 30 output tokens/s, ETA 9s [task]\n"


@pytest.fixture(scope="module")
def script():
    return load_script("demo_progress")


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _run(script, lines, clock=None, every=10.0):
    log, out = io.StringIO(), io.StringIO()
    clock = clock or Clock()

    def timed():  # each line arrives 4 s after the one before
        for line in lines:
            clock.now += 4
            yield line

    failed = script.follow(timed(), log, out, every=every, clock=clock)
    return log.getvalue(), [re.sub(r"^\d\d:\d\d:\d\d  ", "", line)
                            for line in out.getvalue().splitlines()], failed


def test_a_line_per_task_start_and_end_and_everything_in_the_log(script):
    lines = [START.format("crawl_metadata", -1), "a line of the step\n",
             END.format("crawl_metadata", -1), START.format("shard.rephrase", 1),
             END.format("shard.rephrase", 1)]
    log, out, failed = _run(script, lines)
    assert log == "".join(lines)
    assert out == ["crawl_metadata started", "crawl_metadata done in 8 s",
                   "shard.rephrase[1] started", "shard.rephrase[1] done in 4 s"]
    assert failed == 0


def test_a_failure_between_start_and_end_is_that_tasks(script):
    lines = [START.format("stitch_prompts", -1),
             "2026-12-04T10:00:00Z [error] Task failed with exception [task]\n",
             END.format("stitch_prompts", -1), START.format("write_report", -1),
             END.format("write_report", -1)]
    _, out, failed = _run(script, lines)
    assert out[1] == "stitch_prompts FAILED in 8 s" and out[3] == "write_report done in 4 s"
    assert failed == 1


def test_progress_at_most_every_ten_seconds_a_shard(script):
    # a line every 4 s: shown at 4, 16 (>= 10 after 4), 28; 8, 12, 20, 24 are not
    lines = [STEP.format(n) for n in range(1, 8)]
    _, out, _ = _run(script, lines)
    assert out == ["  shard-00000: 1/8 rows, 30 output tokens/s, ETA 9s",
                   "  shard-00000: 4/8 rows, 30 output tokens/s, ETA 9s",
                   "  shard-00000: 7/8 rows, 30 output tokens/s, ETA 9s"]
