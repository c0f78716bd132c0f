"""The stitch step's work in one Python process with pyarrow, numpy and pandas: the baseline
that benchmarks/stitch.py races against the Spark job (synthfactory.stitch.job).

Written independently of the job (not imported from it) so that agreeing outputs mean
something: the same files read, the same quarantine reasons, the same K styles per
document (Spark's xxhash64 of (id, seed, template_id) reproduced with numpy), the same
token estimates (``tokenizers`` encode_batch on 10,000-row batches, as Arrow hands the
pandas UDF), the same rule for what fits the window, the same shard cut (floor(tokens
before row / budget) over rows ordered by source, source_row, template_id, chunk_index)
and the same files: ``prompts/shard-XXXXX.parquet``, ``prompts/shards.json``,
``quarantine/stitch/part-00000``. Shared definitions only come from the package: template
files, the ChatML framing, and the chunker (synthfactory/stitch/chunks.py, pure Python:
what is compared is the job around it, which documents it gets and how their chunks
become rows). Fixed --max-new-tokens only.
"""

from __future__ import annotations

import json
import os
from collections import Counter

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from synthfactory.stitch import chunks
from synthfactory.stitch.templates import PLACEHOLDER, PromptTemplate
from synthfactory.stitch.tokens import CHATML

BATCH = 10_000  # spark.sql.execution.arrow.maxRecordsPerBatch's default
SHARD_COLUMNS = ["id", "template_id", "template_version", "style", "system", "user",
                 "prompt_tokens", "max_new_tokens", "doc_id", "chunk_index", "chunk_count",
                 "title", "heading_path", "source_tokens"]

# ---------------------------------------------------------------- Spark's xxhash64 in numpy
P1, P2, P3, P4, P5 = (np.uint64(p) for p in (
    0x9E3779B185EBCA87, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9, 0x85EBCA77C2B2AE63,
    0x27D4EB2F165667C5))
SPARK_HASH_SEED = 42  # XxHash64's default seed in Spark SQL


def _rotl(x: np.ndarray, r: int) -> np.ndarray:
    return (x << np.uint64(r)) | (x >> np.uint64(64 - r))


def _round(acc: np.ndarray, lane: np.ndarray) -> np.ndarray:
    return _rotl(acc + lane * P2, 31) * P1


def _word(data: np.ndarray, off: int, width: int) -> np.ndarray:
    dtype = "<u8" if width == 8 else "<u4"
    return np.ascontiguousarray(data[:, off:off + width]).view(dtype)[:, 0].astype(np.uint64)


def xxh64(data: np.ndarray, seed: np.ndarray) -> np.ndarray:
    """XXH64 of each row of ``data`` (n x L bytes, one length for all) with per-row seeds;
    the algorithm of Spark's ``XXH64.hashUnsafeBytes`` (standard XXH64)."""
    n, length = data.shape
    with np.errstate(over="ignore"):
        seed = seed.astype(np.uint64)
        off = 0
        if length >= 32:
            v = [seed + P1 + P2, seed + P2, seed.copy(), seed - P1]
            while off + 32 <= length:
                v = [_round(v[i], _word(data, off + 8 * i, 8)) for i in range(4)]
                off += 32
            h = _rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)
            for lane in v:
                h = (h ^ _round(np.zeros(n, np.uint64), lane)) * P1 + P4
        else:
            h = seed + P5
        h = h + np.uint64(length)
        while off + 8 <= length:
            h = h ^ _round(np.zeros(n, np.uint64), _word(data, off, 8))
            h = _rotl(h, 27) * P1 + P4
            off += 8
        if off + 4 <= length:
            h = _rotl(h ^ (_word(data, off, 4) * P1), 23) * P2 + P3
            off += 4
        while off < length:
            h = _rotl(h ^ (data[:, off].astype(np.uint64) * P5), 11) * P1
            off += 1
        h = (h ^ (h >> np.uint64(33))) * P2
        h = (h ^ (h >> np.uint64(29))) * P3
        return h ^ (h >> np.uint64(32))


