"""The stitch job on real Spark (local mode), on a corpus with every kind of bad row."""

from __future__ import annotations

import json
import random
import string
import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from synthfactory import storage
from synthfactory.errors import SynthfactoryError
from synthfactory.layout import RunLayout
from synthfactory.model import default_model_dir, is_ready
from synthfactory.stitch.job import StitchConfig, stitch
from synthfactory.stitch.templates import load_template, load_templates

pytestmark = pytest.mark.skipif(not is_ready(default_model_dir()),
                                reason="run `synthfactory model prepare` (make setup) first")

GOOD_DOCS = 60
TEMPLATES = ["encyclopedic", "qa", "summary", "faq"]


def _text(i: int) -> str:
    return f"Document {i}. " + " ".join(f"word{j % 37}" for j in range(40 + (i * 7) % 90))


def _blob(seed: int = 0) -> str:
    """A line of some 8,000 tokens without a space or line break: no chunk can hold it."""
    rng = random.Random(seed)
    return "".join(rng.choice(string.ascii_letters + string.digits + "+/") for _ in range(16000))


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("corpus")
    good = pa.table({"id": [f"d{i:03d}" for i in range(GOOD_DOCS)],
                     "text": [_text(i) for i in range(GOOD_DOCS)]})
    pq.write_table(good, root / "a_good.parquet")
    # Bad rows: null, empty, whitespace, a unit no chunk can hold, invalid UTF-8, a
    # duplicate id.
    bad = pa.table({
        "id": ["n1", "e1", "w1", "long1", "utf1", "d000"],
        "text": pa.array([None, b"", b"   \n", _blob().encode(), b"caf\xe9 au lait",
                          b"duplicate of d000"], pa.binary()),
    })
    pq.write_table(bad, root / "b_bad.parquet")
    pq.write_table(pa.table({"id": ["t1", "t2"], "text": [1, 2]}), root / "c_wrongtype.parquet")
    return root


def _config(corpus, out, **overrides):
    values = dict(
        files=[f"file://{corpus}/{n}" for n in ("a_good.parquet", "b_bad.parquet",
                                                 "c_wrongtype.parquet")],
        run=RunLayout(out), templates=load_templates(TEMPLATES),
        model_dir=str(default_model_dir()), shard_tokens=4096, styles_per_doc=2,
        max_new_tokens=128, max_model_len=2048,
    )
    values.update(overrides)
    return StitchConfig(**values)


@pytest.fixture(scope="module")
def first_run(spark, corpus, tmp_path_factory):
    out = f"file://{tmp_path_factory.mktemp('run')}"
    plan = stitch(_config(corpus, out), spark)
    return out, plan


def _prompts(out: str) -> pa.Table:
    urls = [u for u in storage.list_files(storage.join(out, "prompts"), suffix=".parquet")]
    return pa.concat_tables([storage.read_table(u) for u in urls])


def test_every_row_lands_in_k_prompts_or_quarantine(first_run):
    out, plan = first_run
    prompts = _prompts(out)
    quarantine = pa.concat_tables([storage.read_table(u) for u in storage.list_files(
        storage.join(out, "quarantine", "stitch"), suffix=".parquet")])
    assert quarantine.num_rows == plan["quarantined"]
    assert plan["rows_in"] == GOOD_DOCS + 6 + 2
    assert plan["rows_in"] == plan["prompt_rows"] / 2 + plan["quarantined"]
    per_doc = {}
    for doc_id, template in zip(prompts.column("id").to_pylist(),
                                prompts.column("template_id").to_pylist(), strict=True):
        per_doc.setdefault(doc_id, []).append(template)
    assert set(per_doc) == {f"d{i:03d}" for i in range(GOOD_DOCS)}
    assert all(len(t) == 2 == len(set(t)) for t in per_doc.values())
    reasons = dict(zip(quarantine.column("id").to_pylist(),
                       quarantine.column("reason").to_pylist(), strict=True))
    assert reasons["n1"] == "null text"
    assert reasons["e1"] == reasons["w1"] == "empty text"
    assert reasons["utf1"] == "invalid UTF-8 in text"
    assert reasons["long1"].startswith("no split fits the context window (a unit of ")
    assert reasons["t1"] == reasons["t2"] == "text is not a string (column type int64)"
    duplicates = [s for s, r in zip(quarantine.column("source").to_pylist(),
                                    quarantine.column("reason").to_pylist(), strict=True)
                  if r == "duplicate id"]
    assert len(duplicates) == 1 and duplicates[0].endswith("b_bad.parquet")  # first one wins


