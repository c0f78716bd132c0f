"""``synthfactory join``: each document's chunk outputs joined back, in order, into one
row per document and template (docs/adr/0136).

A document too long for the window was rephrased as chunks (stitch/chunks.py), each one
prompt row that may have landed in any shard of any shard group. After every group's
validate, this step reads the committed run (the same checks register makes: every
shard committed, its counts adding up, its verdicts there) and writes
``joined/{shard}.parquet``: every document whose last chunk the shard holds, as one row
with its chunks' outputs in chunk order. A document in one piece is a joined row of one
chunk, its output unchanged.

A joined row is usable when every chunk is; one rejected chunk rejects the document
whole (``rejected_chunks`` names the chunk indices, ``reasons`` holds their reasons; the
chunk rows stay under ``rejected/`` with theirs). A document with a chunk quarantined at
rephrase has nothing to join: it is left out and counted (``left_out``), its generated
chunks with it (``chunks_left_out``).

Memory: stitch orders prompt rows by (source, row, template, chunk index) and cuts
shards along that order, so a document's chunks are adjacent in the shards' sequence;
only the documents whose chunks have not all been read yet are held (one or two at a
time), however large the run. ``joined/_JOINED.json`` is written last and records the
output checksum of each commit it joined: register refuses a join older than the
commits (a shard rephrased again after the join).
"""

from __future__ import annotations

import argparse
import logging
from dataclasses import dataclass, field

import pyarrow as pa

from synthfactory import storage
from synthfactory.contract import JoinedJson, JoinedTemplate, paths
from synthfactory.errors import SynthfactoryError
from synthfactory.faults import pause_point
from synthfactory.layout import RunLayout
from synthfactory.quality.grounding_totals import GroundingTotals, joined_scores
from synthfactory.quality.repair import TRIMMED
from synthfactory.quality.table import QA_PAIRS, SCORE_FIELDS
from synthfactory.run_reader import CommittedRun, CommittedShard, read_committed_run

log = logging.getLogger(__name__)

SEAM = "\n\n"  # between two chunks' outputs: each chunk ends where a block or line did
JOINED_SCHEMA = pa.schema([
    ("id", pa.string()),  # the document's id (a chunk row's doc_id)
    ("template_id", pa.string()), ("template_version", pa.int32()),
    ("output_text", pa.string()), ("clean_text", pa.string()),
    ("usable", pa.bool_()), ("reasons", pa.list_(pa.string())),
    ("rejected_chunks", pa.list_(pa.int32())),  # indices of the chunks the gate rejected
    ("chunk_count", pa.int32()),
    # where each chunk's output starts in output_text: the seams, which a chunk's own
    # blank lines would hide
    ("chunk_offsets", pa.list_(pa.int64())),
    ("prompt_tokens", pa.int64()), ("output_tokens", pa.int64()),
    ("source_tokens", pa.int64()),  # seed tokens rephrased: the chunks' source_tokens
    ("finish_reason", pa.string()),  # "stop" when every chunk stopped, else the first other
    ("model", pa.string()),
    ("shard", pa.string()),  # the shard of the document's first chunk
    # a qa_pairs template's parsed pairs, the chunks' in chunk order; null for the others
    ("qa_pairs", QA_PAIRS),
    # the document's domain (web, code, math; the prompt rows'); null: stitched before
    ("domain", pa.string()),
    # the latest attempt among its chunks' chosen ones (1: every chunk's first); null:
    # generated before attempts were kept (docs/adr/0141)
    ("attempt", pa.int32()),
    ("trimmed_chunks", pa.int32()),  # chunks whose output was trimmed (quality/repair.py)
    # the chunks' grounding scores joined (quality/grounding_totals.py; null: a chunk
    # not scored, or gated before scores were kept), word counts summed (ADR 0148)
    *SCORE_FIELDS,
])
UNKNOWN_DOMAIN = "unknown"  # by_domain's key for rows of a run stitched before domains
# the generated columns a joined row adds up or judges; any other (an older or newer
# worker's) is carried from the document's first chunk, as register carried it before
_GENERATED = {"id", "template_id", "row", "output_text", "prompt_tokens", "output_tokens",
              "finish_reason", "model", "attempt", "kept_tokens"}
_SCORES = tuple(f.name for f in SCORE_FIELDS)


