"""The winner against the defaults again, after the search, in alternating rounds
(defaults, winner, defaults, winner, ...), and ``gain`` = median(winner) / median(defaults).

The search measures each configuration once, at one moment of a shared machine, and
picks the highest of several noisy figures: that maximum is biased upwards, and with the
defaults among the candidates best / defaults can never fall below 1. Alternating rounds
expose both sides to the same drift (another job taking the cores, thermal state), and
the medians shrug off one outlier, so a winner that is not really faster shows a gain
below 1 (docs/adr/0066).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable

from synthfactory.errors import SynthfactoryError

MIN_ROUNDS = 3  # fewer rounds give a median that one outlier moves


def check_rounds(rounds: int) -> None:
    if rounds != 0 and rounds < MIN_ROUNDS:
        raise SynthfactoryError(f"--rematch-rounds {rounds}: use 0 (off) or at least "
                                f"{MIN_ROUNDS}, so one slow round cannot decide the gain")


def rematch(measure: Callable[[dict], float], default: dict, winner: dict,
            rounds: int) -> dict:
    """``measure(config)`` runs one configuration and returns its output tokens/s (it
    raises SynthfactoryError when the run fails)."""
    check_rounds(rounds)
    if rounds == 0:
        raise SynthfactoryError("rematch: no rounds to measure")
    runs: dict[str, list[float]] = {"default": [], "winner": []}
    for _ in range(rounds):
        runs["default"].append(measure(default))
        runs["winner"].append(measure(winner))
    default_median = statistics.median(runs["default"])
    winner_median = statistics.median(runs["winner"])
    if default_median <= 0:
        raise SynthfactoryError(f"rematch: the defaults measured {runs['default']} tokens/s")
    return {
        "rounds": rounds, "winner_config": winner,
        "default_tokens_per_s": runs["default"], "winner_tokens_per_s": runs["winner"],
        "default_median": round(default_median, 2), "winner_median": round(winner_median, 2),
        "gain": round(winner_median / default_median, 3),
    }


def spread(values: list[float]) -> str:
    """min..max over the rounds, as the report and the benchmark print it."""
    return f"{min(values):.1f}..{max(values):.1f}"


def describe(result: dict, winner_label: str) -> str:
    default, winner = result["default_tokens_per_s"], result["winner_tokens_per_s"]
    return (f"rematch, {result['rounds']} alternating rounds: defaults "
            f"{result['default_median']:.1f} tok/s (spread {spread(default)}), "
            f"{winner_label} {result['winner_median']:.1f} tok/s (spread {spread(winner)}); "
            f"gain {result['gain']:.2f}")
