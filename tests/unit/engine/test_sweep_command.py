"""The sweep command with its trial process replaced by a model of one (no vLLM):
failures recorded without stopping the sweep, resume, the back-off measured, results
and winner where the docs say."""

from __future__ import annotations

import argparse
import json

import pytest

from synthfactory import storage
from synthfactory.errors import SynthfactoryError
from synthfactory.rephrase.engine_args import tuned_engine_args
from synthfactory.sweep import command
from tests.support.shards import write_prompt_shard


def _fake_trial(calls: list, later: dict | None = None):
    """Throughput grows with max_num_seqs; a token budget below it fails as vLLM does.
    ``later`` maps a max_num_seqs to the tokens/s it shows after its first measurement
    (a lucky first figure that the rematch does not confirm)."""

    def run_trial(spec, workdir, timeout_s):
        config = spec["config"]
        seqs = config.get("max_num_seqs", 16)
        again = config in calls
        calls.append(config)
        (workdir / "trial.log").write_text(f"trial of {config}\n")
        if config.get("max_num_batched_tokens", 10**9) < seqs:
            return {"status": "failed", "error_kind": "error", "returncode": 1,
                    "error": "ValidationError: max_num_batched_tokens must be >= max_num_seqs"}
        tps = (later or {}).get(seqs, 10.0 * seqs) if again else 10.0 * seqs
        return {"status": "ok", "device": "cpu", "startup_s": 1.0, "warmup_s": 0.1,
                "generation_s": 2.0, "requests": len(spec["rows"]), "prompt_tokens": 100,
                "output_tokens": int(tps * 2), "output_tokens_per_s": tps,
                "prompt_tokens_per_s": 50.0, "peak_rss_mb": 900.0 + seqs, "returncode": 0}

    return run_trial


def _args(tmp_path, grid, **over):
    parser = argparse.ArgumentParser()
    command.add_arguments(parser)
    argv = ["--shard", str(tmp_path / "run/prompts/shard-00000.parquet"),
            "--model", str(tmp_path / "model"), "--grid", json.dumps(grid),
            "--out", str(tmp_path / "sweep"), "--sample-rows", "4",
            "--safety-margin", "0.25", "--gpu-hour-cost", "3.6"]
    for name, value in over.items():
        argv += [f"--{name.replace('_', '-')}"] + ([] if value is None else [str(value)])
    return parser.parse_args(argv)


@pytest.fixture
def sweep_env(tmp_path, monkeypatch):
    write_prompt_shard(f"file://{tmp_path}/run", 0, rows=10)
    (tmp_path / "model").mkdir()
    calls: list = []
    monkeypatch.setattr(command, "run_trial", _fake_trial(calls))
    return tmp_path, calls


GRID = [{"max_num_seqs": 32}, {"max_num_seqs": 64, "max_num_batched_tokens": 8},
        {"max_num_seqs": 8}]


