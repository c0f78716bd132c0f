"""Successive halving in rounds that alternate with the defaults (docs/adr/0115).

Each round measures the defaults, then every surviving candidate, each a fresh trial.
The candidates' order turns by one each round, so none always runs furthest from the
defaults' figure while load drifts. From the second round on, the slower half (median
tokens/s over the rounds so far; every survivor ran in the same rounds) is dropped after
each round, until one is left: never on one figure, which one lucky run of a rival can
beat. The finalist and the defaults then go on until both have ``rounds`` figures. A
candidate that fails a round is out: a configuration that fails once is not safe to
write. ``measure(entry, round)`` returns the trial's record (``status``,
``output_tokens_per_s``, ``peak_rss_mb``); tests inject a fake one.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable

FIRST_CUT = 2  # the round after which the first candidates leave


def halve(measure: Callable[[dict, int], dict], defaults: dict, candidates: list[dict],
          rounds: int) -> dict:
    """``defaults`` and each candidate: {"key", "label", "config", ...}, candidates in
    grid order. Returns every trial record, the defaults' figures per round, the
    finalist (or None) with its figures, and when each other candidate left."""
    alive = list(candidates)
    figures: dict[str, list[float]] = {c["key"]: [] for c in alive}
    memory: dict[str, list[float]] = {c["key"]: [] for c in alive}
    records, base, dropped, failed = [], [], {}, {}
    round_ = 0
    while True:
        round_ += 1
        record = measure(defaults, round_)
        records.append(record)
        if record["status"] != "ok":  # nothing left to compare against
            return _result(records, base, None, [], dropped, failed,
                           f"round {round_}: the defaults failed: {record.get('error')}")
        base.append(record["output_tokens_per_s"])
        turn = (round_ - 1) % len(alive) if alive else 0
        for candidate in alive[turn:] + alive[:turn]:
            record = measure(candidate, round_)
            records.append(record)
            if record["status"] != "ok":
                failed[candidate["key"]] = round_
                continue
            figures[candidate["key"]].append(record["output_tokens_per_s"])
            memory[candidate["key"]].append(record.get("peak_rss_mb") or 0.0)
        alive = [c for c in alive if c["key"] not in failed]
        if len(alive) > 1 and round_ >= FIRST_CUT:
            ranked = sorted(alive, key=lambda c: (-statistics.median(figures[c["key"]]),
                                                  statistics.median(memory[c["key"]])))
            keep = ranked[: math.ceil(len(alive) / 2)]
            dropped.update({c["key"]: round_ for c in alive if c not in keep})
            alive = [c for c in alive if c in keep]  # grid order, for the next turn
        if not alive or (len(alive) == 1 and round_ >= rounds):
            break
    finalist = alive[0] if alive else None
    return _result(records, base, finalist, figures[finalist["key"]] if finalist else [],
                   dropped, failed, None)


def _result(records, base, finalist, finalist_figures, dropped, failed, error) -> dict:
    return {"records": records, "defaults": base, "finalist": finalist,
            "finalist_figures": finalist_figures, "dropped": dropped, "failed": failed,
            "error": error}
