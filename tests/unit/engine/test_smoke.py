"""smoke: a tiny model trains on synthetic and real tokens, and a bad run fails loudly."""

from __future__ import annotations

import json

import pytest

from synthfactory.cli import main
from synthfactory.errors import SynthfactoryError
from synthfactory.training.smoke import SmokeConfig, expected_loss_range
from tests.support.training import make_run, make_tokenizer, write_spec

SPEC = {"type": "buckets", "buckets": [{"min_len": 2, "max_len": 20, "weight": 3},
                                       {"min_len": 40, "max_len": 64, "weight": 1}]}
TINY = ["--seq-len", "64", "--batch-size", "2", "--vocab-size", "256", "--d-model", "32",
        "--device", "cpu"]


def _run(capsys, *argv) -> tuple[int, dict | None, str]:
    rc = main(["smoke", *argv])
    out, err = capsys.readouterr()
    return rc, (json.loads(out.strip().splitlines()[-1]) if rc == 0 else None), err


def test_smoke_on_random_tokens_passes_and_reports(tmp_path, capsys):
    spec = write_spec(tmp_path, SPEC)
    rc, summary, err = _run(capsys, "--spec", spec, "--steps", "6", *TINY)
    assert rc == 0, err
    low, high = summary["loss_range"]
    assert summary["status"] == "ok" and summary["device"] == "cpu"
    assert low <= summary["loss_last"] <= high
    assert abs(summary["loss_first"] - summary["loss_expected"]) < 0.5  # ~ln(256) at init
    assert summary["tokens_per_s"] > 0 and summary["tokens_trained"] > 0
    assert 0.0 <= summary["padding_waste_fraction"] < 0.5
    assert summary["dropped"] == 0 and summary["documents"] > 0


def test_sabotaged_learning_rate_fails_with_its_message(tmp_path, capsys):
    spec = write_spec(tmp_path, SPEC)
    rc, _, err = _run(capsys, "--spec", spec, "--steps", "6", "--lr", "1000", *TINY)
    assert rc == 3  # the same seed diverges the same way: not retried
    assert "smoke step" in err and ("left the expected range" in err or "not finite" in err)
    assert "lr=1000.0" in err


def test_from_run_uses_empirical_lengths_and_counts_drops(tmp_path, capsys):
    run = make_run(tmp_path, [10, 30, 50, 200, 12, 33])
    rc, summary, err = _run(capsys, "--run", run, "--steps", "3", *TINY)
    assert rc == 0, err
    assert summary["source"] == run and summary["tokens"] == "random"
    assert summary["dropped"] > 0  # the 200-token output does not fit 64: dropped, counted


def test_real_tokens_train_on_the_tokenized_text(tmp_path, capsys):
    run = make_run(tmp_path, [12, 3, 14, 10] * 3)
    model = make_tokenizer(tmp_path)
    rc, summary, err = _run(capsys, "--run", run, "--real-tokens", "--tokenizer", model,
                            "--steps", "3", "--seq-len", "32", "--batch-size", "2",
                            "--d-model", "32", "--device", "cpu")
    assert rc == 0, err
    assert summary["tokens"] == "real"
    assert summary["vocab_size"] < 64  # taken from the tokenizer, not the 49152 default
    assert summary["documents"] == 12 and summary["truncated"] == 0


def test_real_tokens_need_a_tokenizer(tmp_path, capsys):
    run = make_run(tmp_path, [5, 6])
    rc, _, err = _run(capsys, "--run", run, "--real-tokens", "--steps", "1")
    assert rc == 3 and "--tokenizer" in err


def test_expected_range_and_config_validation():
    low, high = expected_loss_range(1000, "random")
    assert low < 6.9 < high  # ln(1000) = 6.91
    assert expected_loss_range(1000, "real")[0] == 0.0
    with pytest.raises(SynthfactoryError, match="lr nan"):
        SmokeConfig(lr=float("nan"))
