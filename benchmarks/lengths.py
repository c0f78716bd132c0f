"""Sampled-and-packed tokens/s of our grain loader vs grain's own first-fit pipeline.

Spec (docs/adr/0031): buckets [1..128 weight 3, 1024..2000 weight 1] at context 2048. Ours:
``PackedLoader`` (LengthSource -> RandomTokenProcessor -> FirstFitPackIterDataset ->
training rows -> batch). Baseline: grain alone on the same numpy source, i.e. the same
lengths (drawn up front with LengthSource) and the same counter-based tokens,
``FirstFitPackIterDataset`` with the same bins, then ``batch``. Both pack identical
rows (their fills must agree), so the ratio is our loader's overhead (the length
stream, labels and loss masks), not numpy against Python loops. The two sides run in
alternating rounds; medians and the spread are printed. Also the fill ratio (1 -
padding) of first-fit, best-fit and concat-then-split beside the best fill any
whole-document packing can reach here (docs/adr/0031): documents longer than half the
context can never share a row.

    .venv-worker/bin/python benchmarks/lengths.py [--rows 1200] [--rounds 3]

Last line: ``RESULT lengths tokens_per_s=X grain_tokens_per_s=G ratio_to_grain=X/G
rounds=R ours_spread=a..b grain_spread=c..d first_fit_fill=F fill_bound=U
best_fit_fill=B isa=I`` (I: the CPU's vector extensions, benchmarks/machine.py).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import grain  # noqa: E402
import numpy as np  # noqa: E402
from grain import experimental as gx  # noqa: E402
from machine import print_machine, result_line  # noqa: E402  (this folder is on sys.path)

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


def grain_first_fit(lengths: np.ndarray, rows: int) -> tuple[float, float]:
    """(tokens/s, fill) of grain's own first-fit pipeline on the same lengths and tokens."""
    processor = RandomTokenProcessor(VOCAB)
    # no reader threads: grain's advice for in-memory data, and ours runs none either
    docs = (grain.MapDataset.range(len(lengths))
            .map(lambda i: {"tokens": processor.tokens(i, int(lengths[i]))})
            .to_iter_dataset(grain.ReadOptions(num_threads=0, prefetch_buffer_size=0)))
    packed = gx.FirstFitPackIterDataset(docs, length_struct={"tokens": SEQ},
                                        num_packing_bins=BINS, shuffle_bins=False)
    batches = iter(packed.batch(BINS, drop_remainder=True))
    start = time.perf_counter()
    real = 0
    for _ in range(rows // BINS):
        real += int(np.count_nonzero(next(batches)["tokens_segment_ids"]))
    elapsed = time.perf_counter() - start
    return real / elapsed, real / ((rows // BINS) * BINS * SEQ)


def fill_upper_bound(lengths: np.ndarray) -> float:
    rows = max(int((lengths > SEQ // 2).sum()), -(-int(lengths.sum()) // SEQ))
    return float(lengths.sum() / (rows * SEQ))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1200)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print_machine()
    _, first_fit_fill, docs = ours(args.rows, "first_fit")  # untimed: warms up both
    # the same documents, with room for those first-fit still holds in open bins
    lengths = LengthSource(_source()).take(2 * docs + BINS)
    grain_first_fit(lengths, args.rows)
    runs: dict[str, list[float]] = {"ours": [], "grain": []}
    for _ in range(args.rounds):  # alternating: both sides see the same machine
        tps, fill, _ = ours(args.rows, "first_fit")
        runs["ours"].append(tps)
        grain_tps, grain_fill = grain_first_fit(lengths, args.rows)
        runs["grain"].append(grain_tps)
        if abs(fill - grain_fill) > 1e-9:
            sys.exit(f"the two pipelines packed different rows (fill {fill} vs {grain_fill})")
    _, best_fit_fill, _ = ours(args.rows, "best_fit")
    _, cts_fill, _ = ours(args.rows, "concat_then_split")
    bound = fill_upper_bound(LengthSource(_source()).take(docs))
    print_machine()
    tps, grain_tps = statistics.median(runs["ours"]), statistics.median(runs["grain"])
    spread = {side: f"{min(v):.0f}..{max(v):.0f}" for side, v in runs.items()}
    print(f"documents={docs} rows={args.rows} seq_len={SEQ} bins={BINS} rounds={args.rounds}")
    print(f"ours  first_fit tokens/s median={tps:,.0f} spread={spread['ours']}")
    print(f"grain first_fit tokens/s median={grain_tps:,.0f} spread={spread['grain']}")
    print(f"fill: first_fit={first_fit_fill:.4f} (grain's own: the same rows) "
          f"best_fit={best_fit_fill:.4f} concat_then_split={cts_fill:.4f}; "
          f"whole-document bound={bound:.4f} (docs/adr/0031)")
    print(result_line(
        "lengths", tokens_per_s=f"{tps:.0f}", grain_tokens_per_s=f"{grain_tps:.0f}",
        ratio_to_grain=f"{tps / grain_tps:.2f}", rounds=args.rounds,
        ours_spread=spread["ours"], grain_spread=spread["grain"],
        first_fit_fill=f"{first_fit_fill:.4f}", fill_bound=f"{bound:.4f}",
        best_fit_fill=f"{best_fit_fill:.4f}",
    ))


if __name__ == "__main__":
    main()
