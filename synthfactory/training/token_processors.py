"""Turn a drawn length into token ids.

Tokens are a pure function of (seed, rank, document index, position): a counter-based
hash (splitmix64's finaliser) instead of a stateful generator, so a resumed loader
yields the very same tokens without storing any generator state, and a document costs
a few vectorised numpy operations.

``ConstantTokenProcessor`` is for throughput and memory checks only: every token is
the same, so a mixture-of-experts router sends everything to the same experts and the
model learns to predict it in a few steps; MoE load-balance and routing tests need
real data (``smoke --run URL --real-tokens``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from synthfactory.errors import SynthfactoryError

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


def _splitmix64(x: np.ndarray) -> np.ndarray:
    x = x + _GOLDEN
    x = (x ^ (x >> np.uint64(30))) * _M1
    x = (x ^ (x >> np.uint64(27))) * _M2
    return x ^ (x >> np.uint64(31))


@dataclass(frozen=True)
class RandomTokenProcessor:
    """Uniform token ids in [0, vocab_size), reproducible per document."""

    vocab_size: int
    seed: int = 0
    dp_rank: int = 0

    def __post_init__(self) -> None:
        if self.vocab_size < 2:
            raise SynthfactoryError(f"vocab_size {self.vocab_size}: must be >= 2")

    def tokens(self, index: int, length: int) -> np.ndarray:
        key = _splitmix64(np.array([self.seed, self.dp_rank, index], dtype=np.uint64))
        base = np.uint64(key[0] ^ (key[1] << np.uint64(1)) ^ (key[2] << np.uint64(2)))
        with np.errstate(over="ignore"):
            counters = np.arange(length, dtype=np.uint64) * _GOLDEN + base
            mixed = _splitmix64(counters)
        return (mixed % np.uint64(self.vocab_size)).astype(np.int32)

    def __call__(self, element: dict) -> dict:
        return {"tokens": self.tokens(element["index"], element["length"])}


@dataclass(frozen=True)
class ConstantTokenProcessor:
    """The same token everywhere. Unfit for MoE routing tests (see module doc)."""

    token_id: int = 0
    vocab_size: int = 49152

    def __post_init__(self) -> None:
        if not 0 <= self.token_id < self.vocab_size:
            raise SynthfactoryError(
                f"token_id {self.token_id}: must be in [0, vocab_size={self.vocab_size})"
            )

    def tokens(self, index: int, length: int) -> np.ndarray:
        return np.full(length, self.token_id, dtype=np.int32)

    def __call__(self, element: dict) -> dict:
        return {"tokens": self.tokens(element["index"], element["length"])}
