"""Figures for a length spec without training: percentiles, histogram, DP balance.

The DP-balance simulation runs the real loader (same sources, policy and packing as
training, with constant tokens because only lengths matter), one loader per rank, and
measures the tokens each rank gets at each step: a spec whose ranks stay unbalanced
here will make the fastest ranks wait for the slowest in a real job.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from synthfactory.training.length_source import LengthSource, LengthSourceConfig
from synthfactory.training.lengths import LengthSpec
from synthfactory.training.overlong import OverlongPolicy

HIST_BINS = 20
_BAR = 40


def length_stats(lengths: np.ndarray) -> dict:
    p50, p90, p99 = np.percentile(lengths, [50, 90, 99])
    return {
        "count": int(lengths.size),
        "min": int(lengths.min()),
        "p50": round(float(p50), 3),
        "p90": round(float(p90), 3),
        "p99": round(float(p99), 3),
        "max": int(lengths.max()),
        "mean": round(float(lengths.mean()), 3),
        "total_tokens": int(lengths.sum()),
    }


def histogram(lengths: np.ndarray, bins: int = HIST_BINS) -> list[dict]:
    counts, edges = np.histogram(lengths, bins=bins)
    return [
        {"lo": float(edges[i]), "hi": float(edges[i + 1]), "count": int(c)}
        for i, c in enumerate(counts)
    ]


def text_histogram(hist: list[dict]) -> str:
    peak = max(h["count"] for h in hist) or 1
    return "\n".join(
        f"{h['lo']:>9.0f} - {h['hi']:>9.0f} | {'#' * round(_BAR * h['count'] / peak):<{_BAR}} "
        f"{h['count']}"
        for h in hist
    )


@dataclass(frozen=True)
class BalanceConfig:
    seq_len: int = 2048
    dp: int = 8
    per_rank_batch: int = 4
    steps: int = 50
    seed: int = 0
    overlong: OverlongPolicy = OverlongPolicy.DROP
    packing: str = "first_fit"


def dp_balance(spec: LengthSpec, cfg: BalanceConfig) -> dict:
    """Tokens per rank per step through the packed loader, and how uneven they are."""
    from synthfactory.training.loader import LoaderConfig, PackedLoader, synthetic_documents
    from synthfactory.training.token_processors import ConstantTokenProcessor

    tokens = np.zeros((cfg.steps, cfg.dp))
    attention = np.zeros((cfg.steps, cfg.dp))  # sum of doc_len**2: causal attention cost
    dropped = truncated = 0
    for rank in range(cfg.dp):
        source = LengthSourceConfig(
            spec, max_len=cfg.seq_len, seed=cfg.seed, dp_rank=rank, overlong=cfg.overlong
        )
        loader = PackedLoader(
            synthetic_documents(source, ConstantTokenProcessor()),
            LoaderConfig(seq_len=cfg.seq_len, batch_size=cfg.per_rank_batch, packing=cfg.packing),
        )
        for step in range(cfg.steps):
            segments = next(loader)["segment_ids"]
            tokens[step, rank] = np.count_nonzero(segments)
            _, doc_lens = np.unique(_row_offsets(segments), return_counts=True)
            attention[step, rank] = float(np.sum(doc_lens.astype(np.float64) ** 2))
        counts = loader.source_counts()
        dropped += counts["dropped"]
        truncated += counts["truncated"]
    capacity = cfg.steps * cfg.dp * cfg.per_rank_batch * cfg.seq_len
    per_rank = tokens.sum(axis=0)
    return {
        "dp": cfg.dp,
        "per_rank_batch": cfg.per_rank_batch,
        "steps": cfg.steps,
        "seq_len": cfg.seq_len,
        "max_over_mean": round(float(per_rank.max() / per_rank.mean()), 4),
        "worst_step_max_over_mean": round(float(_worst(tokens)), 4),
        "attention_worst_step_max_over_mean": round(float(_worst(attention)), 4),
        "padding_waste_fraction": round(1.0 - float(tokens.sum()) / capacity, 4),
        "dropped": dropped,
        "truncated": truncated,
    }


def _row_offsets(segments: np.ndarray) -> np.ndarray:
    """A unique id per (row, document) cell; padding cells map to -1 and are ignored."""
    rows = np.arange(segments.shape[0])[:, None] * (int(segments.max()) + 1)
    ids = np.where(segments > 0, rows + segments, -1)
    return ids[ids >= 0]


def _worst(per_step_rank: np.ndarray) -> float:
    means = per_step_rank.mean(axis=1)
    ok = means > 0
    return float((per_step_rank.max(axis=1)[ok] / means[ok]).max()) if ok.any() else 0.0


def draw_lengths(spec: LengthSpec, samples: int, seed: int = 0) -> np.ndarray:
    """Raw draws of rank 0 (before any policy), as training would draw them."""
    # A context larger than any draw disables the policy here; it is reported apart.
    cfg = LengthSourceConfig(spec, max_len=np.iinfo(np.int64).max, seed=seed, dp_rank=0)
    return LengthSource(cfg).take(samples)


def write_png(lengths: np.ndarray, seq_len: int, title: str, url: str) -> None:
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from synthfactory import storage

    fig, ax = plt.subplots(figsize=(8, 4), dpi=100)
    ax.hist(lengths, bins=50, color="#4c72b0")
    ax.axvline(seq_len, color="#c44e52", linestyle="--", label=f"seq_len {seq_len}")
    ax.set_xlabel("document length (tokens)")
    ax.set_ylabel("documents")
    ax.set_title(title)
    ax.legend()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight")
    plt.close(fig)
    storage.write_bytes(url, buf.getvalue())
