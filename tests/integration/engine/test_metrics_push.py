"""A rephrase task's Prometheus metrics reach a real Pushgateway (Debian's
prometheus-pushgateway on 127.0.0.1): while the task runs, not only at its end, under its
Airflow labels, with the figures its commit holds; a Pushgateway that does not answer
costs one log line, not the task; write_report's step deletes the run's groups."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, Gauge, push_to_gateway
from prometheus_client.parser import text_string_to_metric_families

from synthfactory.contract import METRIC_LABEL_ENV
from tests.support.binaries import required_binary
from tests.support.ports import free_port
from tests.support.prometheus import MEMORY_ONLY
from tests.support.shards import write_prompt_shard

ROWS = 12
LABELS = {"dag_id": "synthetic_rephrase", "run_id": "manual__2026-12-04T10:00:00+00:00",
          "task": "shard.rephrase", "map_index": "1"}


@pytest.fixture(scope="module")
def pushgateway():
    binary = required_binary("prometheus-pushgateway", "prometheus-pushgateway")
    port = free_port()
    proc = subprocess.Popen([binary, f"--web.listen-address=127.0.0.1:{port}",
                             *MEMORY_ONLY],  # not Debian's shared persistence file
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            urllib.request.urlopen(f"{url}/-/ready", timeout=2)
            break
        except OSError:
            assert proc.poll() is None and time.monotonic() < deadline, "no Pushgateway"
            time.sleep(0.2)
    yield url
    proc.terminate()
    proc.wait(timeout=10)


def _series(gateway: str, name: str) -> dict[tuple, float]:
    """{labels: value} of one metric as the Pushgateway serves it to Prometheus."""
    text = urllib.request.urlopen(f"{gateway}/metrics", timeout=5).read().decode()
    return {tuple(sorted(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples
            if s.name == name}


def _ours(series: dict[tuple, float], **extra: str) -> list[float]:
    want = {**LABELS, **extra}
    return [v for labels, v in series.items() if want.items() <= dict(labels).items()]


def _rephrase(tmp_path: Path, gateway: str, delay_s: float) -> subprocess.Popen:
    shard = write_prompt_shard(f"file://{tmp_path}/run", 0, ROWS)
    env = {**os.environ, "SYNTHFACTORY_PUSHGATEWAY": gateway,
           "SYNTHFACTORY_PUSH_SECONDS": "0.3",
           "SYNTHFACTORY_RESULT_FILE": str(tmp_path / "result.json"),
           **{METRIC_LABEL_ENV[k]: v for k, v in LABELS.items()}}
    return subprocess.Popen(
        [sys.executable, "-m", "synthfactory.cli", "rephrase", "--engine", "echo",
         "--echo-delay-s", str(delay_s), "--checkpoint-rows", "4", "--max-in-flight", "2",
         "--shard", shard], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True)


def test_the_figures_are_pushed_while_the_task_runs_and_at_its_end(pushgateway, tmp_path):
    task = _rephrase(tmp_path, pushgateway, delay_s=0.4)
    seen_mid_run = []
    while task.poll() is None:
        done = _ours(_series(pushgateway, "synthfactory_rephrase_rows_done"))
        if done and 0 < done[0] < ROWS:
            seen_mid_run.append(done[0])
        time.sleep(0.1)
    output = task.stdout.read()
    assert task.returncode == 0, output[-3000:]
    assert seen_mid_run, "no push while the task ran"
    commit = json.loads(next((tmp_path / "run" / "generated").glob(
        "*/_COMMITTED.json")).read_text())
    assert _ours(_series(pushgateway, "synthfactory_rephrase_rows_done")) == [ROWS]
    assert _ours(_series(pushgateway, "synthfactory_rephrase_rows_planned")) == [ROWS]
    assert _ours(_series(pushgateway, "synthfactory_rephrase_output_tokens_total")) == [
        commit["output_tokens"]]
    # the grouping key the push went under: one group per task instance
    groups = _series(pushgateway, "push_time_seconds")
    assert _ours(groups, job="synthfactory")


def test_a_pushgateway_that_does_not_answer_costs_a_line_not_the_task(tmp_path):
    task = _rephrase(tmp_path, f"127.0.0.1:{free_port()}", delay_s=0.0)
    output, _ = task.communicate(timeout=120)
    assert task.returncode == 0, output[-3000:]
    assert output.count("did not take them") == 1, output[-3000:]


def _groups(gateway: str) -> list[dict]:
    with urllib.request.urlopen(f"{gateway}/api/v1/metrics", timeout=5) as response:
        return [g["labels"] for g in json.load(response)["data"]]


def test_write_reports_step_deletes_the_runs_groups_and_no_other(pushgateway, tmp_path):
    task = _rephrase(tmp_path, pushgateway, delay_s=0.0)
    output, _ = task.communicate(timeout=120)
    assert task.returncode == 0, output[-3000:]
    other = {**LABELS, "run_id": "scheduled__2026-12-03T00:00:00+00:00"}
    registry = CollectorRegistry()
    Gauge("synthfactory_rephrase_rows_done", "rows", registry=registry).set(1)
    push_to_gateway(pushgateway, job="synthfactory", registry=registry, grouping_key=other)
    assert any(g.get("run_id") == LABELS["run_id"] for g in _groups(pushgateway))

    report = subprocess.run(
        [sys.executable, "-m", "synthfactory.cli", "report", "--run", f"file://{tmp_path}/run",
         "--airflow-run-id", LABELS["run_id"]], capture_output=True, text=True, timeout=300,
        env={**os.environ, "SYNTHFACTORY_PUSHGATEWAY": pushgateway,
             "SYNTHFACTORY_RESULT_FILE": str(tmp_path / "report.json")})
    assert report.returncode == 0, report.stderr[-3000:]
    assert json.loads((tmp_path / "report.json").read_text())["pushgateway_groups_deleted"] == 1
    runs = [g.get("run_id") for g in _groups(pushgateway) if g.get("job") == "synthfactory"]
    assert LABELS["run_id"] not in runs and other["run_id"] in runs


def test_a_report_that_fails_still_deletes_the_runs_groups(pushgateway, tmp_path):
    """write_report failing itself (its folder unwritable: here a file where the report
    folder goes) still deletes the run's groups: the run is over either way.

    Break used: the deletion after the report is written (report/command.py without its
    ``finally``): the step fails before it and the group stays; this test fails."""
    registry = CollectorRegistry()
    Gauge("synthfactory_rephrase_rows_done", "rows", registry=registry).set(1)
    push_to_gateway(pushgateway, job="synthfactory", registry=registry, grouping_key=LABELS)
    run = tmp_path / "run"
    run.mkdir()
    (run / "report").write_text("not a folder")
    report = subprocess.run(
        [sys.executable, "-m", "synthfactory.cli", "report", "--run", f"file://{run}",
         "--airflow-run-id", LABELS["run_id"]], capture_output=True, text=True, timeout=300,
        env={**os.environ, "SYNTHFACTORY_PUSHGATEWAY": pushgateway,
             "SYNTHFACTORY_RESULT_FILE": str(tmp_path / "report.json")})
    assert report.returncode != 0, report.stdout[-3000:]
    runs = [g.get("run_id") for g in _groups(pushgateway) if g.get("job") == "synthfactory"]
    assert LABELS["run_id"] not in runs, report.stderr[-3000:]
