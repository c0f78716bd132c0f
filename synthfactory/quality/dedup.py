"""Exact and near-duplicate outputs within one table: the first of each cluster is kept.

Exact: the same words after lower-casing and collapsing whitespace. Near: datasketch's
MinHash LSH over word 3-grams finds candidates, and their estimated Jaccard similarity
must reach the threshold (default 0.8: near-identical outputs of different inputs, the
diversity loss FinePhrase and BeyondWeb warn of).
"""

from __future__ import annotations

import hashlib

NUM_PERM = 128
SHINGLE = 3
JACCARD = 0.8


def _minhash(tokens: list[str]):
    from datasketch import MinHash

    minhash = MinHash(num_perm=NUM_PERM)
    shingles = {" ".join(tokens[i:i + SHINGLE]) for i in range(len(tokens) - SHINGLE + 1)}
    minhash.update_batch([s.encode() for s in shingles or {" ".join(tokens)}])
    return minhash


def duplicates(token_lists: list[list[str]], jaccard: float = JACCARD,
               candidates: list[bool] | None = None) -> list[bool]:
    """True for each row whose output repeats an earlier kept row's (row order).
    ``candidates``: rows to consider at all (e.g. non-empty ones); others are False."""
    considered = sum(1 for i, tokens in enumerate(token_lists)
                     if tokens and (candidates is None or candidates[i]))
    if considered < 2:  # nothing to repeat: skip datasketch (and scipy) altogether
        return [False] * len(token_lists)
    # Imported here: ~0.35 s of scipy a process, paid only by a table that needs it.
    from datasketch import MinHashLSH

    seen: set[str] = set()
    lsh = MinHashLSH(threshold=jaccard, num_perm=NUM_PERM)
    kept: dict[str, object] = {}
    flags = []
    for i, tokens in enumerate(token_lists):
        if (candidates is not None and not candidates[i]) or not tokens:
            flags.append(False)
            continue
        digest = hashlib.sha1(" ".join(tokens).encode()).hexdigest()
        if digest in seen:
            flags.append(True)
            continue
        minhash = _minhash(tokens)
        if len(tokens) >= SHINGLE and any(  # LSH buckets are candidates, not verdicts
                kept[key].jaccard(minhash) >= jaccard for key in lsh.query(minhash)):
            flags.append(True)
            continue
        seen.add(digest)
        if len(tokens) >= SHINGLE:
            lsh.insert(str(i), minhash)
            kept[str(i)] = minhash
        flags.append(False)
    return flags