def test_prompts_carry_the_document_and_template(first_run):
    out, _ = first_run
    row = _prompts(out).slice(0, 1).to_pylist()[0]
    template = {t.id: t for t in load_templates(TEMPLATES)}[row["template_id"]]
    assert row["system"] == template.system
    assert row["user"].startswith(template.user.split("{document}")[0])
    assert "Document " in row["user"] and "{document}" not in row["user"]
    assert row["prompt_tokens"] > 40 and row["max_new_tokens"] == 128
    assert row["template_hash"] == template.hash


def test_own_templates_are_stamped_on_each_row_and_copied_into_the_run(spark, corpus, tmp_path):
    own = tmp_path / "own"
    own.mkdir()
    (own / "terse.json").write_text(json.dumps({
        "id": "terse", "version": 2, "style": "terse", "system": "Be terse.",
        "user": "In one line:\n{document}", "quality": {"max_ratio": 0.5}}))
    (terse,) = load_templates(["terse"], f"file://{own}")
    out = f"file://{tmp_path}/run"
    plan = stitch(_config(corpus, out, templates=[terse], styles_per_doc=1), spark)
    rows = _prompts(out).to_pylist()
    assert {(r["template_id"], r["template_hash"]) for r in rows} == {("terse", terse.hash)}
    assert rows[0]["user"].startswith("In one line:\nDocument ")
    assert plan["templates"] == [
        {"id": "terse", "version": 2, "style": "terse", "hash": terse.hash}]
    (own / "terse.json").unlink()  # the run keeps its own copy for validate's gate
    assert load_template("terse", RunLayout(out).prompt_templates) == terse


def test_shards_are_cut_to_the_token_budget(first_run):
    out, plan = first_run
    shards = plan["shards"]
    assert [s["name"] for s in shards] == [f"shard-{i:05d}" for i in range(len(shards))]
    assert len(shards) >= 3
    for shard in shards[:-1]:
        assert abs(shard["tokens"] - 4096) / 4096 <= 0.10, shard
    on_disk = json.loads(storage.read_bytes(storage.join(out, "prompts", "shards.json")))
    assert on_disk["shards"] == shards
    for shard in shards:
        assert storage.read_table(shard["url"]).num_rows == shard["rows"]


def test_rerun_is_identical(spark, corpus, first_run, tmp_path):
    out, _ = first_run
    again = f"file://{tmp_path}/again"
    stitch(_config(corpus, again), spark)
    for name in ("shard-00000.parquet", "shard-00001.parquet"):
        first = storage.read_table(storage.join(out, "prompts", name))
        second = storage.read_table(storage.join(again, "prompts", name))
        assert first.equals(second)


def test_duplicate_of_an_unsplittable_document_is_quarantined_once(spark, tmp_path):
    long_text = _blob(1)
    pq.write_table(pa.table({"id": ["long", "ok"], "text": [long_text, _text(1)]}),
                   tmp_path / "a.parquet")
    pq.write_table(pa.table({"id": ["long"], "text": [long_text]}), tmp_path / "b.parquet")
    cfg = _config(tmp_path, f"file://{tmp_path}/run", styles_per_doc=1,
                  files=[f"file://{tmp_path}/a.parquet", f"file://{tmp_path}/b.parquet"])
    plan = stitch(cfg, spark)
    assert plan["rows_in"] == 3 and plan["prompt_rows"] == 1 and plan["quarantined"] == 2
    assert set(plan["quarantine_reasons"]) == {
        "duplicate id",
        next(r for r in plan["quarantine_reasons"] if r.startswith("no split fits"))}
    assert (plan["chunked_documents"], plan["chunks"]) == (0, 0)


