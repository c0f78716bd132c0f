"""Where a rephrase task's time goes: its engine's start-up, its generation, and the
share of its wall time spent generating, in the task's summary, in each commit and
in the run report, and from there in ``synthfactory estimate --run``."""

from __future__ import annotations

import json
import time

import pytest

from synthfactory import cli, storage
from synthfactory.contract import RunFolder, paths
from synthfactory.rephrase.engine_spec import EngineSpec
from synthfactory.rephrase.engines import SlowEcho
from synthfactory.report_figures import build_report, shard_figures
from tests.support.shards import write_prompt_shard

STARTUP_S = 0.4  # the slow-starting engine's start-up
POLL_S = 0.02  # and each of its polls, so that generating takes time too


@pytest.fixture
def slow_start(monkeypatch):
    """``--engine echo`` that takes STARTUP_S to start, like a model being loaded."""

    def build(self):
        time.sleep(STARTUP_S)
        return SlowEcho(POLL_S)

    monkeypatch.setattr(EngineSpec, "build", build)


def _rephrase(capsys, *shards: str) -> dict:
    argv = ["rephrase", *[a for s in shards for a in ("--shard", s)], "--engine", "echo",
            "--checkpoint-rows", "4"]
    assert cli.main(argv) == 0
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def _adds_up(figures: dict) -> None:
    """Start-up and generation are parts of the wall time, and the fraction is theirs
    (of the figures as shown, to its four decimals)."""
    assert figures["startup_s"] + figures["generation_s"] <= figures["wall_s"]
    assert figures["generating_fraction"] == pytest.approx(
        figures["generation_s"] / figures["wall_s"], abs=1e-4)


def _shards(tmp_path, count: int = 2) -> tuple[str, list[str]]:
    run_url = f"file://{tmp_path}/run"
    return run_url, [write_prompt_shard(run_url, i, rows=8) for i in range(count)]


def test_the_first_shard_pays_the_engine_start_up_and_the_task_reports_it(
        tmp_path, capsys, slow_start):
    run_url, shards = _shards(tmp_path)
    summary = _rephrase(capsys, *shards)
    first, second = summary["shards"]
    assert first["startup_s"] >= STARTUP_S
    assert second["startup_s"] < STARTUP_S / 10  # the task's engine was running
    assert summary["startup_s"] == pytest.approx(first["startup_s"] + second["startup_s"],
                                                 abs=1e-3)
    # the start-up is not generation: 8 rows x 4 polls of POLL_S each, not 0.4 s more
    assert first["generation_s"] < first["wall_s"] - STARTUP_S
    for figures in (summary, first, second):
        _adds_up(figures)
    commits = [RunFolder(run_url, storage.read_json_or_none).commit(f"shard-0000{i}")
               for i in range(2)]
    assert [c["timings"]["startup_s"] for c in commits] == [first["startup_s"],
                                                             second["startup_s"]]
    for commit in commits:
        _adds_up(commit["timings"])


def test_the_echo_engine_starts_at_once(tmp_path, capsys):
    _, shards = _shards(tmp_path, count=1)
    summary = _rephrase(capsys, *shards)
    assert summary["startup_s"] < 0.05
    _adds_up(summary)


def test_a_rerun_of_committed_shards_reports_no_start_up_or_generation_of_its_own(
        tmp_path, capsys, slow_start):
    _, shards = _shards(tmp_path)
    _rephrase(capsys, *shards)
    again = _rephrase(capsys, *shards)
    assert [s["status"] for s in again["shards"]] == ["already committed"] * 2
    assert again["startup_s"] == 0 and again["generation_s"] == 0
    assert again["generating_fraction"] == 0 and again["tokens_per_s"] is None


def _report(run_url: str, shards: list[str]) -> dict:
    """report.json as `synthfactory report` builds it from the run's JSON files."""
    entries = [{"name": f"shard-0000{i}", "url": url, "rows": 8, "tokens": 100}
               for i, url in enumerate(shards)]
    storage.write_json(storage.join(run_url, paths.SHARDS_JSON), {"shards": entries})
    files = RunFolder(run_url, storage.read_json_or_none).read()
    report = build_report(run_url, files, [shard_figures(s) for s in files.shards],
                          gpu_hour_usd=2.5)
    storage.write_json(storage.join(run_url, paths.REPORT_JSON), report)
    return report


def test_the_report_sums_start_up_over_the_engines_started_and_estimate_uses_it(
        tmp_path, capsys, slow_start):
    run_url, shards = _shards(tmp_path)
    summary = _rephrase(capsys, *shards)
    report = _report(run_url, shards)
    tokens = report["tokens"]
    assert tokens["engine_starts"] == 1  # one task, one engine, two shards
    assert tokens["startup_s"] == summary["shards"][0]["startup_s"]
    assert [s["startup_s"] for s in report["shards"]] == [
        s["startup_s"] for s in summary["shards"]]
    _adds_up(tokens)

    assert cli.main(["estimate", "--tokens", "1e6", "--run", run_url, "--gpus", "1",
                     "--json"]) == 0
    estimate = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert estimate["startup_s_per_task"] == tokens["startup_s"]
    assert estimate["measured_generating_fraction"] == tokens["generating_fraction"]
    assert estimate["tokens_per_s_per_gpu"] == pytest.approx(
        tokens["output"] / tokens["device_seconds"], rel=1e-3)
