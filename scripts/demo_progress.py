"""What `make demo` prints while its DAG runs: every line of `airflow dags test` goes to
the log file, and the terminal gets one line as each task starts and ends and the
rephrase progress (rows, tokens/s, ETA) at most every ``--every`` seconds a shard.

    airflow dags test ... 2>&1 | python scripts/demo_progress.py var/demo-dag.log

Standard library only: it runs with whichever Python is at hand. `dags test` runs the
tasks one after the other, so a failure logged between a task's start and its end is
that task's.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections.abc import Callable, Iterable
from typing import TextIO

START = re.compile(r"\[DAG TEST\] starting task_id=(\S+) map_index=(-?\d+)")
END = re.compile(r"\[DAG TEST\] end task task_id=(\S+) map_index=(-?\d+)")
FAILED = re.compile(r"Task failed with exception|Task exited|\[DAG TEST\] Error running task")
# the worker's own progress line (synthfactory/rephrase/progress.py), wherever the log
# format puts it
PROGRESS = re.compile(r"(shard-\d+: \d+/\d+ rows, \d+ output tokens/s, ETA \d+s)")


def _task(match: re.Match) -> str:
    task, index = match.group(1), int(match.group(2))
    return task if index < 0 else f"{task}[{index}]"


def follow(lines: Iterable[str], log: TextIO, out: TextIO, every: float = 10.0,
           clock: Callable[[], float] = time.monotonic) -> int:
    """Copy ``lines`` to ``log``; print the tasks' starts and ends and the progress
    lines (one a shard every ``every`` seconds) to ``out``. Returns the failed tasks."""
    started: dict[str, float] = {}
    failed_now = False
    failures = 0
    last_shown: dict[str, float] = {}
    for line in lines:
        log.write(line)
        if match := START.search(line):
            task = _task(match)
            started[task], failed_now = clock(), False
            print(f"{time.strftime('%H:%M:%S')}  {task} started", file=out, flush=True)
        elif match := END.search(line):
            task = _task(match)
            took = clock() - started.pop(task, clock())
            verdict = "FAILED" if failed_now else "done"
            failures += failed_now
            print(f"{time.strftime('%H:%M:%S')}  {task} {verdict} in {took:.0f} s",
                  file=out, flush=True)
        elif FAILED.search(line):
            failed_now = True
        elif match := PROGRESS.search(line):
            shard = match.group(1).split(":")[0]
            now = clock()
            if now - last_shown.get(shard, float("-inf")) >= every:
                last_shown[shard] = now
                print(f"{time.strftime('%H:%M:%S')}    {match.group(1)}", file=out, flush=True)
    log.flush()
    return failures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("log", help="the file every line goes to")
    parser.add_argument("--every", type=float, default=10.0,
                        help="seconds between two progress lines of one shard")
    args = parser.parse_args()
    with open(args.log, "w", encoding="utf-8") as log:
        follow(sys.stdin, log, sys.stdout, args.every)


if __name__ == "__main__":
    main()
