"""scripts/local_airflow.py decides whose a `dags test` run is and whether that process
is gone, without a database: the cases the scheduler test cannot stage (a pid used
again by another process, tasks run by several processes). The whole story, under a
real scheduler: tests/integration/airflow/test_runs_left_behind.py."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest

from tests.support.scripts import load_script

NOW = datetime.now(UTC)


@pytest.fixture(scope="module")
def script():
    return load_script("local_airflow")


def _ti(pid, hostname="here", started=NOW):
    return SimpleNamespace(pid=pid, hostname=hostname, start_date=started)


def test_a_process_that_started_before_the_run_owns_it(script):
    assert script.alive(script.Owner(os.getpid(), "make demo", time.time()))


def test_a_pid_nobody_has_is_gone(script):
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert not script.alive(script.Owner(child.pid, "make demo", time.time()))


def test_a_pid_used_again_by_a_later_process_is_gone(script):
    """The owner died and another process got its pid: it started after the run did."""
    an_hour_ago = time.time() - 3600
    assert not script.alive(script.Owner(os.getpid(), "make demo", an_hour_ago))


def test_the_demo_record_names_the_owner_of_its_run(script):
    run = SimpleNamespace(logical_date=NOW)
    record = {"pid": 42, "logical_date": NOW, "by": "make demo", "since": 1.0}
    assert script.owner_of(run, [_ti(7)], record) == script.Owner(42, "make demo", 1.0)


def test_else_the_process_its_tasks_ran_in(script):
    run = SimpleNamespace(logical_date=NOW)
    other_demo = {"pid": 42, "logical_date": NOW - timedelta(days=1), "since": 1.0}
    tis = [_ti(7, started=NOW - timedelta(minutes=5)), _ti(7), _ti(None, started=None)]
    owner = script.owner_of(run, tis, other_demo)
    assert owner == script.Owner(7, "airflow dags test", NOW.timestamp(), "here")


@pytest.mark.parametrize("tis", [
    [],  # no task started: nothing says whose it is
    [_ti(7), _ti(8)],  # `dags test --use-executor`: a process per task
    [_ti(7, "here"), _ti(7, "there")],
])
def test_a_run_nothing_ties_to_one_process_is_left_alone(script, tis):
    assert script.owner_of(SimpleNamespace(logical_date=NOW), tis, None) is None
