"""The gate's grounding checks: their speed on the same rows with and without them, and
their precision and recall on the labelled rows (tests/support/grounding_rows.py).

Speed: the quality benchmark's 10,000 mixed rows (benchmarks/quality.py: web prose,
code, math; every template kind), gated by ``assess`` as the pipeline runs it, with the
grounding checks (ungrounded, content_lost, invented, repeated_block) and without them
(``assess(..., grounding_checks=False)``, the gate before them), rounds alternating; the
grounding caches are cleared before each round of ours. ``gate_ratio``: the share of
the gate's speed the grounding checks keep (target >= 0.7).

Labelled rows: each row gated alone against its template's bounds. Precision: the share
of kept rows that are faithful; recall: the share of unfaithful rows rejected. Each of
the four checks also alone (a row "rejected" by the check when its reason is among the
verdict's), and recall per unfaithful kind.

    .venv-worker/bin/python benchmarks/grounding.py [--rows 10000] [--rounds 3]

Last line: ``RESULT grounding rows=N rows_per_s=R gate_ratio=G labelled=L precision=P
recall=Q isa=I``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from machine import print_machine, result_line  # noqa: E402  (this folder is on sys.path)
from quality import _rows  # noqa: E402  (the quality benchmark's mixed rows)

from synthfactory.quality import grounding  # noqa: E402
from synthfactory.quality.gate import Row, assess  # noqa: E402
from synthfactory.quality.reasons import GROUNDING  # noqa: E402
from synthfactory.quality_bounds import Bounds, bounds_from  # noqa: E402
from synthfactory.stitch.templates import load_template  # noqa: E402
from tests.support.grounding_rows import ROWS, UNFAITHFUL  # noqa: E402

_BOUNDS: dict[str, Bounds] = {}


def bounds_for(template: str | None) -> Bounds:
    if not template:
        return Bounds()
    if template not in _BOUNDS:
        _BOUNDS[template] = bounds_from(load_template(template).quality, template)
    return _BOUNDS[template]


def labelled() -> dict:
    """Precision and recall of the gate on the labelled rows, overall and per check."""
    verdicts = [assess([Row(r.source, r.output, "stop", r.template)], bounds_for)[0]
                for r in ROWS]
    kept = [r for r, v in zip(ROWS, verdicts, strict=True) if v.usable]
    unfaithful = [(r, v) for r, v in zip(ROWS, verdicts, strict=True) if not r.faithful]
    out = {
        "labelled": len(ROWS),
        "precision": sum(r.faithful for r in kept) / len(kept) if kept else 0.0,
        "recall": sum(not v.usable for _, v in unfaithful) / len(unfaithful),
        "faithful_rejected": [(r.name, v.reasons) for r, v in zip(ROWS, verdicts, strict=True)
                              if r.faithful and not v.usable],
    }
    for reason in GROUNDING:
        hit = [(r, reason in v.reasons) for r, v in zip(ROWS, verdicts, strict=True)]
        caught = sum(h for r, h in hit if not r.faithful)
        wrong = sum(h for r, h in hit if r.faithful)
        out[reason] = {"rejects": caught + wrong, "unfaithful": caught, "faithful": wrong,
                       "precision": round(caught / (caught + wrong), 3) if caught + wrong
                       else None}
    by_kind: Counter = Counter()
    caught_kind: Counter = Counter()
    for r, v in unfaithful:
        by_kind[r.kind] += 1
        caught_kind[r.kind] += not v.usable
    out["recall_by_kind"] = {k: f"{caught_kind[k]}/{by_kind[k]}" for k in UNFAITHFUL}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    rows = _rows(args.rows)
    assess(rows[:50], bounds_for)  # warm-up: the language model and word lists load once
    print_machine()
    ours, without = [], []
    for _ in range(args.rounds):
        grounding.clear_caches()
        start = time.perf_counter()
        assess(rows, bounds_for)
        ours.append(len(rows) / (time.perf_counter() - start))
        start = time.perf_counter()
        assess(rows, bounds_for, grounding_checks=False)
        without.append(len(rows) / (time.perf_counter() - start))
        print(f"round: gate {ours[-1]:.0f} rows/s, without grounding {without[-1]:.0f} rows/s, "
              f"ratio {ours[-1] / without[-1]:.2f}", flush=True)
    print_machine()
    r, w = statistics.median(ours), statistics.median(without)
    print(f"gate spread {min(ours):.0f}..{max(ours):.0f}, without grounding spread "
          f"{min(without):.0f}..{max(without):.0f} rows/s")
    figures = labelled()
    for reason in GROUNDING:
        print(f"check {reason}: {figures[reason]}")
    print(f"recall by kind: {figures['recall_by_kind']}")
    print(f"faithful rows rejected: {figures['faithful_rejected']}")
    print(result_line("grounding", rows=len(rows), rows_per_s=f"{r:.0f}",
                      gate_ratio=f"{r / w:.2f}", labelled=figures["labelled"],
                      precision=f"{figures['precision']:.3f}",
                      recall=f"{figures['recall']:.3f}"))


if __name__ == "__main__":
    main()