def run(args: argparse.Namespace) -> JoinedJson:
    summary = join_run(storage.normalize(args.run))
    log.info("joined %d generated rows into %d rows (%d of chunked documents), %d usable, "
             "%d rejected, %d left out", summary["generated"], summary["joined"],
             summary["chunked"], summary["usable"], summary["rejected"], summary["left_out"])
    return summary


@dataclass
class _Chunk:
    index: int
    shard: str
    output_text: str
    clean_text: str | None
    usable: bool
    reasons: list[str]
    prompt_tokens: int
    output_tokens: int
    source_tokens: int
    finish_reason: str | None
    template_version: object
    model: str | None
    extra: dict
    qa_pairs: list | None = None
    domain: str | None = None
    attempt: int | None = None
    scores: dict = field(default_factory=dict)  # the verdict's score columns


@dataclass
class _Pending:
    count: int
    chunks: dict[int, _Chunk] = field(default_factory=dict)
    quarantined: int = 0  # chunks quarantined at rephrase: the document cannot be joined


def join_run(run_url: str) -> JoinedJson:
    # refuses an unfinished or inconsistent run, as register would
    committed = read_committed_run(run_url, "join")
    layout = RunLayout(committed.run_url)
    storage.delete(storage.join(layout.run_url, paths.JOINED))  # a rerun writes it anew
    totals = _Totals()
    pending: dict[tuple[str, str], _Pending] = {}
    extra: dict[str, pa.Field] = {}  # generated columns carried through, by name
    parts = []
    for shard in committed.shards:
        rows = _join_shard(layout, shard, pending, totals, extra)
        url = layout.url(paths.joined(shard.name))
        storage.write_table(pa.Table.from_pylist(rows, schema=_schema(extra)), url)
        parts.append({"name": url.rsplit("/", 1)[-1], "rows": len(rows)})
    for doc in pending.values():  # a chunk quarantined, or the document's last ones
        totals.left_out += 1
        totals.chunks_left_out += len(doc.chunks)
    summary = totals.summary(parts, committed)
    if summary["chunks_joined"] + summary["chunks_left_out"] != summary["generated"]:
        raise SynthfactoryError(  # a bug, not an input: the counts are ours
            f"join accounting failed for {layout.run_url}: {summary['generated']} generated "
            f"rows, {summary['chunks_joined']} joined, {summary['chunks_left_out']} left out")
    pause_point("join:before-summary")
    storage.write_json(layout.url(paths.JOINED_SUMMARY), summary)
    return summary


@dataclass
class _Totals:
    generated: int = 0
    joined: int = 0
    chunked: int = 0
    chunks_joined: int = 0
    usable: int = 0
    rejected: int = 0
    left_out: int = 0
    chunks_left_out: int = 0
    source_tokens: int = 0
    usable_output_tokens: int = 0
    # usable rows by the latest attempt their chunks needed (docs/adr/0141)
    usable_at_attempt: dict[str, int] = field(default_factory=dict)
    chunked_usable: int = 0
    chunked_saved: int = 0  # chunked documents usable only thanks to a later attempt
    trimmed: int = 0  # usable rows with a trimmed chunk
    by_template: dict[str, JoinedTemplate] = field(default_factory=dict)
    by_domain: dict[str, JoinedTemplate] = field(default_factory=dict)
    grounding: GroundingTotals = field(default_factory=GroundingTotals)

    def add(self, row: dict) -> None:
        self.joined += 1
        self.chunked += row["chunk_count"] > 1
        self.chunks_joined += row["chunk_count"]
        self.usable += row["usable"]
        self.rejected += not row["usable"]
        self.source_tokens += row["source_tokens"]
        for group in (self.by_template.setdefault(row["template_id"], _group()),
                      self.by_domain.setdefault(row["domain"] or UNKNOWN_DOMAIN, _group())):
            group["rows"] += 1
            group["source_tokens"] += row["source_tokens"]
            if row["usable"]:
                group["usable"] += 1
                group["usable_output_tokens"] += row["output_tokens"]
        if row["usable"]:
            self.grounding.add(row, row["template_id"], row["domain"] or UNKNOWN_DOMAIN)
            self.usable_output_tokens += row["output_tokens"]
            attempt = str(row["attempt"] or 1)
            self.usable_at_attempt[attempt] = self.usable_at_attempt.get(attempt, 0) + 1
            self.trimmed += bool(row["trimmed_chunks"])
            if row["chunk_count"] > 1:
                self.chunked_usable += 1
                self.chunked_saved += (row["attempt"] or 1) > 1

    def summary(self, parts: list, committed: CommittedRun) -> JoinedJson:
        return {
            "generated": self.generated, "joined": self.joined, "chunked": self.chunked,
            "chunks_joined": self.chunks_joined, "usable": self.usable,
            "rejected": self.rejected, "left_out": self.left_out,
            "chunks_left_out": self.chunks_left_out, "source_tokens": self.source_tokens,
            "usable_output_tokens": self.usable_output_tokens,
            "usable_at_attempt": dict(sorted(self.usable_at_attempt.items(),
                                             key=lambda kv: int(kv[0]))),
            "chunked_usable": self.chunked_usable, "chunked_saved": self.chunked_saved,
            "trimmed": self.trimmed,
            "by_template": dict(sorted(self.by_template.items())),
            "by_domain": dict(sorted(self.by_domain.items())),
            "grounding": self.grounding.summary(),
            "parts": parts,
            "commits": {s.name: str(s.commit.get("output_checksum")) for s in committed.shards},
        }


