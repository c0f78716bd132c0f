"""The local Airflow of `make demo` and `make standalone`: what they do before Airflow
starts, and what `make demo` does when it is interrupted (docs/adr/0127).

    .venv/bin/python scripts/local_airflow.py prepare
    .venv/bin/python scripts/local_airflow.py interrupted --pid PID --logical-date ISO

`prepare`: runs that `airflow dags test` left `running` although its process is gone (a
`make demo` killed with its terminal, or by the OOM killer) would hold their place in
`max_active_runs` forever, and a run triggered later would queue behind them with
nothing saying why. Each is marked failed, with a note on the run, and one line says so:

    synthfactory: marked run manual__... of synthetic_rephrase failed: its process
    (pid N, make demo) is gone

The owner of a run is the `make demo` that recorded it (`$AIRFLOW_HOME/demo-run.json`:
its pid and logical date), else the process its tasks ran in (`airflow dags test` runs
them in its own process: the task instances' pid and hostname). A process counts as gone
when no process has its pid, or the one that has it started after the run did (a pid
used again). Runs another machine owns, or no task of which started, are left alone.
It also creates the gpu pool the local runner's GPU steps take (`SYNTHFACTORY_GPU_POOL`),
one slot per GPU (1 without), when it does not exist: a task in a missing pool is never
scheduled, and only the scheduler's log says why.

`interrupted` (the `make demo` recipe's trap on INT, TERM and HUP): stops the demo's
`airflow dags test` (SIGKILL: on SIGTERM a task fails and `dags test` goes on with its
retries) and the step it runs (its own process group), then marks its run failed.

Run with .venv's python: it uses Airflow's ORM on the metadata database of $AIRFLOW_HOME.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

DAG_ID = "synthetic_rephrase"
DEMO_RECORD = "demo-run.json"  # in $AIRFLOW_HOME, written by the `make demo` recipe
SLACK_S = 2.0  # a process that started this much after the run's own start is not its owner


@dataclass(frozen=True)
class Owner:
    pid: int
    by: str  # "make demo" or "airflow dags test"
    since: float  # epoch seconds the owner was known to run (it started before)
    hostname: str | None = None  # None: this machine


def say(line: str) -> None:
    """Print, even to a terminal that is gone (a closed window: the trap still runs)."""
    try:
        print(line, flush=True)
    except OSError:
        pass


def alive(owner: Owner) -> bool:
    import psutil

    try:
        process = psutil.Process(owner.pid)
        started = process.create_time()
        zombie = process.status() == psutil.STATUS_ZOMBIE
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False
    return not zombie and started <= owner.since + SLACK_S


def demo_record(home: Path) -> dict | None:
    path = home / DEMO_RECORD
    try:
        record = json.loads(path.read_text())
        return {**record, "since": path.stat().st_mtime,
                "logical_date": datetime.fromisoformat(record["logical_date"])}
    except (OSError, ValueError, KeyError, TypeError):
        return None


def owner_of(run, tis, record: dict | None) -> Owner | None:
    """Who runs ``run`` (a `dags test` run), or None when nothing says."""
    if record and run.logical_date == record["logical_date"]:
        return Owner(int(record["pid"]), record.get("by") or "make demo", record["since"])
    started = [ti for ti in tis if ti.pid and ti.start_date]
    if not started or len({(ti.pid, ti.hostname) for ti in started}) != 1:
        return None  # no task started yet, or tasks in several processes (--use-executor)
    ti = started[0]
    return Owner(ti.pid, "airflow dags test", max(t.start_date for t in started).timestamp(),
                 ti.hostname)


def mark_failed(session, run, why: str) -> None:
    """The run failed, its running tasks failed, its pending ones skipped (the teardown
    too: nothing would run it), and a note on the run that says why."""
    from airflow.models import TaskInstance
    from airflow.utils.state import DagRunState, State, TaskInstanceState

    now = datetime.now(UTC)
    for ti in session.query(TaskInstance).filter(TaskInstance.dag_id == run.dag_id,
                                                 TaskInstance.run_id == run.run_id):
        if ti.state in State.finished:
            continue
        ti.state = (TaskInstanceState.FAILED if ti.state in (
            TaskInstanceState.RUNNING, TaskInstanceState.DEFERRED,
            TaskInstanceState.UP_FOR_RESCHEDULE, TaskInstanceState.QUEUED)
            else TaskInstanceState.SKIPPED)
        ti.end_date = now
    run.set_state(DagRunState.FAILED)
    run.note = f"marked failed by synthfactory: {why}"
    session.commit()


def active_test_runs(session, dag_id: str):
    from airflow.models import DagRun
    from airflow.utils.state import DagRunState
    from airflow.utils.types import DagRunTriggeredByType

    return session.query(DagRun).filter(
        DagRun.dag_id == dag_id,
        DagRun.triggered_by == DagRunTriggeredByType.TEST,
        DagRun.state.in_([DagRunState.RUNNING, DagRunState.QUEUED])).all()


def sweep(dag_id: str = DAG_ID) -> list[str]:
    """Mark failed every `dags test` run of ``dag_id`` whose process is gone."""
    from airflow.configuration import AIRFLOW_HOME
    from airflow.models import TaskInstance
    from airflow.utils.net import get_hostname
    from airflow.utils.session import create_session

    home = Path(AIRFLOW_HOME)
    record = demo_record(home)
    here = get_hostname()
    lines = []
    with create_session() as session:
        for run in active_test_runs(session, dag_id):
            tis = session.query(TaskInstance).filter(TaskInstance.dag_id == run.dag_id,
                                                     TaskInstance.run_id == run.run_id).all()
            owner = owner_of(run, tis, record)
            if owner is None or owner.hostname not in (None, here) or alive(owner):
                continue
            why = f"its process (pid {owner.pid}, {owner.by}) is gone"
            mark_failed(session, run, why)
            lines.append(f"synthfactory: marked run {run.run_id} of {dag_id} failed: {why}")
    if record and not alive(Owner(int(record["pid"]), "", record["since"])):
        (home / DEMO_RECORD).unlink(missing_ok=True)
    return lines


def ensure_gpu_pool() -> str | None:
    """Create the local runner's gpu pool if missing; the line that says so, or None."""
    from airflow.models import Pool
    from airflow.utils.session import create_session

    from synthfactory_airflow.operators.settings import Settings
    from synthfactory_airflow.plugins.capacity.cluster import local_gpu_count

    name = Settings().gpu_pool
    with create_session() as session:
        if session.query(Pool).filter(Pool.pool == name).first() is not None:
            return None
        gpus = local_gpu_count()
        slots = gpus or 1
        session.add(Pool(pool=name, slots=slots, include_deferred=False,
                         description="synthfactory GPU steps (rephrase, smoke, sweep) of all "
                                     "runs at once: one slot per GPU"))
    found = f"{gpus} GPU(s) found" if gpus else "no GPU found"
    return (f"synthfactory: created the Airflow pool {name} with {slots} slot(s) for the GPU "
            f"steps ({found}); resize it in Admin > Pools")


