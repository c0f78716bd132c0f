"""The rule that decides whether the sweep's finalist replaces the defaults
(docs/adr/0115).

The finalist and the defaults were measured in the same alternating rounds. The
finalist wins only when its median beats the defaults' median by more than the
rounds' spread: the wider of the two sides' ranges (max - min). One lucky round can
neither move a median of three or more past the other side's figures nor shrink a
range, and an unlucky round widens the range it falls in; so noise alone keeps the
defaults rather than crowning a loser. ``gain`` is the applied configuration's median
over the defaults' in those rounds: exactly 1 when the defaults stay (the same
configuration), above 1 when a measured-faster candidate is applied.
"""

from __future__ import annotations

import statistics

from synthfactory.errors import SynthfactoryError

MIN_ROUNDS = 3  # a median of fewer rounds is moved by one outlier


def check_rounds(rounds: int) -> None:
    if rounds < MIN_ROUNDS:
        raise SynthfactoryError(f"--rounds {rounds}: use at least {MIN_ROUNDS}, so one slow or "
                                "fast round cannot decide which configuration is written")


def side(figures: list[float]) -> dict:
    """Median and range of one configuration's tokens/s over the rounds."""
    return {"tokens_per_s": list(figures), "median": round(statistics.median(figures), 2),
            "min": min(figures), "max": max(figures)}


def spread(s: dict) -> str:
    """min..max, as the table, the decision line and the benchmark print it."""
    return f"{s['min']:.1f}..{s['max']:.1f}"


def decide(defaults: list[float], finalist: list[float] | None, label: str | None,
           config: dict | None) -> dict:
    """``defaults`` and ``finalist``: output tokens/s of the same rounds, in order
    (``finalist`` None when no candidate lasted). Returns the decision record written
    into the winner's file."""
    if not defaults:
        raise SynthfactoryError("decision: the defaults were never measured")
    d = side(defaults)
    record = {"rounds": len(defaults), "defaults": d, "finalist": None,
              "finalist_label": label, "finalist_config": config, "margin": None,
              "spread": None, "winner": "defaults", "applied_config": {}, "applied": d,
              "gain": 1.0}
    if not finalist:
        record["line"] = ("decision: the defaults stay - no candidate finished its rounds "
                          f"(defaults {d['median']:.1f} tok/s, spread {spread(d)})")
        return record
    if len(finalist) != len(defaults):
        raise SynthfactoryError(f"decision: {len(finalist)} rounds of {label} against "
                                f"{len(defaults)} of the defaults")
    f = side(finalist)
    margin = round(f["median"] - d["median"], 2)
    width = round(max(f["max"] - f["min"], d["max"] - d["min"]), 2)
    record.update(finalist=f, margin=margin, spread=width)
    figures = (f"{label} {f['median']:.1f} tok/s (spread {spread(f)}) against the "
               f"defaults' {d['median']:.1f} (spread {spread(d)}) over {len(defaults)} "
               f"alternating rounds")
    if margin > width:
        gain = round(f["median"] / d["median"], 3)
        record.update(winner="finalist", applied_config=config, applied=f, gain=gain)
        record["line"] = (f"decision: {label} replaces the defaults - {figures}: faster by "
                          f"{margin:.1f}, more than the spread {width:.1f}; gain {gain:.2f}")
    else:
        verdict = (f"faster by {margin:.1f}, not more than the spread {width:.1f}"
                   if margin > 0 else f"slower by {-margin:.1f}" if margin < 0 else "no faster")
        record["line"] = f"decision: the defaults stay - {figures}: {verdict}"
    return record
