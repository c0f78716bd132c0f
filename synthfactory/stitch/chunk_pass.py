"""Long documents cut into chunk rows inside the stitch Spark job (ADR 0134): the largest
chunk a template takes, the executors' cutting, the chunk ids and their check. Separate
from chunks.py (how one text is split, no Spark) and from job.py (the plan around it)."""

from __future__ import annotations

from functools import partial

import pyarrow as pa

from synthfactory.contract.flag_types import AUTO
from synthfactory.errors import SynthfactoryError
from synthfactory.stitch import budget, chunks, tokens
from synthfactory.stitch.config import StitchConfig

CHUNK_ID_SEPARATOR = "#"  # a chunk row's id: {document id}#{chunk index}
CHUNK_SCHEMA = pa.schema([
    ("id", pa.string()), ("chunk_index", pa.int32()), ("chunk_count", pa.int32()),
    ("text", pa.string()), ("chunk_tokens", pa.int64()), ("title", pa.string()),
    ("heading_path", pa.list_(pa.string())), ("context", pa.string()),
    ("context_tokens", pa.int64()), ("source", pa.string()), ("source_row", pa.int64()),
    ("reason", pa.string())])
CHUNK_DDL = ("id string, chunk_index int, chunk_count int, text string, chunk_tokens long, "
             "title string, heading_path array<string>, context string, context_tokens long, "
             "source string, source_row long, reason string")


def chunk_limit(cfg: StitchConfig, overhead: int, ratio: float) -> int:
    """The largest chunk a template takes: its prompt (``overhead``, the chunk's context
    included) and its full budget fit the window (stitch/chunks.py)."""
    if cfg.max_new_tokens == AUTO:
        return chunks.max_chunk_tokens(cfg.max_model_len, overhead, ratio=ratio,
                                       margin=budget.MARGIN)
    return chunks.max_chunk_tokens(cfg.max_model_len, overhead,
                                   new_tokens=int(cfg.max_new_tokens))


def check_chunk_ids(parts, rows) -> None:
    """A chunk's id, ``{document id}#{index}``, must not be another document's id."""
    from pyspark.sql import functions as F

    clash = (parts.select("id", "doc_id").join(
        rows.filter(F.col("reason").isNull()).select("id"), "id", "left_semi")
        .orderBy("id").limit(1).collect())
    if clash:
        raise SynthfactoryError(
            f"document id {clash[0]['id']!r} is also the id of a chunk of the long document "
            f"{clash[0]['doc_id']!r} ({{document id}}{CHUNK_ID_SEPARATOR}{{index}}): "
            "rename one of them in the seeds")


def too_long_reason(worst, window: int):
    """The reason stitch gave a document that did not fit before chunks (ADR 0134), as a
    Spark column: ``worst`` is the struct (prompt_tokens, max_new_tokens) of its longest row."""
    from pyspark.sql import functions as F

    return F.format_string(
        f"too long for the context window (%d prompt + %d new tokens > {window})",
        worst["prompt_tokens"], worst["max_new_tokens"])


def chunk_documents(batches, tok, window: int):
    """``mapInArrow`` body: each document that does not fit, as its chunks (one row each),
    or as one row with the reason no split can fit it."""
    count = partial(tokens.count_tokens, tok.value)
    for batch in batches:
        out: list[dict] = []
        for row in batch.to_pylist():
            doc = {k: row[k] for k in ("id", "source", "source_row")}
            limit = int(row["chunk_limit"])
            if limit < chunks.MIN_CHUNK_TOKENS:
                raise SynthfactoryError(
                    f"document {row['id']!r} does not fit --max-model-len {window} and no "
                    f"chunk of it can: after the template, the chunk's context and its budget "
                    f"the window leaves {max(limit, 0)} tokens for a chunk (at least "
                    f"{chunks.MIN_CHUNK_TOKENS} are needed); raise --max-model-len or lower "
                    "--max-new-tokens")
            result = chunks.split_document(row["text"], count, limit)
            if result.unsplittable is not None:
                out.append({**doc, "reason": chunks.unsplittable_reason(
                    result.unsplittable, limit, window)})
                continue
            n = len(result.chunks)
            contexts = [chunks.context(i, n, result.title, c.heading_path)
                        for i, c in enumerate(result.chunks)]
            for i, (chunk, text, context_tokens) in enumerate(zip(
                    result.chunks, contexts, count(contexts), strict=True)):
                out.append({**doc, "chunk_index": i, "chunk_count": n, "text": chunk.text,
                            "chunk_tokens": chunk.tokens, "title": result.title,
                            "heading_path": list(chunk.heading_path), "context": text,
                            "context_tokens": context_tokens})
        yield pa.RecordBatch.from_pylist(out, schema=CHUNK_SCHEMA)
