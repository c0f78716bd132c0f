"""Long documents from stitch to the catalog: cut into chunks (real Spark, local mode),
the chunks spread over two shard groups, rephrased by the real worker (an engine that
answers with the chunk it was given, so order is visible), one shard killed mid-
generation and resumed, validated, joined back (``synthfactory join``), registered and
audited: one row per document and template, its chunks' outputs in order."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from synthfactory import storage
from synthfactory.audit import audit
from synthfactory.catalog import config
from synthfactory.catalog.command import register
from synthfactory.contract import paths
from synthfactory.contract.flag_types import AUTO
from synthfactory.errors import SynthfactoryError
from synthfactory.join import SEAM, join_run
from synthfactory.layout import RunLayout
from synthfactory.model import default_model_dir, is_ready
from synthfactory.plan import group_shards
from synthfactory.rephrase.engines import Completion, EchoEngine
from synthfactory.rephrase.worker import WorkerOptions, read_commit, rephrase_shard
from synthfactory.stitch.job import StitchConfig, stitch
from synthfactory.stitch.templates import load_templates
from synthfactory.validate import validate_shard

pytestmark = [pytest.mark.slow, pytest.mark.skipif(
    not is_ready(default_model_dir()), reason="run `synthfactory model prepare` (make setup)")]

WINDOW = 512
TABLE = "synthetic.rephrased"
SENTENCE = ("The reader checks every field of the record before it hands the row on, so a "
            "broken line stops the job early with its number. ")


def _long(doc: int, sections: int) -> str:
    parts = [f"# Guide {doc}\n\n"]
    for s in range(sections):
        parts.append(f"## Part {s} of guide {doc}\n\n")
        parts.append(f"Section {s} of guide {doc} begins here. " + SENTENCE * 6 + "\n\n")
        parts.append(f"```python\ndef step_{doc}_{s}(row):\n    return row[{s}]\n```\n\n")
    return "".join(parts)


DOCS = {"guide-a": _long(1, 8), "guide-b": _long(2, 12), "short-1": "A short note. " * 5,
        "short-2": "Another short document about files. " * 4,
        "blob": "x" * 30000}  # one word no split can fit: quarantined at stitch


class ChunkEcho(EchoEngine):
    """Answers each prompt with its last words (the end of the chunk it was given), so a
    joined output shows which chunk went where."""

    def poll(self) -> list[Completion]:
        batch = [self._queue.popleft() for _ in range(min(self.per_poll, len(self._queue)))]
        return [Completion(row, " ".join(user.split()[-12:]), len(user.split()), 12, "stop")
                for row, user, _ in batch]


class Crash(BaseException):
    """Not an Exception: nothing in the worker catches it, as nothing survives a kill."""


class CrashingEcho(ChunkEcho):
    def __init__(self, after_polls: int):
        super().__init__(per_poll=2)
        self.left = after_polls

    def poll(self) -> list[Completion]:
        self.left -= 1
        if self.left < 0:
            raise Crash()
        return super().poll()


@pytest.fixture(scope="module")
def joined_run(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("join")
    pq.write_table(pa.table({"id": list(DOCS), "text": list(DOCS.values())}),
                   root / "seeds.parquet")
    out = f"file://{root}/run"
    plan = stitch(StitchConfig(
        files=[f"file://{root}/seeds.parquet"], run=RunLayout(out),
        templates=load_templates(["encyclopedic", "qa"]), model_dir=str(default_model_dir()),
        shard_tokens=2048, styles_per_doc=1, max_new_tokens=AUTO, max_model_len=WINDOW,
        partitions=2), spark)
    storage.write_table(pa.table({"key": [f"file://{root}/seeds.parquet"]}),
                        storage.join(RunLayout(out).manifest, "part-00000.parquet"))
    groups = group_shards(plan["shards"], 2)
    group_of = {s["name"]: g for g, shards in enumerate(groups) for s in shards}
    rows = [dict(r, shard=s["name"]) for s in plan["shards"]
            for r in storage.read_table(s["url"]).to_pylist()]
    # the shard holding guide-b's middle chunk crashes after its first checkpoint part
    guide = sorted((r for r in rows if r["doc_id"] == "guide-b"),
                   key=lambda r: r["chunk_index"])
    middle = guide[len(guide) // 2]
    options = WorkerOptions(model="echo", checkpoint_rows=2)
    resumed = {}
    for shard in plan["shards"]:
        if shard["name"] == middle["shard"]:
            with pytest.raises(Crash):
                rephrase_shard(shard["url"], out, lambda: CrashingEcho(after_polls=2), options)
            assert read_commit(RunLayout(out).shard_output(shard["name"])) is None
        summary = rephrase_shard(shard["url"], out, lambda: ChunkEcho(), options)
        resumed[shard["name"]] = summary["resumed_rows"]
        validate_shard(shard["url"], out, 0.5)
    return {"out": out, "plan": plan, "rows": rows, "group_of": group_of,
            "crashed": middle["shard"], "resumed": resumed, "summary": join_run(out),
            "root": root}


def _joined(out: str) -> list[dict]:
    summary = storage.read_json(storage.join(out, paths.JOINED_SUMMARY))
    return [r for p in summary["parts"]
            for r in storage.read_table(storage.join(out, paths.JOINED, p["name"])).to_pylist()]


def test_chunked_documents_span_two_shard_groups(joined_run):
    plan, rows, group_of = joined_run["plan"], joined_run["rows"], joined_run["group_of"]
    assert plan["chunked_documents"] == 2 and plan["quarantined"] == 1  # guides; the blob
    groups = {g for r in rows if r["doc_id"] == "guide-b" for g in [group_of[r["shard"]]]}
    assert groups == {0, 1}, "the test needs guide-b's chunks in both shard groups"


def test_a_chunk_crashed_mid_generation_is_generated_exactly_once(joined_run):
    # two polls of two rows: two checkpoint parts written before the crash, kept
    assert joined_run["resumed"][joined_run["crashed"]] == 4
    report = audit(joined_run["out"])
    assert report.problems == []
    assert report.generated + report.quarantined == report.prompt_rows
    assert report.duplicated == 0 and report.lost == 0


def test_one_row_per_document_and_template_with_chunks_in_order(joined_run):
    rows, joined = joined_run["rows"], _joined(joined_run["out"])
    assert sorted(r["id"] for r in joined) == ["guide-a", "guide-b", "short-1", "short-2"]
    for row in joined:
        chunks = sorted((r for r in rows if r["doc_id"] == row["id"]),
                        key=lambda r: r["chunk_index"])
        assert row["chunk_count"] == len(chunks) == chunks[0]["chunk_count"]
        # each chunk answered with its own last words: in chunk order, nothing else
        outputs = [" ".join(c["user"].split()[-12:]) for c in chunks]
        assert row["output_text"] == SEAM.join(outputs)
        assert [row["output_text"][start:start + len(o)] for start, o in zip(
            row["chunk_offsets"], outputs, strict=True)] == outputs  # the seams
        assert row["source_tokens"] == sum(c["source_tokens"] for c in chunks)
        assert row["shard"] == chunks[0]["shard"]
    guide = next(r for r in joined if r["id"] == "guide-b")
    assert guide["chunk_count"] >= 4
    assert len(set(guide["output_text"].split(SEAM))) > 1  # the chunks answered apart


def test_the_join_summary_adds_up(joined_run):
    summary, plan = joined_run["summary"], joined_run["plan"]
    assert summary["generated"] == plan["prompt_rows"]  # the chunk echo quarantines nothing
    assert summary["joined"] == 4 and summary["chunked"] == 2
    assert summary["chunks_joined"] + summary["chunks_left_out"] == summary["generated"]
    assert summary["usable"] + summary["rejected"] == summary["joined"]
    assert sum(t["rows"] for t in summary["by_template"].values()) == summary["joined"]
    assert summary["source_tokens"] == plan["covered_tokens"]


def _set_verdicts(joined_run, doc: str, rejected: set[int]) -> None:
    """The gate's verdicts of ``doc``'s chunks: usable, except the ``rejected`` indices
    (too_short); the echo's short answers were all rejected by the real gate."""
    layout = RunLayout(joined_run["out"])
    index = {r["id"]: r["chunk_index"] for r in joined_run["rows"] if r["doc_id"] == doc}
    for shard in {r["shard"] for r in joined_run["rows"] if r["doc_id"] == doc}:
        verdicts = storage.read_table(layout.shard_verdicts(shard))
        rows = verdicts.to_pylist()
        for row in rows:
            if row["id"] in index:
                bad = index[row["id"]] in rejected
                row.update(usable=not bad, reasons=["too_short"] if bad else [],
                           clean_text=None if bad else f"clean {index[row['id']]}")
        storage.write_table(pa.Table.from_pylist(rows, schema=verdicts.schema),
                            layout.shard_verdicts(shard))


