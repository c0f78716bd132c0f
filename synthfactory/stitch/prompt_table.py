"""A prompt shard table in the contract's schema (docs/contracts.md), built in one
process: for samples, benchmarks and tests. The Spark job writes the same columns."""

from __future__ import annotations

import pyarrow as pa

from synthfactory.stitch.templates import PromptTemplate

PROMPT_SCHEMA = pa.schema([
    ("id", pa.string()), ("template_id", pa.string()), ("template_version", pa.int32()),
    ("template_hash", pa.string()), ("style", pa.string()), ("system", pa.string()),
    ("user", pa.string()), ("prompt_tokens", pa.int64()), ("max_new_tokens", pa.int32()),
    ("doc_id", pa.string()), ("chunk_index", pa.int32()), ("chunk_count", pa.int32()),
    ("title", pa.string()), ("heading_path", pa.list_(pa.string())),
    ("source_tokens", pa.int64()), ("domain", pa.string()),
])


def prompt_table(template: PromptTemplate, ids: list[str], documents: list[str],
                 max_new_tokens: int, prompt_tokens: list[int] | None = None,
                 source_tokens: list[int] | None = None,
                 domains: list[str] | None = None) -> pa.Table:
    """One prompt row per document, all with ``template``, each document in one piece
    (no chunks). Token counts default to 0 (not counted): ``prompt_tokens`` the estimate,
    ``source_tokens`` the document's own tokens (stitch's count, without the template);
    ``domains`` each document's domain (default: detected from its text, as stitch does)."""
    from synthfactory.stitch.routing import detect_domain

    n = len(ids)
    return pa.table({
        "id": ids,
        "template_id": [template.id] * n,
        "template_version": [template.version] * n,
        "template_hash": [template.hash] * n,
        "style": [template.style] * n,
        "system": [template.system] * n,
        "user": [template.render_user(d) for d in documents],
        "prompt_tokens": prompt_tokens if prompt_tokens is not None else [0] * n,
        "max_new_tokens": [max_new_tokens] * n,
        "doc_id": ids,
        "chunk_index": [0] * n,
        "chunk_count": [1] * n,
        "title": [None] * n,
        "heading_path": [None] * n,
        "source_tokens": source_tokens if source_tokens is not None else [0] * n,
        "domain": domains if domains is not None else [detect_domain(d) for d in documents],
    }, schema=PROMPT_SCHEMA)
