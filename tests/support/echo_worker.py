"""A worker console script for scheduler tests: the real `synthfactory`, except that
`rephrase` runs the echo engine (the engine's deterministic stand-in) instead of vLLM,
after `seconds` of sleep, like a GPU task at work.

Under a real scheduler, several days' runs then cost Spark, pyarrow and torch start-ups,
not several vLLM engines on two cores, while each rephrase still lasts long enough for
the scheduler's records to show which days' waves overlapped. It is given to the DAG as
SYNTHFACTORY_WORKER_BIN, the local runner's setting for the worker's console script.
"""

from __future__ import annotations

from pathlib import Path

from tests.support.paths import WORKER

SCRIPT = """#!/usr/bin/env bash
# tests/support/echo_worker.py: rephrase with the echo engine, after {seconds} s of sleep
if [ "$1" = rephrase ]; then
  args=() prev= engine=
  for arg in "$@"; do
    if [ "$prev" = --engine ]; then arg=echo; engine=1; fi
    args+=("$arg"); prev=$arg
  done
  [ -n "$engine" ] || args+=(--engine echo)
  sleep {seconds}
  exec {worker} "${{args[@]}}"
fi
exec {worker} "$@"
"""


def echo_worker(path: Path, seconds: float) -> Path:
    path.write_text(SCRIPT.format(seconds=seconds, worker=WORKER))
    path.chmod(0o755)
    return path
