"""Long documents cut into chunks by the stitch job (real Spark, local mode), on a corpus
of our own: documents several times a 512-token window, with headings, fenced code and
display math, one paragraph that is one long line, one document just past what fits, short
documents, and one document holding a 5,000-token line without a break."""

from __future__ import annotations

import math
import random
from collections import defaultdict
from dataclasses import replace
from functools import partial

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from synthfactory import storage
from synthfactory.audit import audit
from synthfactory.contract.flag_types import AUTO
from synthfactory.errors import SynthfactoryError
from synthfactory.join import join_run
from synthfactory.layout import RunLayout
from synthfactory.model import default_model_dir, is_ready
from synthfactory.quality.source import source_of
from synthfactory.rephrase.engines import EchoEngine
from synthfactory.rephrase.worker import WorkerOptions, rephrase_shard
from synthfactory.stitch import budget, chunks, tokens
from synthfactory.stitch.job import StitchConfig, stitch
from synthfactory.stitch.templates import load_templates
from synthfactory.validate import validate_shard

pytestmark = pytest.mark.skipif(not is_ready(default_model_dir()),
                                reason="run `synthfactory model prepare` (make setup) first")

WINDOW = 512
TEMPLATES = ["encyclopedic", "qa", "summary"]
K = 2
WORDS = ("each record of the file holds a name a size and the time it was written and the "
         "reader checks every field before it hands the row to the next step of the job "
         "so that a broken line stops early with its number").split()


def _prose(seed: int, sentences: int) -> str:
    rng = random.Random(seed)
    return " ".join(" ".join(rng.choice(WORDS) for _ in range(rng.randint(7, 20))).capitalize()
                    + "." for _ in range(sentences))


def _code(n: int) -> str:
    return "```python\n" + "".join(
        f"def load_{i}(path):\n    with open(path) as f:\n        return f.read()[{i}:]\n\n"
        for i in range(n)) + "```\n"


def _guide(seed: int) -> str:
    parts = [f"# Guide {seed}\n\n{_prose(seed, 6)}\n\n"]
    for s in range(4):
        parts.append(f"## Section {s}\n\n{_prose(seed * 10 + s, 8)}\n\n{_code(2)}\n")
        for sub in range(2):
            parts.append(f"### Detail {s}.{sub}\n\n{_prose(seed * 100 + s * 10 + sub, 9)}\n\n"
                         "$$\nE = \\sum_{k=0}^{n} a_k x^k\n$$\n\n")
    return "".join(parts)


def _blob_line() -> str:
    rng = random.Random(3)
    return "".join(rng.choice("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+/")
                   for _ in range(16000))


DOCS = {
    "guide-1": _guide(1),
    "guide-2": _guide(2),
    "reference": "# Reference\n\nThe loaders, one by one.\n\n" + _code(100) + "\nThat is all.\n",
    "essay": "\n\n".join(_prose(300 + i, 8) for i in range(20)),
    "one-line": _prose(400, 60),  # one paragraph on one line
    "just-past": _prose(500, 9),  # fits the window, but not with its full budget
    "blob": f"# Data\n\nThe data follows.\n\n{_blob_line()}\n\nThe end.\n",
    **{f"short-{i}": _prose(600 + i, 2) for i in range(8)},
}


@pytest.fixture(scope="module")
def count():
    return partial(tokens.count_tokens, tokens.tokenizer_json(str(default_model_dir())))


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("corpus")
    names = list(DOCS)
    half = len(names) // 2
    for file, ids in (("a.parquet", names[:half]), ("b.parquet", names[half:])):
        pq.write_table(pa.table({"id": ids, "text": [DOCS[i] for i in ids]}), root / file)
    return [f"file://{root}/a.parquet", f"file://{root}/b.parquet"]


def _config(files, out):
    return StitchConfig(files=files, run=RunLayout(out), templates=load_templates(TEMPLATES),
                        model_dir=str(default_model_dir()), shard_tokens=4096,
                        styles_per_doc=K, max_new_tokens=AUTO, max_model_len=WINDOW,
                        partitions=3)


@pytest.fixture(scope="module")
def first_run(spark, corpus, tmp_path_factory):
    out = f"file://{tmp_path_factory.mktemp('run')}"
    return out, stitch(_config(corpus, out), spark)


def _rows(out: str, plan) -> list[dict]:
    return [dict(r, shard=s["name"]) for s in plan["shards"]
            for r in storage.read_table(s["url"]).to_pylist()]


def test_the_corpus_has_what_the_test_needs(count):
    sizes = dict(zip(DOCS, count(list(DOCS.values())), strict=True))
    assert all(sizes[d] > 3 * WINDOW for d in ("guide-1", "guide-2", "reference", "essay"))
    assert WINDOW / 4 < sizes["just-past"] < WINDOW / 2
    assert count([_blob_line()])[0] >= 5000


