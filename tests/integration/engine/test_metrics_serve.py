"""A step run with SYNTHFACTORY_METRICS_PORT (what the kubernetes runner sets in a pod,
with the pod's `metrics` port) serves its metrics on /metrics while it runs: a rephrase
task and a join step, on 127.0.0.1 and a free port here (0.0.0.0 in a pod)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from synthfactory.contract import METRIC_LABEL_ENV
from synthfactory.contract.names import METRICS_ADDR_ENV, METRICS_PORT_ENV
from tests.support.ports import free_port
from tests.support.shards import write_prompt_shard

ROWS = 12
LABELS = {"dag_id": "synthetic_rephrase", "run_id": "manual__2026-12-04T19:00:00+00:00",
          "task": "shard.rephrase", "map_index": "2"}


def _scrape(port: int) -> dict[str, list]:
    """{sample name: [(labels, value)]} served on /metrics, {} while nothing answers."""
    try:
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2).read()
    except OSError:
        return {}
    samples: dict[str, list] = {}
    for family in text_string_to_metric_families(text.decode()):
        for s in family.samples:
            samples.setdefault(s.name, []).append((s.labels, s.value))
    return samples


def test_a_rephrase_task_serves_its_metrics_while_it_runs(tmp_path: Path):
    shard = write_prompt_shard(f"file://{tmp_path}/run", 0, ROWS)
    port = free_port()
    env = {**{k: v for k, v in os.environ.items() if k != "SYNTHFACTORY_PUSHGATEWAY"},
           METRICS_PORT_ENV: str(port), METRICS_ADDR_ENV: "127.0.0.1",
           "SYNTHFACTORY_RESULT_FILE": str(tmp_path / "result.json"),
           **{METRIC_LABEL_ENV[k]: v for k, v in LABELS.items()}}
    task = subprocess.Popen(
        [sys.executable, "-m", "synthfactory.cli", "rephrase", "--engine", "echo",
         "--echo-delay-s", "0.3", "--checkpoint-rows", "4", "--max-in-flight", "2",
         "--shard", shard], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True)
    scrapes = []
    while task.poll() is None:
        served = _scrape(port)
        if served:
            scrapes.append(served)
        time.sleep(0.1)
    output = task.stdout.read()
    assert task.returncode == 0, output[-3000:]
    assert scrapes, "nothing served /metrics while the task ran"
    last = scrapes[-1]
    for name in ("synthfactory_rephrase_rows_planned", "synthfactory_rephrase_rows_done",
                 "synthfactory_rephrase_output_tokens_total",
                 "synthfactory_rephrase_requests_in_flight",
                 "synthfactory_rephrase_tokens_per_second"):
        assert name in last, name
    (labels, planned), = last["synthfactory_rephrase_rows_planned"]
    assert planned == ROWS
    assert LABELS.items() <= labels.items()
    assert labels["model"] and labels["host"]
    done = [v for s in scrapes for _, v in s["synthfactory_rephrase_rows_done"]]
    assert any(0 < v < ROWS for v in done), done  # served while it ran, not only at its end
    assert f"serving /metrics on 127.0.0.1:{port}" in output
    # the step's end: the server stops with it
    assert _scrape(port) == {}


def test_without_the_port_nothing_is_served(tmp_path: Path):
    shard = write_prompt_shard(f"file://{tmp_path}/run", 0, 4)
    port = free_port()
    env = {**{k: v for k, v in os.environ.items()
              if k not in ("SYNTHFACTORY_PUSHGATEWAY", METRICS_PORT_ENV)},
           "SYNTHFACTORY_RESULT_FILE": str(tmp_path / "result.json")}
    task = subprocess.Popen(
        [sys.executable, "-m", "synthfactory.cli", "rephrase", "--engine", "echo",
         "--echo-delay-s", "0.3", "--shard", shard], env=env, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True)
    seen = []
    while task.poll() is None:
        seen.append(_scrape(port))
        time.sleep(0.2)
    output = task.stdout.read()
    assert task.returncode == 0, output[-3000:]
    assert not any(seen) and "serving /metrics" not in output
