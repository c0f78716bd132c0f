"""Content checksums that tie a shard's outputs to the prompts they were generated from.

The prompt checksum hashes what the engine saw, row by row in shard order (the parts
refer to rows by index, so order is content too). It is computed from the values, not
the file bytes: a rerun of ``stitch`` that writes the same prompts in a different
parquet layout keeps its committed shards. The output checksum hashes every
generated and quarantined row by row index, and every attempt by row and attempt, so a
part edited or swapped after the commit is caught by ``audit``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable

import pyarrow as pa

# What decides a row's generation; `prompt_tokens` (an estimate) and `style` do not, nor
# `template_hash`: system and user already hold the template's text (docs/adr/0114).
PROMPT_FIELDS = ("id", "template_id", "template_version", "system", "user", "max_new_tokens")
OUTPUT_FIELDS = ("row", "id", "template_id", "output_text", "reason")
ATTEMPT_FIELDS = ("row", "attempt", "id", "template_id", "output_text", "finish_reason",
                  "reasons", "repair", "chosen", "sampling")
REPLAY_FIELDS = ("request_key", "replayed_from")  # docs/adr/0150
_PREFIX = "sha256:"


def prompt_checksum(prompts: pa.Table) -> str:
    fields = [f for f in PROMPT_FIELDS if f in prompts.column_names]
    columns = [prompts.column(f).to_pylist() for f in fields]
    digest = hashlib.sha256(json.dumps(fields).encode())
    for row in zip(*columns, strict=True):
        digest.update(json.dumps(row, ensure_ascii=False, default=str).encode() + b"\n")
    return _PREFIX + digest.hexdigest()


def output_checksum(generated: Iterable[pa.Table], quarantined: Iterable[pa.Table],
                    attempts: Iterable[pa.Table] = ()) -> str:
    """Over all rows of a shard's parts, generated and quarantined, sorted by row index,
    then its attempts by row and attempt (none: the checksum of a shard from before
    attempts were kept, unchanged)."""
    rows: list[tuple] = []
    for table, kind in [(t, "generated") for t in generated] + [
        (t, "quarantined") for t in quarantined
    ]:
        cols = {f: table.column(f).to_pylist() if f in table.column_names else None
                for f in OUTPUT_FIELDS}
        for i in range(table.num_rows):
            rows.append((kind, *[(cols[f][i] if cols[f] is not None else None)
                                 for f in OUTPUT_FIELDS]))
    rows.sort(key=lambda r: (r[1], r[0]))
    digest = hashlib.sha256()
    for row in rows:
        digest.update(json.dumps(row, ensure_ascii=False).encode() + b"\n")
    tried = sorted(
        tuple(row[f] for f in ATTEMPT_FIELDS)
        # the replay columns only where set: a shard from before them hashes as it did
        + tuple((f, row[f]) for f in REPLAY_FIELDS if row.get(f) is not None)
        for table in attempts for row in table.select(
            [*ATTEMPT_FIELDS, *(f for f in REPLAY_FIELDS if f in table.column_names)]
        ).to_pylist())
    for row in tried:
        digest.update(b"attempt" + json.dumps(row, ensure_ascii=False).encode() + b"\n")
    return _PREFIX + digest.hexdigest()
