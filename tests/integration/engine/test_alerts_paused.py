"""The alerts' expressions hold against a rephrase worker stopped mid-shard by the fault hook
(synthfactory/faults.py), evaluated live through a real Prometheus (Debian's, on 127.0.0.1,
1 s scrapes) scraping the Pushgateway the worker pushes to (tests/support/prometheus.py, as
test_dashboard_queries.py sets them up). The healthy side (a whole-DAG run: no expression
holds) is tests/integration/airflow/test_run_metrics_live.py.

The worker is `synthfactory rephrase` as its task runs it (the echo engine, 3 rows in flight,
a part every 3 rows, 12 rows), paused with SYNTHFACTORY_PAUSE_AT=rephrase:part-written: its
first part is written and its part writer stuck there; the loop generated the next part's
3 rows meanwhile and waits to hand them over (rephrase/part_writer.py: one part in
flight), so 6 rows are done, 6 left, nothing in flight (a worker stuck writing its part:
its GPU idle); its pusher thread goes on pushing (a stuck worker, not a dead
one). Then it is SIGKILLed at the pause: its pushes stop (a worker OOM-killed, its node
lost).

Thresholds: the rules wait 15 minutes for a part (SynthfactoryShardStalled, ``> 900``) and
2 minutes for a push (SynthfactoryPushesStopped, ``> 120``). The test evaluates each rule's
expression text from deploy/prometheus/synthfactory-rules.yml with only that number
substituted (``> 3`` seconds, SHORTENED; the substitution asserts it finds it exactly once,
so a rule changed there fails here instead of going untested), nothing else of the
expression touched. The ``for:`` durations are promtool's (synthfactory-rules.test.yml).
No fixed sleeps: each check polls Prometheus until the expression holds, with a deadline.

While paused: the stall expression holds, the dashboard's "idle" query counts the task
(rows left, none in flight) and its "generating" one does not, the retries expression holds
(the task is on its third attempt), and the pushes-stopped one does not (pushes still come).
Killed: the pushes-stopped expression holds.

SynthfactoryRephraseSlow is held against a throttled worker instead (the echo engine's
delay: a GPU at a fraction of its rate), beside one that expects little: the tokens/s
gauge is the rate since the shard started as of the worker's last loop, so a paused worker
keeps its last figure and the stall alert is the one for a worker that stopped.
SynthfactoryWaveWaitingOnCapacity is the capacity sensor's, an Airflow task with no fault
hook: tests/integration/airflow/test_capacity_metrics_push.py evaluates it live against a
wave that does not fit.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable

import pytest

from synthfactory.contract import METRIC_LABEL_ENV
from tests.support.paths import ROOT
from tests.support.prometheus import (
    alert_rules,
    dashboard_targets,
    prometheus,
    pushgateway,
    query,
    substitute,
)
from tests.support.shards import write_prompt_shard

RULES = ROOT / "deploy" / "prometheus" / "synthfactory-rules.yml"
DASHBOARD = ROOT / "deploy" / "grafana" / "synthfactory.json"
LABELS = {"dag_id": "synthetic_rephrase", "run_id": "manual__2026-12-04T20:00:00+00:00",
          "task": "shard.rephrase", "map_index": "0"}
# the echo engine answers 3 requests a poll: 3 in flight, a part every 3 rows, so the
# worker pauses with its first part written and nothing in flight
ROWS, PART_ROWS = 12, 3
# {alert: (its threshold in the rule file, the one evaluated here)}: docstring
SHORTENED = {"SynthfactoryShardStalled": ("> 900", "> 3"),
             "SynthfactoryPushesStopped": ("> 120", "> 3")}
DEADLINE_S = 60


def _expression(alert: str) -> str:
    expr = alert_rules(RULES)[alert]
    if alert in SHORTENED:
        old, new = SHORTENED[alert]
        assert expr.count(old) == 1, f"{alert}: its threshold {old!r} is no longer in {expr!r}"
        expr = expr.replace(old, new)
    return expr


def _die_with_the_test() -> None:
    """In the worker, before it runs: SIGKILL when the test process dies (Linux's
    PR_SET_PDEATHSIG). A paused worker otherwise outlives an interrupted test, pushing on
    to its Pushgateway's port, which a later test's Pushgateway may get."""
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # 1: PR_SET_PDEATHSIG


def _of_run(result: list[dict]) -> list[dict]:
    return [s for s in result if s["metric"].get("run_id") == LABELS["run_id"]]


def _until(what: str, check: Callable[[], bool], seen: Callable[[], object] = lambda: "") -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not check():
        assert time.monotonic() < deadline, f"not within {DEADLINE_S} s: {what} {seen()}"
        time.sleep(0.5)


@pytest.fixture(scope="module")
def prom(tmp_path_factory):
    with pushgateway() as gateway, prometheus(
            gateway, tmp_path_factory.mktemp("prometheus"), interval_s=1) as url:
        yield gateway, url


def test_a_paused_worker_stalls_its_shard_and_idles_its_gpu_then_stops_pushing(prom, tmp_path):
    """Break used: SynthfactoryShardStalled's subtraction reversed in the rule file
    (``synthfactory_rephrase_last_checkpoint_timestamp_seconds - time() > 900``): it never
    holds, and this test fails on the paused worker."""
    gateway, url = prom
    shard = write_prompt_shard(f"file://{tmp_path}/run", 0, ROWS)
    marker = tmp_path / "paused"
    env = {**os.environ, "SYNTHFACTORY_PUSHGATEWAY": gateway,
           "SYNTHFACTORY_PUSH_SECONDS": "0.5", "SYNTHFACTORY_TRY_NUMBER": "3",
           "SYNTHFACTORY_PAUSE_AT": "rephrase:part-written",
           "SYNTHFACTORY_PAUSE_MARKER": str(marker),
           "SYNTHFACTORY_RESULT_FILE": str(tmp_path / "result.json"),
           **{METRIC_LABEL_ENV[k]: v for k, v in LABELS.items()}}
    worker = subprocess.Popen(
        [sys.executable, "-m", "synthfactory.cli", "rephrase", "--engine", "echo",
         "--max-attempts", "1",  # the gate rejects the echo's answers: no retries here
         "--checkpoint-rows", str(PART_ROWS), "--max-in-flight", str(PART_ROWS),
         "--shard", shard], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        text=True, preexec_fn=_die_with_the_test)
    try:
        def paused() -> bool:
            if worker.poll() is not None and not marker.exists():
                pytest.fail(f"the worker ended ({worker.returncode}) before its pause: "
                            f"{worker.stderr.read()[-3000:]}")
            return marker.exists()

        _until("the worker reaches its pause point", paused)
        # paused: its first part written, the next generated and waiting to be handed
        # over, 6 rows done, 6 left, nothing in flight
        done = f'synthfactory_rephrase_rows_done{{run_id="{LABELS["run_id"]}"}}'
        _until("Prometheus scrapes the paused worker's figures",
               lambda: [float(s["value"][1]) for s in query(url, done)] == [2 * PART_ROWS],
               lambda: query(url, done))
        _until("the stall expression holds",
               lambda: bool(_of_run(query(url, _expression("SynthfactoryShardStalled")))))
        assert _of_run(query(url, _expression("SynthfactoryRetriesClimbing")))
        panels = dict(dashboard_targets(DASHBOARD))
        values = {"dag_id": LABELS["dag_id"], "run_id": LABELS["run_id"]}
        idle = query(url, substitute(panels["GPUs generating versus idle B"], values))
        generating = query(url, substitute(panels["GPUs generating versus idle A"], values))
        assert [float(s["value"][1]) for s in idle] == [1], idle
        assert [float(s["value"][1]) for s in generating] == [0], generating
        # a paused worker still pushes (its pusher thread): not a dead one
        assert not _of_run(query(url, _expression("SynthfactoryPushesStopped")))

        worker.kill()  # SIGKILL: the echo engine runs in the worker's own process
        worker.wait(timeout=30)
        _until("the pushes-stopped expression holds once the worker is killed",
               lambda: bool(_of_run(query(url, _expression("SynthfactoryPushesStopped")))))
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait(timeout=30)


def test_a_throttled_worker_reads_as_slow_against_its_expected_rate(prom, tmp_path):
    """SynthfactoryRephraseSlow, live: two workers generate equally slowly (the echo
    engine's ``--echo-delay-s``: a GPU at a fraction of its rate, the case the alert is for;
    a pause is not, the stall alert covers that). The one told to expect far more
    (SYNTHFACTORY_EXPECTED_TOKENS_PER_S 1e6) holds the expression while rows are left; the
    one expecting little (0.001) does not. The rule's own text, nothing substituted; its
    ``for: 10m`` is promtool's. Break used: the comparison flipped to ``>`` in the rule
    file: the slow worker no longer holds it and the test fails."""
    gateway, url = prom
    runs = {"slow": ("manual__2026-12-04T21:00:00+00:00", "1000000"),
            "fine": ("manual__2026-12-04T21:30:00+00:00", "0.001")}
    workers = []
    try:
        for name, (run_id, expected) in runs.items():
            shard = write_prompt_shard(f"file://{tmp_path}/{name}", 0, 40)
            env = {**os.environ, "SYNTHFACTORY_PUSHGATEWAY": gateway,
                   "SYNTHFACTORY_PUSH_SECONDS": "0.5", "SYNTHFACTORY_EXPECTED_TOKENS_PER_S":
                   expected, "SYNTHFACTORY_RESULT_FILE": str(tmp_path / f"{name}.json"),
                   **{METRIC_LABEL_ENV[k]: v for k, v in {**LABELS, "run_id": run_id}.items()}}
            workers.append(subprocess.Popen(
                [sys.executable, "-m", "synthfactory.cli", "rephrase", "--engine", "echo",
                 "--max-attempts", "1",  # the gate rejects the echo's answers: no retries
                 "--echo-delay-s", "1", "--checkpoint-rows", "4", "--max-in-flight", "1",
                 "--shard", shard], env=env, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL, preexec_fn=_die_with_the_test))

        def holding() -> set[str]:
            return {s["metric"].get("run_id")
                    for s in query(url, _expression("SynthfactoryRephraseSlow"))}

        rate = 'synthfactory_rephrase_tokens_per_second{run_id="%s"}'
        _until("both workers' rates are scraped",
               lambda: all(query(url, rate % run_id) and
                           float(query(url, rate % run_id)[0]["value"][1]) > 0
                           for run_id, _ in runs.values()))
        _until("the slow-rate expression holds for the worker expecting more",
               lambda: runs["slow"][0] in holding(), holding)
        assert runs["fine"][0] not in holding()
        assert all(w.poll() is None for w in workers), "a worker ended before the check"
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
                worker.wait(timeout=30)