def test_every_document_but_the_unsplittable_one_becomes_prompt_rows(first_run):
    out, plan = first_run
    rows = _rows(out, plan)
    assert {r["doc_id"] for r in rows} == set(DOCS) - {"blob"}
    assert plan["rows_in"] == len(DOCS) and plan["quarantined"] == 1
    (reason,) = plan["quarantine_reasons"]
    assert reason.startswith("no split fits the context window (a unit of ")
    quarantine = pa.concat_tables(storage.read_table(u) for u in storage.list_files(
        RunLayout(out).stitch_quarantine, suffix=".parquet"))
    assert quarantine.column("id").to_pylist() == ["blob"]
    chunked = {r["doc_id"] for r in rows if r["chunk_count"] > 1}
    assert chunked == {"guide-1", "guide-2", "reference", "essay", "one-line", "just-past"}
    assert plan["chunked_documents"] == len(chunked)
    assert plan["chunks"] == len({(r["doc_id"], r["chunk_index"]) for r in rows
                                  if r["chunk_count"] > 1})
    assert plan["prompt_rows"] == len(rows) == K * (
        plan["rows_in"] - plan["quarantined"] - plan["chunked_documents"] + plan["chunks"])


def test_seed_and_covered_tokens_add_up(first_run, count):
    """seed_tokens: every document tokenised (the unsplittable one too); covered_tokens:
    those in prompt rows, each once, = the rows' source_tokens over one style."""
    out, plan = first_run
    rows = _rows(out, plan)
    sizes = dict(zip(DOCS, count(list(DOCS.values())), strict=True))
    assert plan["seed_tokens"] == sum(sizes.values())
    assert sum(r["source_tokens"] for r in rows) == K * plan["covered_tokens"]
    by_doc: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for row in rows:
        by_doc[row["doc_id"]][row["template_id"]] += row["source_tokens"]
    for doc_id, per_style in by_doc.items():
        assert len(set(per_style.values())) == 1, doc_id  # every style sees the same text
        (total,) = set(per_style.values())
        if doc_id in ("short-0", "short-1"):  # whole: the document's own count
            assert total == sizes[doc_id]
        assert abs(total - sizes[doc_id]) <= 2 * max(
            r["chunk_count"] for r in rows if r["doc_id"] == doc_id), doc_id
    assert plan["covered_tokens"] == sum(next(iter(s.values())) for s in by_doc.values())
    for row in rows:
        if row["chunk_count"] > 1:  # a chunk's own count
            text = source_of(row["user"], load_templates([row["template_id"]])[0])
            assert row["source_tokens"] == count([text])[0], row["id"]


def test_chunking_off_sets_long_documents_aside_as_before(spark, corpus, first_run, tmp_path):
    """The benchmark's baseline (StitchConfig.chunking=False): no chunk rows; what does
    not fit is quarantined with the reason of before chunks; the rest is the same rows."""
    out, plan = first_run
    off = stitch(replace(_config(corpus, f"file://{tmp_path}/off"), chunking=False), spark)
    assert (off["chunked_documents"], off["chunks"]) == (0, 0)
    long_docs = {"guide-1", "guide-2", "reference", "essay", "one-line", "just-past", "blob"}
    assert off["quarantined"] == len(long_docs)
    assert all(r.startswith("too long for the context window (") and r.endswith(
        f" new tokens > {WINDOW})") for r in off["quarantine_reasons"])
    assert off["seed_tokens"] == plan["seed_tokens"]
    rows = sorted(_rows(f"file://{tmp_path}/off", off), key=lambda r: (r["id"], r["template_id"]))
    kept = sorted((r for r in _rows(out, plan) if r["chunk_count"] == 1),
                  key=lambda r: (r["id"], r["template_id"]))
    drop = ("shard",)
    assert [{k: v for k, v in r.items() if k not in drop} for r in rows] == [
        {k: v for k, v in r.items() if k not in drop} for r in kept]
    assert sum(r["source_tokens"] for r in rows) == K * off["covered_tokens"]


def test_each_documents_chunks_in_order_are_its_text(first_run):
    out, plan = first_run
    templates = {t.id: t for t in load_templates(TEMPLATES)}
    by_doc: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for row in _rows(out, plan):
        by_doc[(row["doc_id"], row["template_id"])].append(row)
    picked: dict[str, set[str]] = defaultdict(set)
    for (doc_id, template_id), rows in by_doc.items():
        rows.sort(key=lambda r: r["chunk_index"])
        n = rows[0]["chunk_count"]
        assert [r["chunk_index"] for r in rows] == list(range(n))
        assert {r["chunk_count"] for r in rows} == {n}
        texts = [source_of(r["user"], templates[template_id]) for r in rows]
        assert "".join(texts) == DOCS[doc_id]
        assert [r["id"] for r in rows] == ([doc_id] if n == 1 else
                                           [f"{doc_id}#{i}" for i in range(n)])
        picked[doc_id].add(template_id)
    assert all(len(t) == K for t in picked.values())  # the same K styles for every chunk