def xxh64_strings(values: list[str], seed: np.ndarray) -> np.ndarray:
    """Per-row XXH64 of UTF-8 strings of any lengths (rows grouped by byte length)."""
    encoded = [v.encode() for v in values]
    lengths = np.fromiter((len(b) for b in encoded), np.int64, len(encoded))
    out = np.empty(len(encoded), np.uint64)
    for length in np.unique(lengths):
        rows = np.nonzero(lengths == length)[0]
        blob = b"".join(encoded[i] for i in rows)
        data = np.frombuffer(blob, np.uint8).reshape(len(rows), int(length))
        out[rows] = xxh64(data, seed[rows])
    return out


def spark_xxhash64(ids: list[str], seed: int, template_id: str) -> np.ndarray:
    """``F.xxhash64(id, F.lit(seed), template_id)`` (seed an int column) as int64."""
    n = len(ids)
    h = xxh64_strings(ids, np.full(n, SPARK_HASH_SEED, np.uint64))
    int_bytes = np.frombuffer(np.int32(seed).tobytes(), np.uint8)
    h = xxh64(np.broadcast_to(int_bytes, (n, 4)), h)
    tpl = np.frombuffer(template_id.encode(), np.uint8)
    h = xxh64(np.broadcast_to(tpl, (n, len(tpl))), h)
    return h.view(np.int64)


# ---------------------------------------------------------------- reading with reasons
WRONG_TYPE = "text is not a string (column type {})"
_NULL = pa.scalar(None, pa.string())


def _when(cond, value: str, otherwise) -> pa.Array:
    return pc.if_else(cond, pa.scalar(value), otherwise)


def read_file(url: str, id_column: str, text_column: str) -> pa.Table:
    """One file -> id, text, source, source_row, reason (null when usable)."""
    table = pq.read_table(url.removeprefix("file://"))
    for column in (id_column, text_column):
        if column not in table.column_names:
            raise ValueError(f"{url}: missing column {column!r}")
    n = table.num_rows
    column = table.column(text_column)
    kind = column.type
    if not (pa.types.is_string(kind) or pa.types.is_large_string(kind)
            or pa.types.is_binary(kind) or pa.types.is_large_binary(kind)):
        text = pa.nulls(n, pa.string())
        reason = pa.array([WRONG_TYPE.format(kind)] * n, pa.string())
    else:
        raw = column.combine_chunks().cast(pa.binary())
        try:
            text = raw.cast(pa.string())
            text.validate(full=True)
            invalid = pa.array(np.zeros(n, bool))
        except pa.ArrowInvalid:
            decoded, bad = [], []
            for value in raw.to_pylist():
                try:
                    decoded.append(None if value is None else value.decode("utf-8"))
                    bad.append(False)
                except UnicodeDecodeError:
                    decoded.append(None)
                    bad.append(True)
            text, invalid = pa.array(decoded, pa.string()), pa.array(bad)
        empty = pc.equal(pc.utf8_length(pc.utf8_trim_whitespace(text.fill_null(""))), 0)
        reason = _when(invalid, "invalid UTF-8 in text",
                       _when(pc.is_null(text), "null text", _when(empty, "empty text", _NULL)))
    ids = table.column(id_column).combine_chunks().cast(pa.string())
    reason = pc.coalesce(reason, _when(pc.is_null(ids), "null id", _NULL))
    return pa.table({"id": ids, "text": text, "source": pa.array([url] * n, pa.string()),
                     "source_row": pa.array(np.arange(n, dtype=np.int64)), "reason": reason})


