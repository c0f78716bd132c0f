"""The rematch after the search: alternating rounds, gain as a ratio of medians."""

from __future__ import annotations

import pytest

from synthfactory.errors import SynthfactoryError
from synthfactory.sweep.rematch import describe, rematch, spread

WINNER = {"max_num_seqs": 8}


def _measure(figures: dict[str, list[float]], seen: list):
    """Injected measurement: the next figure of each side, in the order asked."""
    left = {side: list(values) for side, values in figures.items()}

    def measure(config: dict) -> float:
        side = "winner" if config else "default"
        seen.append(side)
        return left[side].pop(0)

    return measure


def test_a_winner_measured_slower_than_the_defaults_has_gain_below_one():
    seen: list = []
    figures = {"default": [150.0, 140.0, 160.0], "winner": [120.0, 200.0, 130.0]}
    result = rematch(_measure(figures, seen), {}, WINNER, rounds=3)
    assert seen == ["default", "winner"] * 3  # alternating, defaults first
    assert result["default_median"] == 150.0 and result["winner_median"] == 130.0
    assert result["gain"] == pytest.approx(130 / 150, abs=1e-3) and result["gain"] < 1
    assert spread(result["winner_tokens_per_s"]) == "120.0..200.0"  # one lucky round
    assert "gain 0.87" in describe(result, "max_num_seqs=8")


def test_a_faster_winner_has_gain_above_one_and_one_outlier_does_not_decide():
    figures = {"default": [100.0, 20.0, 100.0, 100.0], "winner": [120.0] * 4}
    result = rematch(_measure(figures, []), {}, WINNER, rounds=4)
    assert result["gain"] == 1.2


@pytest.mark.parametrize("rounds", [0, 1, 2])
def test_fewer_than_three_rounds_are_refused(rounds):
    with pytest.raises(SynthfactoryError, match="rematch"):
        rematch(lambda config: 1.0, {}, WINNER, rounds=rounds)


def test_a_failed_round_fails_the_rematch():
    def measure(config):
        raise SynthfactoryError("rematch round of max_num_seqs=8 failed: killed by SIGKILL")

    with pytest.raises(SynthfactoryError, match="SIGKILL"):
        rematch(measure, {}, WINNER, rounds=3)
