"""Decontamination's cost: the benchmark index's build time and size at about 1M benchmark
n-grams, and the quality gate's rows/s over 10,000 rows with the check on against off.

Benchmarks: four made-up benchmark files (Parquet), their items sentences of shuffled
words from the Python standard library's docstrings (as the demo corpus), written to a
temporary folder and read by ``decontaminate.build`` as validate reads a team's folder.
Rows: benchmarks/quality.py's 10,000 rows (web prose, code and math with every kind of
output the gate sorts); every 50th row's output has a benchmark item planted in it, so
the check finds something. The rounds alternate the gate with the index and without it
on the same rows; medians are printed with the spread.

    .venv-worker/bin/python benchmarks/decontaminate.py [--ngrams 1000000] [--rows 10000]

Last line: ``RESULT decontaminate benchmark_ngrams=N index_s=T index_mb=M rows_per_s=R
gate_ratio=G isa=I`` (N: distinct n-grams in the index; R: the gate's rows/s with the
check; G: R over the gate's rows/s without it, to stay >= 0.7; I: the CPU's vector
extensions, benchmarks/machine.py).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402
from machine import print_machine, result_line  # noqa: E402
from quality import CODE_TEMPLATES, MATH_TEMPLATES, TEMPLATES, _clear_caches, _rows  # noqa: E402

from synthfactory.quality import decontaminate  # noqa: E402
from synthfactory.quality.gate import Row, assess  # noqa: E402
from synthfactory.quality_bounds import Bounds, bounds_from  # noqa: E402
from synthfactory.stitch.templates import load_template  # noqa: E402

BENCHMARK_FILES = 4
ITEM_WORDS = 80  # a question, its choices and its answer


def _items(ngrams: int, n: int, seed: int = 1) -> list[str]:
    """Made-up benchmark items of ITEM_WORDS words: about ``ngrams`` n-grams in all."""
    rows = _rows(200, seed)
    vocabulary = sorted({w for r in rows for w in decontaminate.words(r.source_text)})
    rng = random.Random(seed)
    per_item = ITEM_WORDS - n + 1
    return [" ".join(rng.choices(vocabulary, k=ITEM_WORDS))
            for _ in range(-(-ngrams // per_item))]


def _folder(items: list[str], root: Path) -> str:
    for k in range(BENCHMARK_FILES):
        pq.write_table(pa.table({"text": items[k::BENCHMARK_FILES]}),
                       root / f"made_up_{k}.parquet")
    return f"file://{root}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ngrams", type=int, default=1_000_000)
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("-n", type=int, default=decontaminate.DEFAULT_N)
    args = parser.parse_args()

    items = _items(args.ngrams, args.n)
    rows = [Row(r.source_text, r.output_text + " " + items[i % len(items)], r.finish_reason,
                r.template) if i % 50 == 0 else r
            for i, r in enumerate(_rows(args.rows))]
    planted = sum(1 for i in range(len(rows)) if i % 50 == 0)
    bounds = {t: bounds_from(load_template(t).quality, t)
              for t in (*TEMPLATES, *CODE_TEMPLATES, *MATH_TEMPLATES)}

    def bounds_for(template):
        return bounds.get(template, Bounds())

    with tempfile.TemporaryDirectory(prefix="decontaminate-") as tmp:
        url = _folder(items, Path(tmp))
        assess(rows[:50], bounds_for)  # warm-up: the language model loads once
        print_machine()
        start = time.perf_counter()
        index = decontaminate.build(url, args.n)
        index_s = time.perf_counter() - start
    print(index.stats.line(url, args.n), flush=True)
    on, off, found = [], [], 0
    for _ in range(args.rounds):
        _clear_caches()
        start = time.perf_counter()
        verdicts = assess(rows, bounds_for, benchmarks=index)
        on.append(len(rows) / (time.perf_counter() - start))
        found = sum("contaminated" in v.reasons for v in verdicts)
        _clear_caches()
        start = time.perf_counter()
        assess(rows, bounds_for)
        off.append(len(rows) / (time.perf_counter() - start))
        print(f"round: gate with decontamination {on[-1]:.0f} rows/s, without "
              f"{off[-1]:.0f} rows/s", flush=True)
    print_machine()
    r, w = statistics.median(on), statistics.median(off)
    ngrams, mb = index.stats.ngrams, index.nbytes / 2**20
    print(f"with spread {min(on):.0f}..{max(on):.0f}, without spread "
          f"{min(off):.0f}..{max(off):.0f} rows/s; contaminated rows {found} "
          f"(planted {planted}); per 1M benchmark n-grams: {index_s / ngrams * 1e6:.2f} s, "
          f"{mb / ngrams * 1e6:.1f} MiB")
    print(result_line("decontaminate", benchmark_ngrams=ngrams, index_s=f"{index_s:.2f}",
                      index_mb=f"{mb:.1f}", rows_per_s=f"{r:.0f}", gate_ratio=f"{r / w:.2f}"))


if __name__ == "__main__":
    main()
