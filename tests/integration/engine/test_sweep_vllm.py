"""A real sweep on vLLM's CPU build with SmolLM2-135M-Instruct: a valid setting and an
invalid one, backed off and measured in rounds that alternate with the defaults, the
decision written next to a copy of the model with the figures behind it, a rerun that
measures nothing, and the rephrase worker picking it up.

Each measured trial is a fresh engine (about a minute here beside the other session), so
one valid candidate: successive halving among several (who leaves after which round) is
tested on the command with measured figures given (tests/unit/engine/test_sweep_command.py,
test_sweep_halving.py); what only vLLM can show is here."""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from synthfactory import hardware, storage
from synthfactory.cli import build_parser
from synthfactory.model import default_model_dir, is_ready
from synthfactory.rephrase import command as rephrase_command
from synthfactory.rephrase import engines
from synthfactory.rephrase.engine_args import tuned_engine_args
from synthfactory.rephrase.engine_choice import choose
from tests.support.shards import write_real_prompt_shard

pytestmark = pytest.mark.skipif(
    not is_ready(default_model_dir()),
    reason=f"no model at {default_model_dir()}: run `synthfactory model prepare` (make setup)")

FAST = {"max_num_seqs": 8}
INVALID = {"max_model_len": 100000}  # vLLM refuses more than the model's 8192 positions


def _model_copy(tmp_path: Path) -> Path:
    """The sweep writes next to the model: give it a folder of its own (weights linked)."""
    source, copy = default_model_dir(), tmp_path / "model"
    copy.mkdir()
    for item in source.iterdir():
        if item.name == "model.safetensors":
            (copy / item.name).symlink_to(item)
        elif item.is_file() and item.name != "synthfactory-engine.json":
            shutil.copy(item, copy / item.name)
    return copy


def _shard(tmp_path: Path) -> str:
    return write_real_prompt_shard(tmp_path / "run", rows=12, max_new_tokens=12)


def _sweep(argv: list[str], result: Path) -> tuple[dict, str]:
    env = {**os.environ, "SYNTHFACTORY_RESULT_FILE": str(result)}
    proc = subprocess.run([sys.executable, "-m", "synthfactory.cli", "sweep", *argv], env=env,
                          capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(result.read_text()), proc.stdout


def test_real_sweep_resume_and_the_decision_reaches_the_worker(tmp_path, monkeypatch):
    model = _model_copy(tmp_path)
    grid = tmp_path / "grid.json"
    grid.write_text(json.dumps([FAST, INVALID]))
    out = f"file://{tmp_path}/sweep"
    argv = ["--shard", _shard(tmp_path), "--model", str(model), "--grid", str(grid),
            "--out", out, "--sample-rows", "6", "--max-new-tokens", "12",
            "--warmup-rows", "2", "--safety-margin", "0.25", "--gpu-hour-usd", "2.0"]
    summary, stdout = _sweep(argv, tmp_path / "first.json")

    # round 1: defaults, 6, invalid; rounds 2 and 3: defaults, 6 (the finalist)
    assert summary["trials"] == summary["measured"] == 7
    assert summary["configs"] == 3 and summary["failed"] == 1
    rows = storage.read_table(f"{out}/results.parquet").to_pylist()
    failed = [r for r in rows if r["status"] != "ok"]
    assert [r["label"] for r in failed] == ["max_model_len=100000"]
    assert "max_model_len" in failed[0]["error"]
    for row in (r for r in rows if r["status"] == "ok"):
        assert row["output_tokens"] == 6 * 12  # ignore_eos: every trial did the same work
        assert row["output_tokens_per_s"] > 0 and row["startup_s"] > 0
        assert row["peak_rss_mb"] > 500
        config = json.loads(row["config"])
        if "max_num_seqs" in config:  # what vLLM ran with, not only what was asked
            assert json.loads(row["effective"])["max_num_seqs"] == config["max_num_seqs"]
    # only the backed-off entry was measured: 8 -> 6
    assert {r["label"] for r in rows} == {"defaults", "max_num_seqs=6", "max_model_len=100000"}
    by_round = {(r["label"], r["round"]): r["output_tokens_per_s"] for r in rows}
    decision = summary["decision"]
    finalist = decision["finalist_label"]
    assert finalist == "max_num_seqs=6"
    assert [r["round"] for r in rows if r["label"] == finalist] == [1, 2, 3]
    assert decision["rounds"] == 3
    assert decision["finalist"]["median"] == round(statistics.median(
        by_round[finalist, n] for n in (1, 2, 3)), 2)
    assert decision["defaults"]["tokens_per_s"] == [by_round["defaults", n] for n in (1, 2, 3)]
    assert decision["finalist"]["tokens_per_s"] == [by_round[finalist, n] for n in (1, 2, 3)]
    # the finalist replaces the defaults only by more than the rounds' spread
    won = decision["winner"] == "finalist"
    assert won == (decision["margin"] > decision["spread"])
    assert decision["line"] in stdout and "(backed off)" in stdout
    assert (tmp_path / "sweep/sweep.png").read_bytes()[:4] == b"\x89PNG"

    # the decision is next to the model, with the figures behind it
    applied = decision["finalist_config"] if won else {}
    assert decision["applied_config"] == applied
    assert tuned_engine_args(str(model)) == applied
    document = json.loads((model / "synthfactory-engine.json").read_text())
    provenance = document["provenance"]
    # measured here: the worker applies it only on hardware like this (ADR 0130)
    assert document["hardware"] == {"device": "cpu", "isa": hardware.isa()}
    assert provenance["sweep"] == out and provenance["safety_margin"] == 0.25
    assert provenance["decision"] == decision
    assert provenance["measured"]["output_tokens_per_s"] == decision["applied"]["median"]
    assert provenance["cost_per_billion_output_tokens"] > 0

    # a rerun measures nothing and comes to the same answer
    again, _ = _sweep(argv, tmp_path / "again.json")
    assert again["measured"] == 0 and again["skipped"] == 7 and again["failed"] == 1
    assert again["decision"] == decision

    # the rephrase worker (what the DAG's shard.rephrase runs) starts its engine with it,
    # under --engine-args: built-in defaults < tuned file < command line
    worker = _worker_engine_args(tmp_path, model, None, monkeypatch)
    assert worker.get("max_num_seqs") == applied.get("max_num_seqs")
    overridden = _worker_engine_args(tmp_path, model, '{"max_num_seqs": 3}', monkeypatch)
    assert overridden["max_num_seqs"] == 3


def _worker_engine_args(tmp_path: Path, model: Path, engine_args: str | None,
                        monkeypatch) -> dict:
    seen: dict = {}

    class Recording(engines.EchoEngine):  # records what the worker would ask vLLM for
        def __init__(self, model_dir, args, sampling, tuned=None, window=None):
            super().__init__()
            seen.update(choose(hardware.cpu_hardware(), args, tuned, model_dir, window).args)

    parser = build_parser("rephrase")
    run = tmp_path / f"worker-{len(list(tmp_path.glob('worker-*')))}"
    # --replay off: every call rephrases the same prompt, and a replayed one starts no
    # engine (docs/adr/0150; max_num_seqs changes the speed, not the outputs)
    argv = ["--shard", _shard(run), "--model", str(model), "--run", f"file://{run}",
            "--replay", "off"]
    if engine_args:
        argv += ["--engine-args", engine_args]
    monkeypatch.setattr(engines, "VllmEngine", Recording)
    rephrase_command.run(parser.parse_args(argv))
    return seen
