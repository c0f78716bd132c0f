"""Successive halving in rounds that alternate with the defaults, with a fake
``measure`` (deterministic figures per configuration and round), and the decision it
feeds: a lucky or unlucky run must not crown a loser, a faster configuration wins."""

from __future__ import annotations

from synthfactory.sweep.decision import decide
from synthfactory.sweep.halving import halve

DEFAULTS = {"key": "d", "label": "defaults", "config": {}}


def _entry(name: str) -> dict:
    return {"key": name, "label": name, "config": {"max_num_seqs": len(name)}}


def _measure(figures: dict[str, list], seen: list):
    """Figure of round N of each configuration; None = that round fails."""

    def measure(entry: dict, round_: int) -> dict:
        seen.append((round_, entry["key"]))
        value = figures[entry["key"]][round_ - 1]
        if value is None:
            return {"key": entry["key"], "status": "failed", "error": "out of memory"}
        return {"key": entry["key"], "status": "ok", "output_tokens_per_s": value,
                "peak_rss_mb": 1000.0}

    return measure


def _run(figures: dict[str, list], names: list[str], rounds: int = 3):
    seen: list = []
    result = halve(_measure(figures, seen), DEFAULTS, [_entry(n) for n in names], rounds)
    finalist = result["finalist"]
    decision = decide(result["defaults"], result["finalist_figures"],
                      finalist and finalist["label"], finalist and finalist["config"])
    return result, decision, seen


def test_rounds_alternate_with_the_defaults_and_the_slower_half_leaves_each_round():
    figures = {"d": [150.0] * 3, "a": [300.0] * 3, "bb": [200.0] * 3, "ccc": [100.0] * 3}
    result, decision, seen = _run(figures, ["a", "bb", "ccc"])
    # every round starts with the defaults; the survivors' order turns by one a round;
    # the first cut comes after round 2, never on one figure
    assert seen == [(1, "d"), (1, "a"), (1, "bb"), (1, "ccc"),
                    (2, "d"), (2, "bb"), (2, "ccc"), (2, "a"),
                    (3, "d"), (3, "a"), (3, "bb")]
    assert result["dropped"] == {"ccc": 2, "bb": 3}
    assert result["finalist"]["key"] == "a" and result["finalist_figures"] == [300.0] * 3
    assert result["defaults"] == [150.0] * 3


def test_a_loser_with_one_lucky_run_is_not_crowned_on_a_loaded_machine():
    # The case: a job loads the machine; max_num_seqs=7 really runs ~120 tok/s
    # against the defaults' ~200, but its first trial caught a quiet moment (260) while
    # the defaults' caught a busy one. Picking the highest single figure crowns it.
    figures = {"d": [180.0, 205.0, 198.0], "a": [260.0, 118.0, 121.0],
               "bb": [150.0, 140.0, 145.0]}
    result, decision, _ = _run(figures, ["a", "bb"])
    assert result["finalist"]["key"] == "a"  # the lucky run carried it through halving
    assert decision["winner"] == "defaults" and decision["applied_config"] == {}
    assert decision["gain"] == 1.0
    assert decision["defaults"]["median"] == 198.0 and decision["finalist"]["median"] == 121.0
    assert decision["line"].startswith("decision: the defaults stay - a 121.0 tok/s "
                                       "(spread 118.0..260.0)")


def test_an_unlucky_run_of_the_defaults_does_not_crown_a_loser():
    # one starved defaults trial (60) pulls no median down; it widens the spread
    figures = {"d": [200.0, 60.0, 205.0], "a": [210.0, 212.0, 208.0]}
    _, decision, _ = _run(figures, ["a"])
    assert decision["winner"] == "defaults"
    assert decision["margin"] == 10.0 and decision["spread"] == 145.0


def test_a_faster_median_within_the_spread_keeps_the_defaults():
    figures = {"d": [100.0, 110.0, 105.0], "a": [112.0, 104.0, 115.0]}
    _, decision, _ = _run(figures, ["a"])
    assert decision["winner"] == "defaults"
    assert "faster by 7.0, not more than the spread 11.0" in decision["line"]


def test_a_genuinely_faster_configuration_wins_despite_a_noisy_rival():
    figures = {"d": [150.0, 148.0, 155.0], "a": [210.0, 205.0, 214.0],
               "bb": [230.0, 90.0, None]}  # one lucky run, then slow: out after round 2
    result, decision, _ = _run(figures, ["a", "bb"])
    assert result["dropped"] == {"bb": 2}
    assert decision["winner"] == "finalist" and decision["applied_config"] == {"max_num_seqs": 1}
    assert decision["rounds"] == 3 and decision["gain"] == round(210 / 150, 3)
    assert decision["finalist"]["min"] == 205.0 and decision["finalist"]["max"] == 214.0
    assert "faster by 60.0, more than the spread 9.0; gain 1.40" in decision["line"]


def test_a_candidate_that_fails_a_round_is_out_and_halving_goes_on_without_it():
    figures = {"d": [150.0] * 4, "a": [300.0, None, 0, 0], "bb": [200.0] * 4,
               "ccc": [100.0] * 4}
    result, decision, seen = _run(figures, ["a", "bb", "ccc"])
    assert result["failed"] == {"a": 2}
    assert result["finalist"]["key"] == "bb" and len(result["finalist_figures"]) == 3
    assert decision["winner"] == "finalist"


def test_more_candidates_than_rounds_can_halve_give_the_finalist_more_rounds():
    names = ["a", "bb", "ccc", "dddd", "eeeee"]
    figures = {"d": [100.0] * 5, **{n: [100.0 + 10 * len(n)] * 5 for n in names}}
    result, decision, seen = _run(figures, names, rounds=3)
    # 5 -> 3 -> 2 -> 1 after rounds 2, 3 and 4: the finalist ran 4 rounds, as the defaults
    assert [sum(1 for r, _ in seen if r == n) for n in (1, 2, 3, 4)] == [6, 6, 4, 3]
    assert result["finalist"]["key"] == "eeeee" and decision["rounds"] == 4


def test_when_every_candidate_fails_the_defaults_stay_and_when_the_defaults_fail_no_decision():
    result, decision, _ = _run({"d": [150.0] * 3, "a": [None] * 3}, ["a"])
    assert result["finalist"] is None and decision["winner"] == "defaults"
    assert "no candidate finished" in decision["line"]
    result = halve(_measure({"d": [150.0, None, 0], "a": [200.0] * 3}, []), DEFAULTS,
                   [_entry("a")], 3)
    assert result["error"] == "round 2: the defaults failed: out of memory"
