"""Pack variable-length documents into fixed training rows with grain.

First-fit and best-fit keep every document whole (what SFT-style packing does and
what preserves the configured length distribution); concat-then-split re-chunks the
stream into full rows and splits documents at row edges, so it is offered for
comparison only. Rows come out as ``input_ids``, ``labels``, ``positions`` (restarting
at 0 per document, 0 on padding), ``segment_ids`` (1.. per document, 0 on padding)
and ``loss_mask`` (1 where the next token belongs to the same document).
"""

from __future__ import annotations

import numpy as np

from synthfactory.training.choice import Choice


class PackingStrategy(Choice, what="packing"):
    FIRST_FIT = "first_fit"
    BEST_FIT = "best_fit"
    CONCAT_THEN_SPLIT = "concat_then_split"


def pack(ds, strategy: PackingStrategy | str, seq_len: int, num_packing_bins: int = 16):
    """Wrap a grain IterDataset of ``{"tokens": int32[L]}`` into packed training rows."""
    from grain import experimental as gx

    strategy = PackingStrategy.parse(strategy)
    lengths = {"tokens": seq_len}
    if strategy is PackingStrategy.CONCAT_THEN_SPLIT:
        packed = gx.ConcatThenSplitIterDataset(ds, length_struct=lengths)
    else:
        cls = (
            gx.FirstFitPackIterDataset
            if strategy is PackingStrategy.FIRST_FIT
            else gx.BestFitPackIterDataset
        )
        # No bin shuffling: row order is already random and stays easy to reason about.
        packed = cls(ds, length_struct=lengths, num_packing_bins=num_packing_bins,
                     shuffle_bins=False)
    return packed.map(training_row)


def training_row(packed: dict) -> dict:
    """grain's packed features -> the row the model trains on (next-token labels)."""
    tokens = np.asarray(packed["tokens"], dtype=np.int64)
    segments = np.asarray(packed["tokens_segment_ids"], dtype=np.int32)
    labels = np.zeros_like(tokens)
    labels[:-1] = tokens[1:]
    # A position predicts the next token only if that token is in the same document:
    # no loss across a document boundary, none on padding, none at the row's end.
    mask = np.zeros(tokens.shape, dtype=np.float32)
    mask[:-1] = (segments[:-1] > 0) & (segments[:-1] == segments[1:])
    return {
        "input_ids": tokens,
        "labels": labels,
        "positions": np.asarray(packed["tokens_positions"], dtype=np.int64),
        "segment_ids": segments,
        "loss_mask": mask,
    }
