"""A real sweep on vLLM's CPU build with SmolLM2-135M-Instruct: two valid settings and
an invalid combination, the backed-off winner measured and written next to a copy of
the model, a rerun that measures nothing, and the rephrase worker picking the winner up."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from synthfactory import storage
from synthfactory.model import default_model_dir, is_ready
from synthfactory.rephrase import command as rephrase_command
from synthfactory.rephrase import engines
from synthfactory.rephrase.engine_args import tuned_engine_args
from tests.support.shards import write_real_prompt_shard

pytestmark = pytest.mark.skipif(
    not is_ready(default_model_dir()),
    reason=f"no model at {default_model_dir()}: run `synthfactory model prepare` (make setup)")

FAST, SLOW = {"max_num_seqs": 8}, {"max_num_seqs": 1}
INVALID = {"max_num_seqs": 64, "max_num_batched_tokens": 16}  # vLLM refuses tokens < seqs


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
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(result.read_text()), proc.stdout


def test_real_sweep_resume_and_the_winner_reaches_the_worker(tmp_path, monkeypatch):
    model = _model_copy(tmp_path)
    grid = tmp_path / "grid.json"
    grid.write_text(json.dumps([FAST, SLOW, INVALID]))
    out = f"file://{tmp_path}/sweep"
    argv = ["--shard", _shard(tmp_path), "--model", str(model), "--grid", str(grid),
            "--out", out, "--sample-rows", "6", "--max-new-tokens", "12",
            "--warmup-rows", "2", "--no-baseline", "--safety-margin", "0.25",
            "--gpu-hour-cost", "2.0"]
    summary, stdout = _sweep(argv, tmp_path / "first.json")

    # the invalid combination failed with vLLM's own reason; the others finished
    assert summary["measured"] == 4 and summary["failed"] == 1
    rows = {r["label"]: r for r in storage.read_table(f"{out}/results.parquet").to_pylist()}
    failed = rows["max_num_batched_tokens=16,max_num_seqs=64"]
    assert failed["status"] == "failed" and "max_num_batched_tokens" in failed["error"]
    for label in ("max_num_seqs=8", "max_num_seqs=1", "max_num_seqs=6"):
        ok = rows[label]
        assert ok["status"] == "ok", ok["error"]
        assert ok["output_tokens"] == 6 * 12  # ignore_eos: every row did the same work
        assert ok["output_tokens_per_s"] > 0 and ok["prompt_tokens_per_s"] > 0
        assert ok["startup_s"] > 0 and ok["peak_rss_mb"] > 500
        assert json.loads(ok["effective"])["max_num_seqs"] == int(label.split("=")[1])
    # 8 sequences at once beat one at a time by far on 6 rows
    assert summary["best"]["config"] == FAST
    assert rows["max_num_seqs=6"]["role"] == "backoff"
    assert "max_num_seqs=8" in stdout and "(backed off)" in stdout
    assert (tmp_path / "sweep/sweep.png").read_bytes()[:4] == b"\x89PNG"

    # the backed-off winner is next to the model, with its provenance
    assert tuned_engine_args(str(model)) == {"max_num_seqs": 6}
    provenance = json.loads((model / "synthfactory-engine.json").read_text())["provenance"]
    assert provenance["sweep"] == out and provenance["safety_margin"] == 0.25
    assert provenance["backed_off_measured"]["output_tokens_per_s"] > 0
    assert provenance["cost_per_billion_output_tokens"] > 0

    # a rerun measures nothing and comes to the same answer
    again, _ = _sweep(argv, tmp_path / "again.json")
    assert again["measured"] == 0 and again["skipped"] == 4 and again["failed"] == 1
    assert again["winner"]["engine_args"] == {"max_num_seqs": 6}

    # the rephrase worker (what the DAG's shard.rephrase runs) starts its engine with it,
    # under --engine-args: built-in defaults < tuned file < command line
    assert _worker_engine_args(tmp_path, model, None, monkeypatch)["max_num_seqs"] == 6
    overridden = _worker_engine_args(tmp_path, model, '{"max_num_seqs": 3}', monkeypatch)
    assert overridden["max_num_seqs"] == 3


def _worker_engine_args(tmp_path: Path, model: Path, engine_args: str | None,
                        monkeypatch) -> dict:
    seen: dict = {}

    class Recording(engines.EchoEngine):  # records what the worker asks vLLM for
        def __init__(self, model_dir, args, sampling):
            super().__init__()
            seen.update(args)

    parser = argparse.ArgumentParser()
    rephrase_command.add_arguments(parser)
    run = tmp_path / f"worker-{len(list(tmp_path.glob('worker-*')))}"
    argv = ["--shard", _shard(run), "--model", str(model), "--out", f"file://{run}"]
    if engine_args:
        argv += ["--engine-args", engine_args]
    monkeypatch.setattr(engines, "VllmEngine", Recording)
    rephrase_command.run(parser.parse_args(argv))
    return seen