def _group() -> JoinedTemplate:
    return {"rows": 0, "usable": 0, "source_tokens": 0, "usable_output_tokens": 0}


def _schema(extra: dict[str, pa.Field]) -> pa.Schema:
    """The joined columns, ``template_version`` as the worker typed it, then the others."""
    fields = [extra.get(f.name, f) if f.name == "template_version" else f
              for f in JOINED_SCHEMA]
    return pa.schema(fields + [f for name, f in extra.items()
                               if name not in JOINED_SCHEMA.names])


def _join_shard(layout: RunLayout, shard: CommittedShard, pending: dict, totals: _Totals,
                extra: dict[str, pa.Field]) -> list[dict]:
    """The joined rows of the documents this shard completes, in prompt row order."""
    prompts = storage.read_table(str(shard.commit["prompt_shard"]))
    names = prompts.column_names
    doc_ids = (prompts.column("doc_id") if "doc_id" in names else prompts.column("id")).to_pylist()
    n = prompts.num_rows
    index = prompts.column("chunk_index").to_pylist() if "chunk_index" in names else [0] * n
    count = prompts.column("chunk_count").to_pylist() if "chunk_count" in names else [1] * n
    # a run stitched before source_tokens existed: none counted
    source = prompts.column("source_tokens").to_pylist() if "source_tokens" in names else [0] * n
    templates = prompts.column("template_id").to_pylist()
    domains = prompts.column("domain").to_pylist() if "domain" in names else [None] * n
    verdicts = storage.read_table(shard.verdicts_url)  # qa_pairs: not in older verdicts
    verdicts = verdicts.select([c for c in ("row", "usable", "reasons", "clean_text",
                                            "qa_pairs", *_SCORES)
                                if c in verdicts.column_names])
    verdict_of = {r["row"]: r for r in verdicts.to_pylist()}
    generated = {}
    for url in shard.part_urls:
        part = storage.read_table(url)
        for f in part.schema:
            if f.name not in _GENERATED and not pa.types.is_null(f.type):
                extra.setdefault(f.name, f)
        for r in part.to_pylist():
            generated[r["row"]] = r
    quarantined = _quarantined_rows(layout, shard)
    totals.generated += len(generated)
    out = []
    for row in range(n):  # prompt order: a document's chunks come in index order
        key = (doc_ids[row], templates[row])
        doc = pending.setdefault(key, _Pending(int(count[row] or 1)))
        if row in quarantined:
            doc.quarantined += 1
        elif row in generated:
            g, v = generated[row], verdict_of.get(row)
            if v is None:  # read_committed_run checked the counts; a row by row check here
                raise SynthfactoryError(f"{shard.verdicts_url}: no verdict for row {row} of "
                                        f"{shard.name}; run `synthfactory validate` for it")
            doc.chunks[int(index[row] or 0)] = _Chunk(
                int(index[row] or 0), shard.name, g["output_text"] or "", v["clean_text"],
                bool(v["usable"]), list(v["reasons"] or []), int(g["prompt_tokens"] or 0),
                # the tokens the row keeps: a trimmed output's, not all it generated
                int(g.get("kept_tokens") if g.get("kept_tokens") is not None
                    else g["output_tokens"] or 0),
                int(source[row] or 0), g["finish_reason"],
                g.get("template_version"), g["model"],
                {k: v for k, v in g.items() if k not in _GENERATED}, v.get("qa_pairs"),
                domains[row], g.get("attempt"), {k: v.get(k) for k in _SCORES})
        if len(doc.chunks) + doc.quarantined < doc.count:
            continue  # chunks still to come, in a later row or shard
        del pending[key]
        if doc.quarantined:
            totals.left_out += 1
            totals.chunks_left_out += len(doc.chunks)
            continue
        joined = _joined_row(key, doc)
        totals.add(joined)
        out.append(joined)
    return out


