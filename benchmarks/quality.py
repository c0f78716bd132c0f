"""Rows/s of the quality gate over 10,000 rows, against the validation flags it replaced.

Rows: real sources (the Python standard library's docstrings, as the demo corpus) with
outputs of every kind the gate sorts (rewrites, copies, truncations, loops, refusals,
another language, preambles, repeated outputs), with templates. Ours: ``assess`` (all
nine reasons, MinHash over the whole table). Baseline: the four per-row flags validate
computed before the gate (``flag_rows``: empty, truncated, repetition, refusal) on the
same outputs. The ratio is how much slower the full gate is; the rounds alternate and
medians are printed with the spread.

    .venv-worker/bin/python benchmarks/quality.py [--rows 10000] [--rounds 3]

Last line: ``RESULT quality_gate rows=N rows_per_s=R baseline_rows_per_s=B ratio=B/R
usable=U isa=I`` (I: the CPU's vector extensions, benchmarks/machine.py).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import sysconfig  # noqa: E402

from machine import print_machine, result_line  # noqa: E402  (this folder is on sys.path)

from synthfactory.corpus import iter_docstrings  # noqa: E402
from synthfactory.quality.bounds import Bounds, bounds_from  # noqa: E402
from synthfactory.quality.gate import Row, assess  # noqa: E402
from synthfactory.stitch.templates import load_template  # noqa: E402
from synthfactory.validate import flag_rows  # noqa: E402

TEMPLATES = ("encyclopedic", "qa", "summary", "faq")
GERMAN = ("Dieses Modul bietet ein einfaches Gerüst zum Schreiben zeilenorientierter "
          "Befehlsinterpreter, die oft für Testumgebungen und Prototypen nützlich sind.")


def _rows(n: int, seed: int = 0) -> list[Row]:
    rng = random.Random(seed)
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    sources = [text for _, text in iter_docstrings(stdlib, 200, 2000, 3)
               if len(text.split()) >= 20][:2000]
    rows = []
    for i in range(n):
        source = sources[i % len(sources)]
        words = source.split()
        rng.shuffle(words)
        kind = i % 8
        output = {
            0: " ".join(words),  # a reordering: a rewrite's length, few copied 6-grams
            1: source,  # a copy
            2: " ".join(words[:len(words) // 2]),  # cut short
            3: " ".join(words[:5] * 12),  # a loop
            4: "I'm sorry, but I cannot rewrite this text.",
            5: GERMAN,
            6: "Sure! Here is the rewritten text:\n\n" + " ".join(reversed(words)),
            7: " ".join(words) if i % 16 == 7 else " ".join(sorted(words)),
        }[kind]
        rows.append(Row(source, output, "length" if kind == 2 else "stop",
                        TEMPLATES[i % len(TEMPLATES)]))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    rows = _rows(args.rows)
    bounds = {t: bounds_from(load_template(t).quality, t) for t in TEMPLATES}

    def bounds_for(template):
        return bounds.get(template, Bounds())

    assess(rows[:50], bounds_for)  # warm-up: the language model loads once
    print_machine()
    ours, base, usable = [], [], 0
    for _ in range(args.rounds):
        start = time.perf_counter()
        verdicts = assess(rows, bounds_for)
        ours.append(len(rows) / (time.perf_counter() - start))
        usable = sum(v.usable for v in verdicts)
        start = time.perf_counter()
        flag_rows([r.output_text for r in rows], [r.finish_reason for r in rows], 0.5)
        base.append(len(rows) / (time.perf_counter() - start))
        print(f"round: gate {ours[-1]:.0f} rows/s, flags {base[-1]:.0f} rows/s", flush=True)
    print_machine()
    r, b = statistics.median(ours), statistics.median(base)
    print(f"gate spread {min(ours):.0f}..{max(ours):.0f}, flags spread "
          f"{min(base):.0f}..{max(base):.0f} rows/s")
    print(result_line("quality_gate", rows=len(rows), rows_per_s=f"{r:.0f}",
                      baseline_rows_per_s=f"{b:.0f}", ratio=f"{b / r:.1f}", usable=usable))


if __name__ == "__main__":
    main()
