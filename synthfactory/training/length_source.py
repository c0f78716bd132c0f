"""A seeded, rank-aware, chunked stream of document lengths with an exact resume.

Chunk ``c`` of rank ``r`` is drawn from ``default_rng([seed, r, c])``: the chunk is a
pure function of (seed, rank, chunk index), so the state is four small integers
(chunk, offset, counters) rather than a pickled generator, and resuming regenerates
the current chunk and skips ``offset`` draws — exact, also across a chunk boundary.
Drawing a chunk at a time keeps numpy vectorised; only the policy check is per item.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from synthfactory.errors import SynthfactoryError
from synthfactory.training.lengths import LengthSpec
from synthfactory.training.overlong import OverlongPolicy


@dataclass(frozen=True)
class LengthSourceConfig:
    spec: LengthSpec
    max_len: int  # the training context: longer draws meet the overlong policy
    seed: int = 0
    dp_rank: int = 0
    chunk_size: int = 4096
    overlong: OverlongPolicy = OverlongPolicy.DROP

    def __post_init__(self) -> None:
        if self.max_len < 1:
            raise SynthfactoryError(f"max_len {self.max_len}: must be >= 1")
        if self.dp_rank < 0:
            raise SynthfactoryError(f"dp_rank {self.dp_rank}: must be >= 0")
        if self.chunk_size < 1:
            raise SynthfactoryError(f"chunk_size {self.chunk_size}: must be >= 1")
        object.__setattr__(self, "overlong", OverlongPolicy.parse(self.overlong))
        if self.overlong is OverlongPolicy.DROP and self.spec.min_len > self.max_len:
            # Every draw would be dropped: the stream would spin forever.
            raise SynthfactoryError(
                f"length spec: shortest length {self.spec.min_len} exceeds the context "
                f"{self.max_len}, so the drop policy would drop everything"
            )


class LengthSource:
    """Infinite iterator of (document index, length); ``get_state``/``set_state``."""

    def __init__(self, config: LengthSourceConfig):
        self.config = config
        self._chunk_index = 0
        self._offset = 0
        self.emitted = 0
        self.dropped = 0
        self.truncated = 0
        self._chunk = self._draw(0)

    def _draw(self, chunk_index: int) -> np.ndarray:
        c = self.config
        rng = np.random.default_rng([c.seed, c.dp_rank, chunk_index])
        return c.spec.sample(rng, c.chunk_size)

    def __iter__(self) -> LengthSource:
        return self

    def __next__(self) -> tuple[int, int]:
        max_len, drop = self.config.max_len, self.config.overlong is OverlongPolicy.DROP
        while True:
            if self._offset >= self._chunk.size:
                self._chunk_index += 1
                self._offset = 0
                self._chunk = self._draw(self._chunk_index)
            length = int(self._chunk[self._offset])
            self._offset += 1
            if length > max_len:
                if drop:
                    self.dropped += 1
                    continue
                self.truncated += 1
                length = max_len
            index = self.emitted
            self.emitted += 1
            return index, length

    def take(self, n: int) -> np.ndarray:
        return np.fromiter((next(self)[1] for _ in range(n)), dtype=np.int64, count=n)

    def get_state(self) -> dict:
        return {
            "chunk": self._chunk_index,
            "offset": self._offset,
            "emitted": self.emitted,
            "dropped": self.dropped,
            "truncated": self.truncated,
        }

    def set_state(self, state: dict) -> None:
        if state["chunk"] != self._chunk_index:
            self._chunk = self._draw(state["chunk"])
        self._chunk_index = state["chunk"]
        self._offset = state["offset"]
        self.emitted = state["emitted"]
        self.dropped = state["dropped"]
        self.truncated = state["truncated"]