def test_missing_column_names_file_and_column(spark, corpus, tmp_path):
    cfg = _config(corpus, f"file://{tmp_path}/x", text_column="body")
    with pytest.raises(Exception, match=r"_\w+\.parquet: missing column 'body'"):
        stitch(cfg, spark)


def test_cli_reports_unreadable_file_and_bad_template(tmp_path):
    broken = tmp_path / "broken.parquet"
    broken.write_bytes(b"not parquet at all")
    manifest = tmp_path / "manifest"
    manifest.mkdir()
    pq.write_table(pa.table({"key": [f"file://{broken}"]}), manifest / "part-00000.parquet")
    cli = [sys.executable, "-m", "synthfactory.cli", "stitch", "--manifest",
           f"file://{manifest}", "--run", f"file://{tmp_path}/run", "--shard-tokens", "4096"]
    bad_template = subprocess.run([*cli, "--templates", "sonnet"], capture_output=True, text=True)
    assert bad_template.returncode == 3  # a retry finds the same folder
    assert "template 'sonnet': not found" in bad_template.stderr
    unreadable = subprocess.run([*cli, "--templates", "qa"], capture_output=True, text=True)
    assert unreadable.returncode == 3  # a broken local file: not retried
    assert "broken.parquet: unreadable parquet" in unreadable.stderr


def test_budget_below_context_is_refused():
    from argparse import Namespace

    from synthfactory.stitch.command import run

    args = Namespace(shard_tokens=100, max_model_len=2048, min_quality=None,
                     quality_column=None)
    with pytest.raises(SynthfactoryError, match="--shard-tokens 100: below --max-model-len 2048"):
        run(args)


def test_auto_budgets_follow_each_source_and_template(spark, corpus, tmp_path):
    """max_new_tokens auto: each row's budget is its source's tokens times its template's
    max_ratio plus the margin, never capped: every prompt and its full budget fit the
    window (a document that would not is cut into chunks; none is here)."""
    import math

    from synthfactory.stitch import budget, tokens

    out = f"file://{tmp_path}/run"
    plan = stitch(_config(corpus, out, max_new_tokens="auto"), spark)
    assert plan["max_new_tokens"] == "auto"
    table = _prompts(out).to_pylist()
    tok_json = tokens.tokenizer_json(str(default_model_dir()))
    templates = {t.id: t for t in load_templates(TEMPLATES)}
    overhead = {t.id: tokens.template_overhead(tok_json, t.system, t.render_user(""))
                for t in templates.values()}
    for row in table:
        source_tokens = row["prompt_tokens"] - overhead[row["template_id"]]
        ratio = budget.budget_ratio(templates[row["template_id"]])
        expected = math.ceil(source_tokens * ratio) + budget.MARGIN
        assert row["max_new_tokens"] == expected, row["id"]
        assert row["prompt_tokens"] + row["max_new_tokens"] <= 2048, row["id"]
    summaries = [r["max_new_tokens"] for r in table if r["template_id"] == "summary"]
    articles = [r["max_new_tokens"] for r in table if r["template_id"] == "encyclopedic"]
    assert max(summaries) < max(articles)  # a summary is short by design
    assert len({r["max_new_tokens"] for r in table}) > 10  # not one number for every row
    # the shards' token budgets count each row's own budget
    assert sum(s["tokens"] for s in plan["shards"]) == sum(
        r["prompt_tokens"] + r["max_new_tokens"] for r in table)
    # the blob fits no chunk: the only document set aside for its length
    assert [k for k in plan["quarantine_reasons"] if "context window" in k] == [
        k for k in plan["quarantine_reasons"] if k.startswith("no split fits")]
    assert any(k.startswith("no split fits") for k in plan["quarantine_reasons"])

