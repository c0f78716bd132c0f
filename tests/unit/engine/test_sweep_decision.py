"""The decision rule on its own: medians, the rounds' spread, and what it refuses."""

from __future__ import annotations

import pytest

from synthfactory.errors import SynthfactoryError
from synthfactory.sweep.decision import check_rounds, decide, spread


def test_the_finalist_must_beat_the_defaults_by_more_than_the_wider_range():
    # margin 20 against ranges of 10 (defaults) and 25 (finalist): the wider decides
    defaults, finalist = [100.0, 105.0, 110.0], [110.0, 125.0, 135.0]
    kept = decide(defaults, finalist, "max_num_seqs=7", {"max_num_seqs": 7})
    assert kept["margin"] == 20.0 and kept["spread"] == 25.0
    assert kept["winner"] == "defaults" and kept["applied"] == kept["defaults"]
    won = decide(defaults, [130.0, 135.0, 140.0], "max_num_seqs=7", {"max_num_seqs": 7})
    assert won["winner"] == "finalist" and won["applied_config"] == {"max_num_seqs": 7}
    assert won["gain"] == pytest.approx(135 / 105, abs=1e-3)
    assert spread(won["applied"]) == "130.0..140.0"


def test_a_slower_finalist_keeps_the_defaults_and_says_so_in_one_line():
    record = decide([200.0, 198.0, 205.0], [120.0, 121.0, 260.0], "max_num_seqs=7",
                    {"max_num_seqs": 7})
    assert record["winner"] == "defaults" and record["gain"] == 1.0
    assert "\n" not in record["line"]
    assert record["line"].startswith("decision: the defaults stay - max_num_seqs=7 121.0")
    assert record["line"].endswith("over 3 alternating rounds: slower by 79.0")


@pytest.mark.parametrize("rounds", [0, 1, 2])
def test_fewer_than_three_rounds_are_refused_naming_the_flag(rounds):
    with pytest.raises(SynthfactoryError, match=f"--rounds {rounds}: use at least 3"):
        check_rounds(rounds)


def test_figures_of_different_rounds_are_not_compared():
    with pytest.raises(SynthfactoryError, match="2 rounds of a against 3"):
        decide([1.0, 2.0, 3.0], [1.0, 2.0], "a", {"max_num_seqs": 1})
