"""Token processors, grain packing invariants and the loader's state round trip."""

from __future__ import annotations

import numpy as np
import pytest

from synthfactory.errors import SynthfactoryError
from synthfactory.training.length_source import LengthSource, LengthSourceConfig
from synthfactory.training.lengths import spec_from_dict
from synthfactory.training.loader import (
    LoaderConfig,
    PackedLoader,
    real_documents,
    synthetic_documents,
)
from synthfactory.training.token_processors import ConstantTokenProcessor, RandomTokenProcessor

SEQ = 256
SPEC = spec_from_dict({"type": "buckets", "buckets": [
    {"min_len": 1, "max_len": 40, "weight": 3.0},
    {"min_len": 120, "max_len": 250, "weight": 1.0},
]})


def _loader(packing="first_fit", seed=0, batch_size=4, processor=None) -> PackedLoader:
    source = LengthSourceConfig(SPEC, max_len=SEQ, seed=seed, chunk_size=50)
    processor = processor or RandomTokenProcessor(vocab_size=1000, seed=seed)
    return PackedLoader(
        synthetic_documents(source, processor),
        LoaderConfig(seq_len=SEQ, batch_size=batch_size, packing=packing, num_packing_bins=8),
    )


def _documents(batch: dict) -> list[np.ndarray]:
    """Split each row back into its documents by segment id."""
    docs = []
    for row in range(batch["input_ids"].shape[0]):
        seg = batch["segment_ids"][row]
        for s in range(1, int(seg.max()) + 1):
            docs.append(batch["input_ids"][row][seg == s])
    return docs


def fill_ratio(rows: dict) -> float:
    """Share of row cells holding a document token (1 - padding waste)."""
    segments = rows["segment_ids"]
    return float(np.count_nonzero(segments) / segments.size)


def test_random_tokens_cover_the_vocab_and_are_reproducible():
    proc = RandomTokenProcessor(vocab_size=50, seed=1)
    tokens = proc.tokens(index=3, length=5000)
    assert tokens.min() == 0 and tokens.max() == 49
    counts = np.bincount(tokens, minlength=50)
    assert counts.min() > 50  # roughly uniform (mean 100)
    assert np.array_equal(tokens, proc.tokens(index=3, length=5000))
    assert not np.array_equal(tokens[:100], proc.tokens(index=4, length=100))
    other_rank = RandomTokenProcessor(50, seed=1, dp_rank=1)
    assert not np.array_equal(tokens[:100], other_rank.tokens(3, 100))


def test_constant_tokens_and_bad_processor_settings():
    assert set(ConstantTokenProcessor(7, vocab_size=10).tokens(0, 9).tolist()) == {7}
    with pytest.raises(SynthfactoryError, match="token_id 10"):
        ConstantTokenProcessor(10, vocab_size=10)
    with pytest.raises(SynthfactoryError, match="vocab_size 1"):
        RandomTokenProcessor(vocab_size=1)


@pytest.mark.parametrize("packing", ["first_fit", "best_fit"])
def test_packing_keeps_every_document_whole_and_rows_well_formed(packing):
    loader = _loader(packing)
    batches = [next(loader) for _ in range(6)]
    # The same draws, unpacked: every document must appear whole, in some row.
    expected_source = LengthSource(LengthSourceConfig(SPEC, max_len=SEQ, chunk_size=50))
    proc = RandomTokenProcessor(vocab_size=1000)
    packed_docs = [d for b in batches for d in _documents(b)]
    n = len(packed_docs)
    expected = {tuple(proc.tokens(i, length)) for i, length in (next(expected_source)
                                                                for _ in range(n + 40))}
    assert all(tuple(d) in expected for d in packed_docs)
    for b in batches:
        assert b["input_ids"].shape == (4, SEQ)
        pad = b["segment_ids"] == 0
        assert np.all(b["positions"][pad] == 0) and np.all(b["input_ids"][pad] == 0)
        assert np.all(b["loss_mask"][pad] == 0)
        for row in range(4):
            seg, pos = b["segment_ids"][row], b["positions"][row]
            for s in range(1, int(seg.max()) + 1):
                cells = np.flatnonzero(seg == s)
                assert np.array_equal(cells, np.arange(cells[0], cells[0] + cells.size))
                assert np.array_equal(pos[cells], np.arange(cells.size))  # restart at 0
                # Loss on every token but the document's last; labels are the next token.
                assert b["loss_mask"][row][cells[:-1]].all() and not b["loss_mask"][row][cells[-1]]
                assert np.array_equal(b["labels"][row][cells[:-1]], b["input_ids"][row][cells[1:]])


def test_concat_then_split_fills_rows_but_splits_documents():
    loader = _loader("concat_then_split")
    batch = next(loader)
    assert fill_ratio(batch) == 1.0
    whole = _loader("first_fit")
    assert fill_ratio(next(whole)) < 1.0


def test_loader_state_round_trip_yields_the_same_batches():
    loader = _loader(seed=5)
    for _ in range(3):
        next(loader)
    state = loader.get_state()
    expected = [next(loader) for _ in range(3)]
    restored = _loader(seed=5)
    restored.set_state(state)
    for want in expected:
        got = next(restored)
        for key in want:
            assert np.array_equal(got[key], want[key]), key
    assert restored.source_counts() == loader.source_counts()


def test_loader_reports_drops_from_the_source():
    source = LengthSourceConfig(SPEC, max_len=100, overlong="drop")
    loader = PackedLoader(
        synthetic_documents(source, ConstantTokenProcessor(vocab_size=10)),
        LoaderConfig(seq_len=100, batch_size=2),
    )
    batch = next(loader)
    counts = loader.source_counts()
    assert counts["dropped"] > 0 and counts["truncated"] == 0
    assert max(len(d) for d in _documents(batch)) <= 40  # only short bucket survives


def test_real_documents_are_sharded_by_rank():
    docs = [np.full(3, i, dtype=np.int32) for i in range(10)]
    seen = {}
    for rank in (0, 1):
        it = iter(real_documents(docs, seed=0, dp_rank=rank, dp=2))
        seen[rank] = {int(next(it)["tokens"][0]) for _ in range(5)}
    assert seen[0] == {0, 2, 4, 6, 8} and seen[1] == {1, 3, 5, 7, 9}
    with pytest.raises(SynthfactoryError, match="dp_rank 2"):
        real_documents(docs, seed=0, dp_rank=2, dp=2)