def test_sweep_records_failures_backs_off_the_winner_and_writes_it(sweep_env, capsys):
    tmp_path, calls = sweep_env
    summary = command.run(_args(tmp_path, GRID))
    # baseline first, the failure did not stop the rest, the backed-off winner measured,
    # then the defaults and that winner again in alternating rounds
    backed = {"max_num_seqs": 24}
    assert calls == [{}, *GRID, backed] + [{}, backed] * 3
    assert summary["failed"] == 1 and summary["measured"] == 5
    assert summary["best"]["config"] == {"max_num_seqs": 32}
    # gain: the backed-off winner's median (240) over the defaults' (160) in the rematch
    assert summary["baseline_tokens_per_s"] == 160.0 and summary["gain"] == 1.5
    assert summary["rematch"]["default_tokens_per_s"] == [160.0] * 3
    # 3.6 an hour at 240 tokens/s (the backed-off figure): 3.6 / (240 * 3600) * 1e9
    assert summary["winner"]["cost_per_billion_output_tokens"] == pytest.approx(4166.67)
    assert tuned_engine_args(str(tmp_path / "model")) == {"max_num_seqs": 24}
    tuned = json.loads((tmp_path / "model/synthfactory-engine.json").read_text())
    assert tuned["provenance"]["sweep"] == f"file://{tmp_path}/sweep"
    assert tuned["provenance"]["fastest_config"] == {"max_num_seqs": 32}
    assert tuned["provenance"]["backed_off_measured"]["output_tokens_per_s"] == 240.0

    table = storage.read_table(f"file://{tmp_path}/sweep/results.parquet").to_pylist()
    assert [r["status"] for r in table] == ["ok", "ok", "failed", "ok", "ok"]
    assert "max_num_batched_tokens" in table[2]["error"]
    assert [r["role"] for r in table] == ["baseline", "grid", "grid", "grid", "backoff"]
    assert (tmp_path / "sweep/sweep.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (tmp_path / "sweep/logs").is_dir()
    assert tuned["provenance"]["rematch"]["gain"] == 1.5
    out = capsys.readouterr().out
    assert "* max_num_seqs=32" in out and "max_num_seqs=24 (backed off)" in out
    assert "rematch, 3 alternating rounds" in out and "spread 160.0..160.0" in out
    assert "gain 1.50" in out


def test_a_winner_the_rematch_measures_slower_than_the_defaults_has_gain_below_one(
        tmp_path, monkeypatch):
    write_prompt_shard(f"file://{tmp_path}/run", 0, rows=10)
    (tmp_path / "model").mkdir()
    calls: list = []
    # max_num_seqs=24 measured 240 tokens/s once, then 100 every round of the rematch
    monkeypatch.setattr(command, "run_trial", _fake_trial(calls, later={24: 100.0}))
    summary = command.run(_args(tmp_path, GRID))
    assert summary["best"]["config"] == {"max_num_seqs": 32}  # the search's pick
    assert summary["gain"] == pytest.approx(100 / 160, abs=1e-3) and summary["gain"] < 1
    assert summary["rematch"]["winner_tokens_per_s"] == [100.0] * 3
    # a winner slower than the defaults is not written next to the model
    assert not (tmp_path / "model/synthfactory-engine.json").exists()
    assert "slower than the defaults" in summary["winner"]["not_applied"]
    winner = json.loads((tmp_path / "sweep/winner.json").read_text())
    assert winner["applied_to"] is None and winner["rematch"]["gain"] < 1


def test_rematch_rounds_off_or_at_least_three(sweep_env):
    tmp_path, calls = sweep_env
    with pytest.raises(SynthfactoryError, match="--rematch-rounds 2: use 0"):
        command.run(_args(tmp_path, GRID, rematch_rounds=2))
    summary = command.run(_args(tmp_path, GRID, rematch_rounds=0))
    assert calls == [{}, *GRID, {"max_num_seqs": 24}]  # no rematch
    assert summary["gain"] is None and summary["rematch"] is None


def test_rerun_skips_what_is_measured_and_retry_failed_reruns_failures(sweep_env):
    tmp_path, calls = sweep_env
    first = command.run(_args(tmp_path, GRID))
    calls.clear()
    again = command.run(_args(tmp_path, GRID + [{"max_num_seqs": 4}]))
    assert calls == [{"max_num_seqs": 4}]  # only the new one ran; the rematch is reused
    assert again["gain"] == first["gain"] == 1.5
    assert again["skipped"] == 5 and again["failed"] == 1
    assert again["winner"]["engine_args"] == first["winner"]["engine_args"]
    calls.clear()
    command.run(_args(tmp_path, GRID, retry_failed=None))
    assert calls == [{"max_num_seqs": 64, "max_num_batched_tokens": 8}]


def test_no_apply_leaves_the_model_folder_untouched(sweep_env):
    tmp_path, _ = sweep_env
    summary = command.run(_args(tmp_path, GRID, no_apply=None))
    assert not (tmp_path / "model/synthfactory-engine.json").exists()
    assert summary["winner"]["applied_to"] is None
    winner = json.loads((tmp_path / "sweep/winner.json").read_text())
    assert winner["engine_args"] == {"max_num_seqs": 24}


def test_resuming_into_a_sweep_of_another_sample_is_refused(sweep_env):
    tmp_path, _ = sweep_env
    command.run(_args(tmp_path, GRID, no_apply=None))
    with pytest.raises(SynthfactoryError, match="another sample.*max_tokens"):
        command.run(_args(tmp_path, GRID, max_new_tokens=64))


def test_when_every_configuration_fails_the_sweep_fails_after_reporting(sweep_env):
    tmp_path, _ = sweep_env
    bad = [{"max_num_seqs": 64, "max_num_batched_tokens": 8}]
    with pytest.raises(SynthfactoryError, match="all 1 configurations failed"):
        command.run(_args(tmp_path, bad, no_baseline=None))
    assert storage.read_table(f"file://{tmp_path}/sweep/results.parquet").num_rows == 1
    assert not (tmp_path / "model/synthfactory-engine.json").exists()


def test_sample_rows_spread_over_the_shard():
    assert command.sample_rows(10, 4) == [0, 2, 5, 7]
    assert command.sample_rows(3, 8) == [0, 1, 2]


def test_apply_to_a_model_that_is_not_a_folder_is_refused_before_measuring(sweep_env):
    tmp_path, calls = sweep_env
    with pytest.raises(SynthfactoryError, match="not a local folder"):
        command.run(_args(tmp_path, GRID, model="HuggingFaceTB/SmolLM2-135M-Instruct"))
    assert calls == []
