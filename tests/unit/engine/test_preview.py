"""preview-lengths: figures on specs whose answers are known in advance."""

from __future__ import annotations

import json

import numpy as np
import pytest

from synthfactory.cli import main
from synthfactory.training.lengths import spec_from_dict
from synthfactory.training.preview import BalanceConfig, dp_balance, histogram, length_stats
from tests.support.training import write_spec

FIXED_100 = {"type": "buckets", "buckets": [{"min_len": 100, "max_len": 100, "weight": 1}]}


def test_length_stats_on_known_lengths():
    stats = length_stats(np.arange(1, 101))
    assert stats == {"count": 100, "min": 1, "p50": 50.5, "p90": 90.1, "p99": 99.01,
                     "max": 100, "mean": 50.5, "total_tokens": 5050}
    hist = histogram(np.arange(1, 101))
    assert len(hist) == 20 and all(h["count"] == 5 for h in hist)


def test_fixed_lengths_that_tile_the_context_balance_perfectly():
    # Ten 100-token documents fill a 1000-token row exactly: no padding, equal ranks.
    figures = dp_balance(spec_from_dict(FIXED_100),
                         BalanceConfig(seq_len=1000, dp=4, per_rank_batch=2, steps=5))
    assert figures["padding_waste_fraction"] == 0.0
    assert figures["max_over_mean"] == 1.0 and figures["worst_step_max_over_mean"] == 1.0


def test_long_documents_leave_padding_and_imbalance():
    # One 600-token document per 1000-token row: 40% padding exactly.
    spec = {"type": "buckets", "buckets": [{"min_len": 600, "max_len": 600, "weight": 1}]}
    figures = dp_balance(spec_from_dict(spec),
                         BalanceConfig(seq_len=1000, dp=2, per_rank_batch=2, steps=3))
    assert figures["padding_waste_fraction"] == pytest.approx(0.4)
    bimodal = {"type": "buckets", "buckets": [{"min_len": 1, "max_len": 50, "weight": 3},
                                              {"min_len": 400, "max_len": 900, "weight": 1}]}
    uneven = dp_balance(spec_from_dict(bimodal),
                        BalanceConfig(seq_len=1000, dp=8, per_rank_batch=1, steps=20))
    assert uneven["worst_step_max_over_mean"] > 1.05


def test_preview_cli_json_and_png(tmp_path, capsys):
    spec = write_spec(tmp_path, FIXED_100)
    png = tmp_path / "hist.png"
    rc = main(["preview-lengths", "--spec", spec, "--seq-len", "1000", "--dp", "2",
               "--per-rank-batch", "2", "--steps", "3", "--samples", "500",
               "--png", str(png), "--json"])
    assert rc == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 1  # --json: one JSON object, nothing else
    out = json.loads(lines[0])
    for key in ("count", "min", "p50", "p90", "p99", "max", "mean", "total_tokens",
                "max_over_mean", "worst_step_max_over_mean", "padding_waste_fraction"):
        assert key in out, key
    assert out["count"] == 500 and out["min"] == out["max"] == 100
    assert out["total_tokens"] == 50000
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_preview_cli_text_report_and_errors(tmp_path, capsys):
    spec = write_spec(tmp_path, FIXED_100)
    assert main(["preview-lengths", "--spec", spec, "--seq-len", "1000", "--dp", "1",
                 "--steps", "1", "--samples", "50"]) == 0
    out = capsys.readouterr().out
    assert "p50 100" in out and "histogram:" in out and "padding_waste_fraction" in out
    with pytest.raises(SystemExit) as exited:  # argparse refuses it (docs/adr/0060)
        main(["preview-lengths", "--spec", spec, "--dp", "0"])
    assert exited.value.code == 2
    assert "argument --dp: must be at least 1, got 0" in capsys.readouterr().err
    bad = write_spec(tmp_path, {"type": "buckets", "buckets": [{"min_len": 0, "max_len": 3}]},
                     name="bad.json")
    assert main(["preview-lengths", "--spec", bad]) == 3
    assert "bad.json" in capsys.readouterr().err