# ---------------------------------------------------------------- the whole step
def count_tokens(tokenizer, texts: list[str]) -> np.ndarray:
    out = np.empty(len(texts), np.int64)
    for start in range(0, len(texts), BATCH):
        encodings = tokenizer.encode_batch(texts[start:start + BATCH], add_special_tokens=False)
        out[start:start + len(encodings)] = [len(e.ids) for e in encodings]
    return out


def _user_column(templates: list[PromptTemplate], tpl: np.ndarray, text: pa.Array) -> pa.Array:
    """``replace(user_template, '{document}', text)`` per row, one vectorised pass per template."""
    pieces, positions = [], []
    for t, template in enumerate(templates):
        rows = np.nonzero(tpl == t)[0]
        if not len(rows):
            continue
        parts = template.user.split("{" + PLACEHOLDER + "}")
        docs = text.take(pa.array(rows))
        args = [pa.scalar(parts[0])]
        for part in parts[1:]:
            args += [docs, pa.scalar(part)]
        pieces.append(pc.binary_join_element_wise(*args, ""))
        positions.append(rows)
    order = np.concatenate(positions)
    inverse = np.empty_like(order)
    inverse[order] = np.arange(len(order))
    return pa.concat_arrays([p.cast(pa.string()) for p in pieces]).take(pa.array(inverse))


