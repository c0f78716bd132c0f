"""Stitch, validate, join and register push their rows and seconds to a real Pushgateway
(Debian's, on 127.0.0.1) under their task's labels: here `synthfactory join` as its task
runs it, the figures equal to its summary's; a failed step still pushes its end, with no
rows; nothing is pushed for a step without a Pushgateway."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from synthfactory.contract import METRIC_LABEL_ENV, TRY_NUMBER_ENV
from synthfactory.metrics import STEP_ROWS, StepMetrics, step_metrics
from tests.support.paths import ROOT
from tests.support.prometheus import matching, pushgateway, scraped
from tests.support.run_folders import build_run

LABELS = {"dag_id": "synthetic_rephrase", "run_id": "manual__2026-12-04T11:00:00+00:00",
          "task": "join_chunks", "map_index": "-1"}


@pytest.fixture(scope="module")
def gateway():
    with pushgateway() as url:
        yield url


def _step(tmp_path, gateway: str, *argv: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "SYNTHFACTORY_PUSHGATEWAY": gateway, TRY_NUMBER_ENV: "2",
           "SYNTHFACTORY_RESULT_FILE": str(tmp_path / "result.json"),
           **{METRIC_LABEL_ENV[k]: v for k, v in LABELS.items()}}
    return subprocess.run([sys.executable, "-m", "synthfactory.cli", *argv], env=env,
                          capture_output=True, text=True, timeout=300)


def test_join_pushes_its_rows_and_seconds_under_its_task(gateway, tmp_path):
    run = build_run(f"file://{tmp_path}/data", shard_rows=(6, 5), quarantined=1, rejected=2,
                    join=False)
    done = _step(tmp_path, gateway, "join", "--run", run.run_url)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((tmp_path / "result.json").read_text())
    ours = {**LABELS, "step": "join"}
    assert matching(scraped(gateway, "synthfactory_step_rows_in"), **ours) == [
        summary["generated"]]
    assert matching(scraped(gateway, "synthfactory_step_rows_out"), **ours) == [
        summary["joined"]]
    assert matching(scraped(gateway, "synthfactory_step_rows_rejected"), **ours) == [
        summary["rejected"]] and summary["rejected"] > 0
    assert matching(scraped(gateway, "synthfactory_step_running"), **ours) == [0]
    (seconds,) = matching(scraped(gateway, "synthfactory_step_seconds"), **ours)
    assert 0 < seconds < 300
    assert matching(scraped(gateway, "synthfactory_task_try_number"), **ours) == [2]
    # the group: job=synthfactory and the task's labels, as rephrase's
    assert matching(scraped(gateway, "push_time_seconds"), job="synthfactory", **LABELS)


def test_a_failed_step_pushes_its_end_and_no_rows(gateway, tmp_path):
    labels = {**LABELS, "task": "register_catalog", "step": "register"}
    env_labels = {**LABELS, "task": "register_catalog"}
    done = subprocess.run(
        [sys.executable, "-m", "synthfactory.cli", "register", "--run",
         f"file://{tmp_path}/nowhere/p/2024-01-01", "--table", "synthetic.rephrased"],
        env={**os.environ, "SYNTHFACTORY_PUSHGATEWAY": gateway,
             **{METRIC_LABEL_ENV[k]: v for k, v in env_labels.items()}},
        capture_output=True, text=True, timeout=300)
    assert done.returncode != 0
    assert matching(scraped(gateway, "synthfactory_step_running"), **labels) == [0]
    assert matching(scraped(gateway, "synthfactory_step_seconds"), **labels)
    assert matching(scraped(gateway, "synthfactory_step_rows_out"), **labels) == []


def test_no_pushgateway_no_metrics_and_rephrase_is_not_a_step():
    assert step_metrics("join", {}) is None
    assert step_metrics("rephrase", {"SYNTHFACTORY_PUSHGATEWAY": "127.0.0.1:1"}) is None


def test_the_rows_come_from_the_summary_keys_each_step_returns():
    metrics = StepMetrics("validate", {})
    metrics.finished({"rows": 10, "usable": 7, "rejected": 3, "flags": {}})
    metrics.close()
    values = {s.name: s.value for m in metrics.registry.collect() for s in m.samples}
    assert (values["synthfactory_step_rows_in"], values["synthfactory_step_rows_out"],
            values["synthfactory_step_rows_rejected"]) == (10, 7, 3)
    assert values["synthfactory_step_running"] == 0
    # every key STEP_ROWS reads is one its step's summary has (its source says so)
    sources = {"stitch": "synthfactory/stitch/command.py", "validate": "synthfactory/validate.py",
               "join": "synthfactory/contract/shapes.py",
               "register": "synthfactory/catalog/command.py"}
    for step, keys in STEP_ROWS.items():
        text = (ROOT / sources[step]).read_text()
        for key in keys.values():
            assert f'"{key}":' in text or f"    {key}: int" in text, (step, key)