def test_a_rejected_chunk_rejects_its_document_and_stays_readable(joined_run):
    out = joined_run["out"]
    shards = {r["shard"] for r in joined_run["rows"] if r["doc_id"] == "guide-a"}
    layout = RunLayout(out)
    saved = {s: storage.read_table(layout.shard_verdicts(s)) for s in shards}
    try:
        _set_verdicts(joined_run, "guide-a", set())
        join_run(out)
        guide = next(r for r in _joined(out) if r["id"] == "guide-a")
        assert guide["usable"] is True and guide["rejected_chunks"] == []
        assert guide["clean_text"] == SEAM.join(f"clean {i}"
                                                for i in range(guide["chunk_count"]))

        _set_verdicts(joined_run, "guide-a", {1})
        join_run(out)
        guide = next(r for r in _joined(out) if r["id"] == "guide-a")
        assert guide["usable"] is False and guide["rejected_chunks"] == [1]
        assert guide["reasons"] == ["too_short"] and guide["clean_text"] is None
        assert guide["output_text"]  # still readable whole, with its verdict
        assert audit(out).problems == []  # the join agrees with the verdicts as they are
    finally:
        for shard, table in saved.items():
            storage.write_table(table, layout.shard_verdicts(shard))
        join_run(out)


def test_register_writes_the_joined_grain_and_the_audit_adds_up(joined_run, tmp_path):
    out = joined_run["out"]
    settings = config.resolve_catalog("synthfactory", uri=f"sqlite:///{tmp_path}/c.db",
                                      warehouse=f"file://{tmp_path}/wh")
    summary = register(out, TABLE, settings, include_rejected=True)
    assert summary["rows"] == 4 == summary["joined_rows"]
    catalog = config.open_catalog(settings)
    try:
        table = catalog.load_table(TABLE).scan().to_arrow()
    finally:
        config.close_catalog(catalog)
    assert sorted(zip(table["id"].to_pylist(), table["chunk_count"].to_pylist(),
                          strict=True)) == sorted(
        (r["id"], r["chunk_count"]) for r in _joined(out))
    report = audit(out, TABLE, settings)
    assert report.problems == []
    assert report.joined == 4 and report.left_out == 0 and report.registered == 4