def stitch_baseline(
    files: list[str], out_dir: str, templates: list[PromptTemplate], tokenizer_json: str,
    shard_tokens: int, styles_per_doc: int, max_new_tokens: int, max_model_len: int,
    seed: int = 0, id_column: str = "id", text_column: str = "text",
) -> dict:
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_str(tokenizer_json)
    rows = pa.concat_tables([read_file(u, id_column, text_column) for u in sorted(files)])
    rows_in = rows.num_rows
    # files are read in URL order and rows in file order: (source, source_row) order, so
    # "not the first row of its id" is pandas' duplicated(keep="first")
    dup = rows.column("id").to_pandas().duplicated(keep="first").to_numpy()
    reason = pc.coalesce(rows.column("reason"), _when(pa.array(dup), "duplicate id", _NULL))
    usable = pc.is_null(reason).to_numpy(zero_copy_only=False)
    bad = rows.select(["id", "source", "source_row"]).append_column("reason", reason)
    bad = bad.filter(pa.array(~usable))

    good = rows.filter(pa.array(usable)).select(["id", "text", "source", "source_row"])
    texts = good.column("text").combine_chunks()
    doc_tokens = count_tokens(tokenizer, texts.to_pylist())

    by_id = sorted(range(len(templates)), key=lambda t: templates[t].id)  # tie-break order
    templates = [templates[t] for t in by_id]
    overhead = np.array([
        len(tokenizer.encode(CHATML.format(
            system=t.system, user=t.user.replace("{" + PLACEHOLDER + "}", "")),
            add_special_tokens=False).ids) for t in templates], np.int64)
    ids = good.column("id").to_pylist()
    hashes = np.stack([spark_xxhash64(ids, seed, t.id) for t in templates], axis=1)
    # order by (hash, template_id): a stable sort over columns already in template_id order
    picked = np.sort(np.argsort(hashes, axis=1, kind="stable")[:, :styles_per_doc], axis=1)

    n_good = len(ids)
    doc = np.repeat(np.arange(n_good), styles_per_doc)
    tpl = picked.reshape(-1)
    prompt_tokens = doc_tokens[doc] + overhead[tpl]
    longest = prompt_tokens.reshape(n_good, styles_per_doc).max(axis=1)
    too_long = longest > max_model_len - max_new_tokens

    keep = ~too_long[doc]  # rows stay in (source, source_row, template_id) order
    doc, tpl, prompt_tokens = doc[keep], tpl[keep], prompt_tokens[keep]
    doc_idx = pa.array(doc)
    ids_kept = good.column("id").take(doc_idx)
    whole = pa.table({
        "id": ids_kept,
        "template_id": pa.array([t.id for t in templates]).take(pa.array(tpl)),
        "template_version": pa.array([t.version for t in templates], pa.int32()).take(
            pa.array(tpl)),
        "style": pa.array([t.style for t in templates]).take(pa.array(tpl)),
        "system": pa.array([t.system for t in templates]).take(pa.array(tpl)),
        "user": _user_column(templates, tpl, texts.take(doc_idx)),
        "prompt_tokens": pa.array(prompt_tokens, pa.int64()),
        "max_new_tokens": pa.array(np.full(len(doc), max_new_tokens, np.int32)),
        "doc_id": ids_kept,
        "chunk_index": pa.array(np.zeros(len(doc), np.int32)),
        "chunk_count": pa.array(np.ones(len(doc), np.int32)),
        "title": pa.nulls(len(doc), pa.string()),
        "heading_path": pa.nulls(len(doc), pa.list_(pa.string())),
        "source_tokens": pa.array(doc_tokens[doc], pa.int64()),
    })
    parts, long_docs = _chunk_rows(tokenizer, good, texts, picked, templates, overhead,
                                   np.nonzero(too_long)[0], max_new_tokens, max_model_len)
    prompts = pa.concat_tables([whole, parts.drop_columns(["_doc", "_tpl"])])
    order = np.lexsort((np.concatenate([np.zeros(len(doc), np.int64),
                                        parts.column("chunk_index").to_numpy()]),
                        np.concatenate([tpl, parts.column("_tpl").to_numpy()]),
                        np.concatenate([doc, parts.column("_doc").to_numpy()])))
    prompts = prompts.take(pa.array(order))  # (source, source_row, template_id, chunk_index)
    prompt_tokens = prompts.column("prompt_tokens").to_numpy()

    cost = prompt_tokens + max_new_tokens
    chunked_documents = len(set(parts.column("_doc").to_pylist()))
    before = np.cumsum(cost) - cost
    raw_shard = before // shard_tokens
    _, dense = np.unique(raw_shard, return_inverse=True)
    cuts = np.concatenate([[0], np.nonzero(np.diff(dense))[0] + 1, [len(dense)]])
    prompts_dir = os.path.join(out_dir, "prompts")
    os.makedirs(prompts_dir, exist_ok=True)
    shards = []
    for index, (lo, hi) in enumerate(zip(cuts[:-1], cuts[1:], strict=True)):
        url = os.path.join(prompts_dir, f"shard-{index:05d}.parquet")
        pq.write_table(prompts.slice(lo, hi - lo), url)
        shards.append({"name": f"shard-{index:05d}", "url": url, "rows": int(hi - lo),
                       "tokens": int(cost[lo:hi].sum())})

    quarantine = pa.concat_tables([bad, long_docs]).sort_by(
        [("source", "ascending"), ("source_row", "ascending")])
    qdir = os.path.join(out_dir, "quarantine", "stitch")
    os.makedirs(qdir, exist_ok=True)
    if quarantine.num_rows:
        pq.write_table(quarantine, os.path.join(qdir, "part-00000.parquet"))
    reasons = Counter(quarantine.column("reason").to_pylist())
    plan = {
        "shards": shards, "rows_in": rows_in, "prompt_rows": prompts.num_rows,
        "quarantined": quarantine.num_rows, "quarantine_reasons": dict(sorted(reasons.items())),
        "styles_per_doc": styles_per_doc, "shard_tokens": shard_tokens,
        "chunked_documents": chunked_documents,
        "chunks": parts.num_rows // styles_per_doc,
        # every document tokenised, once; those in prompt rows, once (a chunked one: the
        # sum of its chunks' own counts, i.e. source_tokens over one style's rows)
        "seed_tokens": int(doc_tokens.sum()),
        "covered_tokens": int(prompts.column("source_tokens").to_numpy().sum())
        // styles_per_doc,
    }
    assert prompts.num_rows == (rows_in - quarantine.num_rows - chunked_documents
                                + plan["chunks"]) * styles_per_doc
    with open(os.path.join(prompts_dir, "shards.json"), "w") as f:
        json.dump(plan, f)
    return plan