def test_no_budget_is_capped_and_every_prompt_fits_the_window(first_run, count):
    out, plan = first_run
    templates = {t.id: t for t in load_templates(TEMPLATES)}
    rows = _rows(out, plan)
    sources = count([source_of(r["user"], templates[r["template_id"]]) for r in rows])
    prompts = count([tokens.CHATML.format(system=r["system"], user=r["user"]) for r in rows])
    for row, source, prompt in zip(rows, sources, prompts, strict=True):
        ratio = budget.budget_ratio(templates[row["template_id"]])
        assert row["max_new_tokens"] == math.ceil(source * ratio) + budget.MARGIN, row["id"]
        assert prompt + row["max_new_tokens"] <= WINDOW, row["id"]
        assert abs(row["prompt_tokens"] - prompt) <= 2, row["id"]  # the estimate


def test_a_chunks_prompt_says_which_part_of_what(first_run):
    out, plan = first_run
    templates = {t.id: t for t in load_templates(TEMPLATES)}
    rows = [r for r in _rows(out, plan) if r["doc_id"] == "guide-1"]
    for row in rows:
        system = templates[row["template_id"]].system
        assert row["system"] == system + chunks.context(
            row["chunk_index"], row["chunk_count"], row["title"], row["heading_path"])
        assert f"part {row['chunk_index'] + 1} of {row['chunk_count']}" in row["system"]
        assert row["title"] == "Guide 1"
    assert ["Guide 1", "Section 2", "Detail 2.1"] in [r["heading_path"] for r in rows]
    short = next(r for r in _rows(out, plan) if r["doc_id"] == "short-0")
    assert short["system"] == templates[short["template_id"]].system
    assert (short["title"], short["heading_path"], short["chunk_index"]) == (None, None, 0)


def test_chunks_of_a_document_land_in_several_shards(first_run):
    out, plan = first_run
    shards: dict[str, set[str]] = defaultdict(set)
    for row in _rows(out, plan):
        shards[row["doc_id"]].add(row["shard"])
    assert max(len(s) for s in shards.values()) >= 2


def test_a_rerun_gives_the_same_chunks(spark, corpus, first_run, tmp_path):
    out, plan = first_run
    again = stitch(_config(corpus, f"file://{tmp_path}/again"), spark)
    assert [(s["name"], s["rows"], s["tokens"]) for s in again["shards"]] == [
        (s["name"], s["rows"], s["tokens"]) for s in plan["shards"]]
    for first, second in zip(plan["shards"], again["shards"], strict=True):
        assert storage.read_table(first["url"]).equals(storage.read_table(second["url"]))


def test_the_audit_adds_up_every_chunk_and_document(first_run, corpus, count, capsys):
    """Each chunk row rephrased once (the echo engine) and validated; the audit finds
    every seed document in the prompts (by doc_id) or the quarantine."""
    out, plan = first_run
    layout = RunLayout(out)
    storage.write_table(pa.table({"key": corpus}),
                        storage.join(layout.manifest, "part-00000.parquet"))
    for shard in plan["shards"]:
        rephrase_shard(shard["url"], out, lambda: EchoEngine(),
                       WorkerOptions(model="echo", checkpoint_rows=4))
        validate_shard(shard["url"], out, 0.5)
    joined = join_run(out)
    report = audit(out)
    assert report.problems == []
    assert (report.docs_in, report.prompt_rows) == (len(DOCS), plan["prompt_rows"])
    assert report.generated + report.quarantined == plan["prompt_rows"]
    # every document but the blob, once per style, joined back from its chunks
    assert report.joined == joined["joined"] == (len(DOCS) - 1) * K
    assert joined["source_tokens"] == K * plan["covered_tokens"]
    sizes = dict(zip(DOCS, count(list(DOCS.values())), strict=True))
    covered = sum(n for d, n in sizes.items() if d != "blob")
    with capsys.disabled():
        print(f"\ncorpus coverage at --max-model-len {WINDOW}: {covered} of "
              f"{sum(sizes.values())} seed tokens in prompt rows "
              f"({covered / sum(sizes.values()):.1%}); {plan['chunked_documents']} documents "
              f"in {plan['chunks']} chunks")


def test_a_window_with_no_room_for_a_chunk_fails_in_one_line(spark, corpus, tmp_path):
    """At 300 tokens, encyclopedic and qa leave 17 tokens for a chunk after their
    overhead, the context and the budget: the job fails, naming the document."""
    from synthfactory.stitch.spark_errors import our_error

    cfg = replace(_config(corpus, f"file://{tmp_path}/small"), max_model_len=300)
    with pytest.raises(Exception) as caught:
        stitch(cfg, spark)
    error = our_error(caught.value)
    assert error is not None, caught.value
    assert "does not fit --max-model-len 300 and no chunk of it can" in str(error)
    assert "raise --max-model-len or lower --max-new-tokens" in str(error)


def test_a_document_id_equal_to_a_chunk_id_fails(spark, tmp_path):
    pq.write_table(pa.table({"id": ["essay", "essay#1"], "text": [DOCS["essay"], "Short."]}),
                   tmp_path / "c.parquet")
    cfg = _config([f"file://{tmp_path}/c.parquet"], f"file://{tmp_path}/run")
    with pytest.raises(SynthfactoryError, match=r"document id 'essay#1' is also the id of a "
                                                r"chunk of the long document 'essay'"):
        stitch(cfg, spark)