def test_the_report_and_the_demo_summary_give_the_token_yield(joined_run, capsys):
    import argparse

    from synthfactory.demo_summary import joined_example, yield_lines
    from synthfactory.report.command import run as report

    out, plan, joined = joined_run["out"], joined_run["plan"], joined_run["summary"]
    report(argparse.Namespace(run=out, gpu_hour_usd=2.0, dag_id=None, airflow_run_id=None))
    written = storage.read_json(storage.join(out, paths.REPORT_JSON))
    y = written["token_yield"]
    assert (y["seed_documents"], y["seed_tokens"]) == (len(DOCS), plan["seed_tokens"])
    assert (y["chunked_documents"], y["chunks"]) == (2, plan["chunks"])
    assert y["covered_tokens"] == plan["covered_tokens"] < plan["seed_tokens"]  # the blob
    assert y["usable_tokens"] == joined["usable_output_tokens"]
    assert y["yield"] == round(y["usable_tokens"] / y["seed_tokens"], 4)
    for template, t in written["quality"]["by_template"].items():
        assert t["source_tokens"] == joined["by_template"][template]["source_tokens"]
    assert not any("joined" in m for m in written["missing"])  # no crawl here: its line only
    lines = yield_lines(written)
    assert lines[0].split() == ["chunked", "documents", "2", "longer", "than", "the",
                                "window,", "cut", "into", str(plan["chunks"]), "chunks",
                                "and", "joined", "back"]
    assert any(line.startswith("token yield") for line in lines)
    example = joined_example(out)
    assert example[0].startswith("joined example") and "chunks" in example[0]
    assert example[1] == "  source: # Guide 1" or example[1] == "  source: # Guide 2"
    chunk_lines = [line for line in example if line.startswith("  chunk ")]
    guide = next(r for r in _joined(out) if r["chunk_count"] > 1
                 and example[0].split("document ")[1].startswith(r["id"]))
    assert len(chunk_lines) == guide["chunk_count"]  # one line a chunk, at the seams


def test_register_refuses_a_join_older_than_a_commit(joined_run, tmp_path):
    out = joined_run["out"]
    summary_url = storage.join(out, paths.JOINED_SUMMARY)
    saved = storage.read_json(summary_url)
    try:
        storage.write_json(summary_url, {**saved, "commits": {
            **saved["commits"], joined_run["crashed"]: "sha256:older"}})
        settings = config.resolve_catalog("synthfactory", uri=f"sqlite:///{tmp_path}/c.db",
                                          warehouse=f"file://{tmp_path}/wh")
        with pytest.raises(SynthfactoryError, match="stale: joined before the latest commit"):
            register(out, TABLE, settings)
    finally:
        storage.write_json(summary_url, saved)
