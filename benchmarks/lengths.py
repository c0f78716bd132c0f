"""Sampled-and-packed tokens/s of the grain loader vs a plain-Python first-fit.

Spec (issue 8): buckets [1..128 weight 3, 1024..2000 weight 1] at context 2048. Both
sides sample lengths and random tokens and pack them first-fit into rows (with
positions and segment ids); the baseline does it with Python lists and ``random``
on the same length draws. Also reports the fill ratio (1 - padding) of first-fit,
best-fit and concat-then-split, and the best fill any whole-document packing can reach
here: documents longer than half the context can never share a row.

    .venv-worker/bin/python benchmarks/lengths.py [--rows 1200]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from synthfactory.training.length_source import LengthSource, LengthSourceConfig  # noqa: E402
from synthfactory.training.lengths import spec_from_dict  # noqa: E402
from synthfactory.training.loader import (  # noqa: E402
    LoaderConfig,
    PackedLoader,
    synthetic_documents,
)
from synthfactory.training.token_processors import RandomTokenProcessor  # noqa: E402

SEQ = 2048
VOCAB = 49152
BINS = 16
SPEC = spec_from_dict({"type": "buckets", "buckets": [
    {"min_len": 1, "max_len": 128, "weight": 3.0},
    {"min_len": 1024, "max_len": 2000, "weight": 1.0},
]})


def _source() -> LengthSourceConfig:
    return LengthSourceConfig(SPEC, max_len=SEQ, seed=0)


def ours(rows: int, packing: str) -> tuple[float, float, int]:
    """(tokens/s, fill, documents drawn) for ``rows`` packed rows."""
    loader = PackedLoader(
        synthetic_documents(_source(), RandomTokenProcessor(VOCAB)),
        LoaderConfig(seq_len=SEQ, batch_size=BINS, packing=packing, num_packing_bins=BINS),
    )
    start = time.perf_counter()
    real = 0
    for _ in range(rows // BINS):
        real += int(np.count_nonzero(next(loader)["segment_ids"]))
    elapsed = time.perf_counter() - start
    return real / elapsed, real / ((rows // BINS) * BINS * SEQ), loader.source_counts()["documents"]


def naive(lengths: list[int]) -> tuple[float, float]:
    """Plain Python: random tokens and first-fit over BINS open rows, same draws."""
    rng = random.Random(0)
    start = time.perf_counter()
    out_rows, bins = [], [[] for _ in range(BINS)]

    def flush():
        for b in bins:
            if b:
                tokens = [t for doc in b for t in doc]
                positions = [p for doc in b for p in range(len(doc))]
                segments = [s for s, doc in enumerate(b, 1) for _ in doc]
                pad = SEQ - len(tokens)
                out_rows.append((tokens + [0] * pad, positions + [0] * pad, segments + [0] * pad))
            b.clear()

    used = [0] * BINS
    for length in lengths:
        doc = [rng.randrange(VOCAB) for _ in range(length)]
        for i in range(BINS):
            if used[i] + length <= SEQ:
                bins[i].append(doc)
                used[i] += length
                break
        else:
            flush()
            used = [0] * BINS
            bins[0].append(doc)
            used[0] = length
    flush()
    elapsed = time.perf_counter() - start
    real = sum(lengths)
    return real / elapsed, real / (len(out_rows) * SEQ)


def fill_upper_bound(lengths: np.ndarray) -> float:
    rows = max(int((lengths > SEQ // 2).sum()), -(-int(lengths.sum()) // SEQ))
    return float(lengths.sum() / (rows * SEQ))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1200)
    args = parser.parse_args()
    tps, first_fit_fill, docs = ours(args.rows, "first_fit")
    _, best_fit_fill, _ = ours(args.rows, "best_fit")
    _, cts_fill, _ = ours(args.rows, "concat_then_split")
    lengths = LengthSource(_source()).take(docs)
    naive_tps, naive_fill = naive(lengths.tolist())
    print(f"documents={docs} rows={args.rows} seq_len={SEQ} bins={BINS}")
    print(f"ours first_fit tokens/s={tps:,.0f} fill={first_fit_fill:.4f}")
    print(f"naive first_fit tokens/s={naive_tps:,.0f} fill={naive_fill:.4f}")
    print(f"best_fit fill={best_fit_fill:.4f} concat_then_split fill={cts_fill:.4f}")
    print(f"whole-document fill upper bound={fill_upper_bound(lengths):.4f}")
    print(
        f"RESULT lengths tokens_per_s={tps:.0f} naive_tokens_per_s={naive_tps:.0f} "
        f"speedup={tps / naive_tps:.2f} first_fit_fill={first_fit_fill:.4f} "
        f"best_fit_fill={best_fit_fill:.4f}"
    )


if __name__ == "__main__":
    main()
