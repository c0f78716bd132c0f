"""Smoke-test training tokens/s on a GPU (or the CPU), self-contained for a borrowed box.

The GPU machine has torch but maybe neither grain nor pyarrow: this script needs only
torch and numpy plus this repository's ``synthfactory/training`` modules (on sys.path
from the checkout). With grain it uses the real loader; without it, the same length
source, token processor and row format packed first-fit by a small numpy loop.

    python benchmarks/gpu_smoke.py                      # cuda if present, H200-sized
    python benchmarks/gpu_smoke.py --device cpu --seq-len 128 --batch-size 4 \
        --d-model 64 --layers 2 --steps 5                # a quick check without a GPU

Last line: ``RESULT gpu_smoke device=D tokens_per_s=X loss_first=A loss_last=B
padding_waste=W params=P loader=L isa=I`` (I: the CPU's vector extensions,
benchmarks/machine.py; ``machine: isa=I load ...`` lines come before and after training).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
from machine import print_machine, result_line  # noqa: E402  (this folder is on sys.path)

from synthfactory.training.length_source import LengthSource, LengthSourceConfig  # noqa: E402
from synthfactory.training.lengths import spec_from_dict  # noqa: E402
from synthfactory.training.packing import training_row  # noqa: E402
from synthfactory.training.smoke import SmokeConfig, train  # noqa: E402
from synthfactory.training.tiny_model import TinyModelConfig  # noqa: E402
from synthfactory.training.token_processors import RandomTokenProcessor  # noqa: E402


def _numpy_batches(source_cfg, processor, seq_len: int, batch_size: int):
    """First-fit into ``batch_size`` open rows; emit them when a document fits none."""
    source = LengthSource(source_cfg)
    pending = None
    while True:
        rows = [[] for _ in range(batch_size)]
        used = [0] * batch_size
        while True:
            index, length = pending if pending else next(source)
            pending = None
            row = next((i for i in range(batch_size) if used[i] + length <= seq_len), None)
            if row is None:
                pending = (index, length)
                break
            rows[row].append(processor.tokens(index, length))
            used[row] += length
        yield _stack([_row(docs, seq_len) for docs in rows])


def _row(docs: list[np.ndarray], seq_len: int) -> dict:
    tokens = np.zeros(seq_len, np.int32)
    seg = np.zeros(seq_len, np.int32)
    pos = np.zeros(seq_len, np.int32)
    start = 0
    for s, doc in enumerate(docs, 1):
        end = start + doc.size
        tokens[start:end], seg[start:end], pos[start:end] = doc, s, np.arange(doc.size)
        start = end
    return training_row({"tokens": tokens, "tokens_segment_ids": seg, "tokens_positions": pos})


def _stack(rows: list[dict]) -> dict:
    return {k: np.stack([r[k] for r in rows]) for k in rows[0]}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--device", default="auto")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--seq-len", type=int, default=2048)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--vocab-size", type=int, default=49152)
    p.add_argument("--d-model", type=int, default=512)
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--lr", type=float, default=1e-3)
    args = p.parse_args()
    # The packing benchmark's spec (docs/adr/0031), scaled to the context so nothing is
    # dropped.
    spec = spec_from_dict({"type": "buckets", "buckets": [
        {"min_len": 1, "max_len": max(1, args.seq_len // 16), "weight": 3.0},
        {"min_len": args.seq_len // 2, "max_len": args.seq_len - 48, "weight": 1.0},
    ]})
    source = LengthSourceConfig(spec, max_len=args.seq_len, seed=0)
    processor = RandomTokenProcessor(args.vocab_size)
    try:
        from synthfactory.training.loader import LoaderConfig, PackedLoader, synthetic_documents

        batches = PackedLoader(synthetic_documents(source, processor),
                               LoaderConfig(seq_len=args.seq_len, batch_size=args.batch_size))
        loader = "grain"
    except ImportError:
        batches = _numpy_batches(source, processor, args.seq_len, args.batch_size)
        loader = "numpy"
    model = TinyModelConfig(vocab_size=args.vocab_size, max_seq_len=args.seq_len,
                            d_model=args.d_model, n_layers=args.layers, n_heads=args.heads)
    print_machine()
    out = train(model, batches, SmokeConfig(steps=args.steps, lr=args.lr, device=args.device))
    print_machine()
    print(out)
    print(result_line("gpu_smoke", device=out["device"], tokens_per_s=out["tokens_per_s"],
                      loss_first=out["loss_first"], loss_last=out["loss_last"],
                      padding_waste=out["padding_waste_fraction"], params=out["params"],
                      loader=loader))


if __name__ == "__main__":
    main()
