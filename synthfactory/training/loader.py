"""The training loader: a grain pipeline from documents to packed batches.

    lengths (LengthSource) -> tokens (processor) -> pack (grain) -> batch (grain)
    or real token documents (MapDataset, sharded by rank) -> pack -> batch

``get_state``/``set_state`` is grain's iterator state, so a restored loader yields the
same next batches. Imports grain: only the smoke and preview commands import this.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import grain
import numpy as np

from synthfactory.errors import SynthfactoryError
from synthfactory.training.length_source import LengthSource, LengthSourceConfig
from synthfactory.training.packing import PackingStrategy, pack


class _LengthIterator(grain.DatasetIterator):
    def __init__(self, config: LengthSourceConfig):
        super().__init__()
        self.source = LengthSource(config)

    def __next__(self) -> dict:
        index, length = next(self.source)
        return {"index": index, "length": length}

    def get_state(self) -> dict:
        return self.source.get_state()

    def set_state(self, state: dict) -> None:
        self.source.set_state(state)


class LengthIterDataset(grain.IterDataset):
    """grain face of :class:`LengthSource`: an endless stream of {index, length}."""

    def __init__(self, config: LengthSourceConfig):
        super().__init__()
        self.config = config

    def __iter__(self) -> _LengthIterator:
        return _LengthIterator(self.config)


def synthetic_documents(config: LengthSourceConfig, processor: Callable[[dict], dict]):
    return LengthIterDataset(config).map(processor)


def real_documents(docs: Sequence[np.ndarray], *, seed: int, dp_rank: int, dp: int):
    """Token documents (already within the context) for one rank, endlessly, shuffled."""
    if not 0 <= dp_rank < dp:
        raise SynthfactoryError(f"dp_rank {dp_rank}: must be in [0, dp={dp})")
    shard = grain.MapDataset.source(list(docs))[dp_rank::dp]
    if len(shard) == 0:
        raise SynthfactoryError(f"rank {dp_rank} of {dp}: no documents left for this rank")
    return (
        shard.shuffle(seed=seed).repeat().to_iter_dataset().map(lambda t: {"tokens": t})
    )


@dataclass(frozen=True)
class LoaderConfig:
    seq_len: int = 128
    batch_size: int = 4
    packing: PackingStrategy = PackingStrategy.FIRST_FIT
    num_packing_bins: int = 16

    def __post_init__(self) -> None:
        object.__setattr__(self, "packing", PackingStrategy.parse(self.packing))
        for name in ("seq_len", "batch_size", "num_packing_bins"):
            if getattr(self, name) < 1:
                raise SynthfactoryError(f"{name} {getattr(self, name)}: must be >= 1")


class PackedLoader:
    """Iterator of batches: dicts of (batch_size, seq_len) numpy arrays."""

    def __init__(self, documents, config: LoaderConfig):
        self.config = config
        rows = pack(documents, config.packing, config.seq_len, config.num_packing_bins)
        self._iter = iter(rows.batch(config.batch_size, drop_remainder=True))

    def __iter__(self) -> PackedLoader:
        return self

    def __next__(self) -> dict:
        return next(self._iter)

    def get_state(self) -> dict:
        return self._iter.get_state()

    def set_state(self, state: dict) -> None:
        self._iter.set_state(state)

    def source_counts(self) -> dict:
        """Drawn/dropped/truncated counts of a synthetic source (empty for real docs)."""
        it = self._iter
        while it._parents:  # grain keeps the upstream iterators here
            it = it._parents[0]
        if isinstance(it, _LengthIterator):
            s = it.source
            return {"documents": s.emitted, "dropped": s.dropped, "truncated": s.truncated}
        return {}
