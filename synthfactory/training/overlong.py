"""What happens to a document longer than the training context: an explicit choice.

Dropping keeps every surviving document whole but biases the length distribution
toward short documents; truncating keeps the count but piles mass at the context
length. Neither is silent: both are counted and reported in the summary.
"""

from __future__ import annotations

from enum import StrEnum

import numpy as np

from synthfactory.errors import SynthfactoryError


class OverlongPolicy(StrEnum):
    DROP = "drop"
    TRUNCATE = "truncate"

    @classmethod
    def parse(cls, value: str | OverlongPolicy) -> OverlongPolicy:
        try:
            return cls(value)
        except ValueError as exc:
            raise SynthfactoryError(
                f"overlong policy {value!r}: use one of {[p.value for p in cls]}"
            ) from exc


def apply_policy(
    lengths: np.ndarray, max_len: int, policy: OverlongPolicy
) -> tuple[np.ndarray, int, int]:
    """Vectorised policy: (kept lengths, dropped count, truncated count)."""
    over = lengths > max_len
    n_over = int(over.sum())
    if not n_over:
        return lengths, 0, 0
    if policy is OverlongPolicy.DROP:
        return lengths[~over], n_over, 0
    return np.minimum(lengths, max_len), 0, n_over