def _quarantined_rows(layout: RunLayout, shard: CommittedShard) -> set[int]:
    rows: set[int] = set()
    for part in shard.commit.get("quarantine_parts") or []:
        url = storage.join(layout.rephrase_quarantine(shard.name), part["name"])
        rows.update(storage.read_table(url, columns=["row"]).column(0).to_pylist())
    return rows


def _joined_row(key: tuple[str, str], doc: _Pending) -> dict:
    chunks = [doc.chunks[i] for i in sorted(doc.chunks)]
    if [c.index for c in chunks] != list(range(doc.count)):
        raise SynthfactoryError(  # stitch numbers a document's chunks 0..count-1
            f"document {key[0]!r} ({key[1]}): chunk indices {[c.index for c in chunks]} are "
            f"not 0..{doc.count - 1}; stitch the run again")
    rejected = [c.index for c in chunks if not c.usable]
    usable = not rejected
    if len(chunks) == 1:  # a whole document: its output as generated
        text, clean, offsets = chunks[0].output_text, chunks[0].clean_text, [0]
    else:
        outputs = [c.output_text.strip() for c in chunks]
        offsets = [sum(len(o) + len(SEAM) for o in outputs[:i]) for i in range(len(outputs))]
        text = SEAM.join(outputs)
        clean = SEAM.join((c.clean_text or "").strip() for c in chunks) if usable else None
    reasons = sorted({r for c in chunks for r in c.reasons},
                     key=lambda r: min(c.reasons.index(r) for c in chunks if r in c.reasons))
    finish = next((c.finish_reason for c in chunks if c.finish_reason != "stop"), "stop")
    pairs = (None if all(c.qa_pairs is None for c in chunks)
             else [p for c in chunks for p in c.qa_pairs or []])
    return {
        "id": key[0], "template_id": key[1], "template_version": chunks[0].template_version,
        "output_text": text, "clean_text": clean, "usable": usable, "reasons": reasons,
        "rejected_chunks": rejected, "chunk_count": doc.count, "chunk_offsets": offsets,
        "prompt_tokens": sum(c.prompt_tokens for c in chunks),
        "output_tokens": sum(c.output_tokens for c in chunks),
        "source_tokens": sum(c.source_tokens for c in chunks),
        "finish_reason": finish, "model": chunks[0].model, "shard": chunks[0].shard,
        "qa_pairs": pairs, "domain": chunks[0].domain,
        "attempt": max((c.attempt for c in chunks if c.attempt is not None), default=None),
        "trimmed_chunks": sum(c.finish_reason == TRIMMED for c in chunks),
        **joined_scores([c.scores for c in chunks]),
        **{k: v for k, v in chunks[0].extra.items() if k != "template_version"},
    }


def read_joined(run: CommittedRun) -> tuple[JoinedJson, list[tuple[str, str]]]:
    """The run's join summary and its parts as ``(shard, url)``, refused when missing or
    older than a commit it should have joined."""
    layout = RunLayout(run.run_url)
    summary = storage.run_folder(run.run_url).joined()
    url = layout.url(paths.JOINED_SUMMARY)
    if summary is None:
        raise SynthfactoryError(f"{url}: not found; run `synthfactory join --run "
                                f"{run.run_url}` first")
    now = {s.name: str(s.commit.get("output_checksum")) for s in run.shards}
    if summary.get("commits") != now:
        changed = sorted(k for k in now.keys() | (summary.get("commits") or {}).keys()
                         if now.get(k) != (summary.get("commits") or {}).get(k))
        raise SynthfactoryError(f"{url}: stale: joined before the latest commit of "
                                f"{', '.join(changed[:5])}; run `synthfactory join` again")
    parts = [(p["name"].removesuffix(".parquet"),
              storage.join(layout.run_url, paths.JOINED, p["name"])) for p in summary["parts"]]
    return summary, parts