def _chunk_rows(tokenizer, good: pa.Table, texts: pa.Array, picked: np.ndarray,
                templates: list[PromptTemplate], overhead: np.ndarray, long: np.ndarray,
                max_new_tokens: int, max_model_len: int) -> tuple[pa.Table, pa.Table]:
    """The chunk rows of the documents that do not fit (``long``: their indexes in
    ``good``), each with its document (``_doc``) and template (``_tpl``) index, and the
    quarantine rows of those no split can fit."""
    def count(batch: list[str]) -> list[int]:
        return [len(e.ids) for e in tokenizer.encode_batch(batch, add_special_tokens=False)]

    reserve = chunks.context_reserve(count)
    limits = [chunks.max_chunk_tokens(max_model_len, int(o) + reserve,
                                      new_tokens=max_new_tokens) for o in overhead]
    rows, bad = [], []
    for d in long.tolist():
        doc_id, text = good.column("id")[d].as_py(), texts[d].as_py()
        limit = min(limits[t] for t in picked[d])
        result = chunks.split_document(text, count, limit)
        if result.unsplittable is not None:
            bad.append({"id": doc_id, "source": good.column("source")[d].as_py(),
                        "source_row": good.column("source_row")[d].as_py(),
                        "reason": chunks.unsplittable_reason(result.unsplittable, limit,
                                                             max_model_len)})
            continue
        n = len(result.chunks)
        contexts = [chunks.context(i, n, result.title, c.heading_path)
                    for i, c in enumerate(result.chunks)]
        for t in sorted(picked[d].tolist()):
            template = templates[t]
            for i, (chunk, context, context_tokens) in enumerate(zip(
                    result.chunks, contexts, count(contexts), strict=True)):
                rows.append({
                    "id": f"{doc_id}#{i}", "template_id": template.id,
                    "template_version": template.version, "style": template.style,
                    "system": template.system + context,
                    "user": template.user.replace("{" + PLACEHOLDER + "}", chunk.text),
                    "prompt_tokens": chunk.tokens + int(overhead[t]) + context_tokens,
                    "max_new_tokens": max_new_tokens, "doc_id": doc_id, "chunk_index": i,
                    "chunk_count": n, "title": result.title,
                    "heading_path": list(chunk.heading_path),
                    "source_tokens": chunk.tokens, "_doc": d, "_tpl": t})
    schema = pa.schema([
        ("id", pa.string()), ("template_id", pa.string()), ("template_version", pa.int32()),
        ("style", pa.string()), ("system", pa.string()), ("user", pa.string()),
        ("prompt_tokens", pa.int64()), ("max_new_tokens", pa.int32()), ("doc_id", pa.string()),
        ("chunk_index", pa.int32()), ("chunk_count", pa.int32()), ("title", pa.string()),
        ("heading_path", pa.list_(pa.string())), ("source_tokens", pa.int64()),
        ("_doc", pa.int64()), ("_tpl", pa.int64())])
    quarantine = pa.Table.from_pylist(bad, pa.schema([
        ("id", pa.string()), ("source", pa.string()), ("source_row", pa.int64()),
        ("reason", pa.string())]))
    return pa.Table.from_pylist(rows, schema), quarantine


def read_prompts(prompts_dir: str) -> pa.Table:
    """All shard rows of a run (Spark's or ours) with their shard name, for comparing."""
    tables = []
    for name in sorted(os.listdir(prompts_dir)):
        if name.startswith("shard-") and name.endswith(".parquet"):
            table = pq.read_table(os.path.join(prompts_dir, name))
            shard = pa.array([name.removesuffix(".parquet")] * table.num_rows, pa.string())
            tables.append(table.append_column("shard", shard))
    return pa.concat_tables(tables, promote_options="permissive")