def stop(pid: int) -> bool:
    """SIGKILL ``pid`` and SIGTERM the steps it started (each in its own process group),
    SIGKILL what is left after 15 s. False when ``pid`` was already gone."""
    import psutil

    try:
        process = psutil.Process(pid)
        children = process.children(recursive=True)
        process.kill()
    except psutil.NoSuchProcess:
        return False
    own_group = os.getpgid(0)
    for child in children:
        try:
            group = os.getpgid(child.pid)
            if group == child.pid and group != own_group:  # a step's session: Spark, vLLM
                os.killpg(group, signal.SIGTERM)
            else:
                child.terminate()
        except (ProcessLookupError, psutil.NoSuchProcess):
            pass
    _, left = psutil.wait_procs([process, *children], timeout=15)
    for straggler in left:
        try:
            straggler.kill()
        except psutil.NoSuchProcess:
            pass
    return True


def interrupted(pid: int, logical_date: datetime, by: str, dag_id: str = DAG_ID) -> list[str]:
    from airflow.utils.session import create_session

    stopped = stop(pid)
    lines = []
    with create_session() as session:
        for run in active_test_runs(session, dag_id):
            if run.logical_date != logical_date:
                continue
            why = (f"{by} was interrupted; its process (pid {pid}) and the step it ran "
                   f"{'are stopped' if stopped else 'were gone'}")
            mark_failed(session, run, why)
            lines.append(f"synthfactory: marked run {run.run_id} of {dag_id} failed: {why}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("prepare", help="mark failed the runs no live process owns; create "
                                        "the gpu pool if missing")
    stopping = commands.add_parser("interrupted", help="stop an interrupted `make demo` and "
                                                       "mark its run failed")
    stopping.add_argument("--pid", type=int, required=True,
                          help="the demo's `airflow dags test` process")
    stopping.add_argument("--logical-date", type=datetime.fromisoformat, required=True,
                          help="its run's logical date, as given to `dags test`")
    stopping.add_argument("--by", default="make demo", help="who ran it, for the message")
    args = parser.parse_args(argv)
    if args.command == "prepare":
        lines = sweep()
        pool = ensure_gpu_pool()
        lines += [pool] if pool else []
    else:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not cut this short
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        lines = interrupted(args.pid, args.logical_date, args.by)
    for line in lines:
        say(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
