"""The run report's quality section on a real run folder: prompt shards, the worker
(a scripted engine whose outputs earn one reason each), validate's quality gate, then
``synthfactory report``. Also: a run validated before the gate, seeds selected by
quality, and the demo summary's lines."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from synthfactory import cli, storage
from synthfactory.contract import RunFolder
from synthfactory.demo_summary import LABEL, quality_lines
from synthfactory.errors import PermanentError
from synthfactory.join import join_run
from synthfactory.layout import RunLayout
from synthfactory.rephrase.engines import Completion, EchoEngine
from synthfactory.rephrase.worker import WorkerOptions, rephrase_shard
from synthfactory.report_figures import build_report, shard_figures
from synthfactory.stitch.prompt_table import prompt_table
from synthfactory.stitch.reader import read_documents
from synthfactory.stitch.templates import load_template
from synthfactory.validate import FLAGS, validate_shard
from tests.support.quality_texts import GERMAN, REFUSAL, REWRITE, SOURCE, SUMMARY
from tests.support.run_folders import build_run

PNG = b"\x89PNG\r\n\x1a\n"
# per shard: (template, [(output, finish_reason, the reasons the gate gives)])
SOURCE_TOKENS = 40  # what stitch would have counted for each document
SHARDS = [
    ("encyclopedic", [(REWRITE, "stop", []), (REWRITE, "length", ["truncated"]),
                      (REFUSAL, "stop", ["refusal"]), (SOURCE, "stop", ["copy_of_source"]),
                      ("A framework for interpreters.", "stop", ["too_short"]),
                      (REWRITE, "stop", ["duplicate"])]),
    ("summary", [(SUMMARY, "stop", []), (REWRITE, "stop", ["too_long"]),
                 (GERMAN, "stop", ["language"])]),
]
STITCH_REASONS = {"quality below threshold 0.5": 2, "quality missing": 1, "duplicate id": 1}
GENERATION_S, DEVICE_S = 10.0, 20.0  # per shard: two devices


class Scripted(EchoEngine):
    """The echo engine's queue and out-of-order finishing, with the outputs given."""

    def __init__(self, outputs):
        super().__init__(per_poll=2)
        self.outputs = outputs

    def poll(self) -> list[Completion]:
        return [Completion(c.row, self.outputs[c.row][0], c.prompt_tokens,
                           len(self.outputs[c.row][0].split()), self.outputs[c.row][1])
                for c in super().poll()]


def _report(run_url: str, *extra: str) -> dict:
    assert cli.main(["report", "--run", run_url, *extra]) == 0
    return storage.read_json(storage.join(run_url, "report", "report.json"))


def _gated(tmp_path, shards) -> RunLayout:
    """A run folder of ``shards`` (as SHARDS), rephrased by Scripted and validated."""
    layout = RunLayout(storage.join(storage.normalize(str(tmp_path)), "synthetic_rephrase",
                                    "2026-01-01"))
    entries, templates, n = [], [], 0
    for index, (template_id, rows) in enumerate(shards):
        template = load_template(template_id)
        ids = [f"doc-{n + i:02d}" for i in range(len(rows))]
        n += len(rows)
        url = layout.prompt_shard(index)
        storage.write_table(prompt_table(template, ids, [SOURCE] * len(rows), 64,
                                         source_tokens=[SOURCE_TOKENS] * len(rows)), url)
        entries.append({"name": f"shard-{index:05d}", "url": url, "rows": len(rows),
                        "tokens": 100})
        templates.append({"id": template.id, "version": template.version,
                          "style": template.style})
    quarantined = sum(STITCH_REASONS.values())
    storage.write_json(layout.shards_json, {
        "shards": entries, "templates": templates, "rows_in": n + quarantined,
        "prompt_rows": n, "quarantined": quarantined, "quarantine_reasons": STITCH_REASONS,
        "styles_per_doc": 1, "shard_tokens": 4096})
    storage.write_json(storage.join(layout.manifest, "_SUMMARY.json"),
                       {"objects": 1, "bytes": 1, "partitions": 1, "source": "file:///c"})
    for entry, (_, rows) in zip(entries, shards, strict=True):
        rephrase_shard(entry["url"], layout.run_url, lambda rows=rows: Scripted(rows),
                       WorkerOptions(model="scripted", checkpoint_rows=2))
        commit_url = storage.join(layout.shard_output(entry["name"]), "_COMMITTED.json")
        commit = storage.read_json(commit_url)
        commit["timings"]["generation_s"], commit["device_seconds"] = GENERATION_S, DEVICE_S
        storage.write_json(commit_url, commit)
        validate_shard(entry["url"], layout.run_url, 0.5)
    join_run(layout.run_url)
    return layout


@pytest.fixture
def gated_run(tmp_path) -> RunLayout:
    return _gated(tmp_path, SHARDS)


def test_quality_section_adds_up_against_the_verdicts(gated_run):
    report = _report(gated_run.run_url, "--gpu-hour-usd", "3.0")
    quality = report["quality"]
    verdicts = pa.concat_tables(
        storage.read_table(gated_run.shard_verdicts(f"shard-{i:05d}")) for i in range(2))
    usable = [v for v in verdicts.to_pylist() if v["usable"]]

    assert report["complete"] is True, report["missing"]
    assert quality["shards_gated"] == 2 and quality["rows"] == 9 == verdicts.num_rows
    assert (quality["usable"], quality["rejected"]) == (len(usable), 7) == (2, 7)
    assert quality["yield"] == round(2 / 9, 4)
    expected = {r: 0 for r in quality["reasons"]}
    for _, rows in SHARDS:
        for _, _, reasons in rows:
            for reason in reasons:
                expected[reason] += 1
    assert quality["reasons"] == expected and len(expected) == 17  # every reason, zeros too
    assert quality["contaminated_by"] == {}  # no --benchmarks
    rewrite, summary = len(REWRITE.split()), len(SUMMARY.split())  # the Scripted counts
    assert quality["by_template"] == {
        "encyclopedic": {"generated": 6, "usable": 1, "yield": round(1 / 6, 4), "joined": 6,
                         "source_tokens": 6 * SOURCE_TOKENS, "usable_tokens": rewrite,
                         "token_yield": round(rewrite / (6 * SOURCE_TOKENS), 4)},
        "summary": {"generated": 3, "usable": 1, "yield": round(1 / 3, 4), "joined": 3,
                    "source_tokens": 3 * SOURCE_TOKENS, "usable_tokens": summary,
                    "token_yield": round(summary / (3 * SOURCE_TOKENS), 4)}}

    tokens = sum(v["output_tokens"] for v in usable)
    assert quality["usable_output_tokens"] == tokens == len(REWRITE.split()) + len(
        SUMMARY.split())
    assert quality["usable_tokens_per_s"] == round(tokens / (2 * GENERATION_S), 2)
    assert quality["usable_tokens_per_device_s"] == round(tokens / (2 * DEVICE_S), 2)
    assert report["tokens"]["tokens_per_s"] > quality["usable_tokens_per_s"]
    usd = 2 * DEVICE_S / 3600 * 3.0
    assert report["cost"]["usd_per_1b_usable_tokens"] == round(usd / tokens * 1e9, 2)
    assert report["cost"]["usd_per_1b_usable_tokens"] > report["cost"][
        "usd_per_1b_output_tokens"]

    # the usable rows' grounding adds up: by band, by template, by how they ended
    grounding = quality["grounding"]
    assert sum(grounding["bands"].values()) == 2 == sum(
        f["rows"] for f in grounding["by_ending"].values())
    assert {t: sum(c.values()) for t, c in grounding["by_template"].items()} == {
        "encyclopedic": 1, "summary": 1}
    assert grounding["by_ending"]["stopped"]["grounded"] is not None

    assert report["rephrase"]["rows_truncated"] == 1
    assert report["rephrase"]["truncated_share"] == round(1 / 9, 4)
    assert [s["usable"] for s in report["shards"]] == [1, 1]
    assert report["figures"]["rejection_reasons"] == "rejection_reasons.png"
    png = storage.read_bytes(storage.join(gated_run.run_url, "report", "rejection_reasons.png"))
    assert png.startswith(PNG)


def test_validate_rejects_rows_quoting_a_benchmark_and_the_report_counts_them(gated_run,
                                                                              tmp_path):
    """validate --benchmarks over the gated run again: the rows whose output quotes a
    made-up benchmark item (16 words of REWRITE's second sentence) are rejected as
    contaminated, naming it; the report counts them per benchmark."""
    bench = tmp_path / "benchmarks"
    bench.mkdir()
    (bench / "admin_quiz.jsonl").write_text(json.dumps({
        "text": "Which programs serve well as testing harnesses, admin utilities and early "
                "prototypes before a richer interface arrives?"}) + "\n")
    (bench / "rivers.jsonl").write_text(json.dumps({
        "text": "Name the longest river that flows through three capital cities of Europe "
                "before it reaches the sea."}) + "\n")
    shards = [gated_run.prompt_shard(i) for i in range(2)]
    assert cli.main(["validate", *(f for s in shards for f in ("--shard", s)),
                     "--benchmarks", f"file://{bench}"]) == 0
    verdicts = pa.concat_tables(
        storage.read_table(gated_run.shard_verdicts(f"shard-{i:05d}"))
        for i in range(2)).to_pylist()
    quoting = [v for v in verdicts if REWRITE in v["clean_text"]]
    assert len(quoting) == 4  # encyclopedic rows 0, 1, 5; summary row 1
    assert all("contaminated" in v["reasons"] and v["contaminated_by"] == ["admin_quiz"]
               for v in quoting)
    assert [v for v in verdicts if v not in quoting and v["contaminated_by"]] == []
    quality = _report(gated_run.run_url)["quality"]
    assert quality["contaminated_by"] == {"admin_quiz": 4}
    assert quality["reasons"]["contaminated"] == 4
    assert quality["usable"] == 1  # the summary; the encyclopedic rewrite quotes the quiz
    # the rejected rows name it too
    rejected = pa.concat_tables(storage.read_table(gated_run.shard_rejected(f"shard-{i:05d}"))
                                for i in range(2)).to_pylist()
    assert sorted(r["row"] for r in rejected if r["contaminated_by"] == ["admin_quiz"]) == [
        0, 1, 1, 5]


def test_one_rejected_example_per_reason_with_its_source(gated_run):
    examples = _report(gated_run.run_url)["quality"]["examples"]
    outputs = {(s, r): out for s, (_, rows) in enumerate(SHARDS)
               for r, (out, _, _) in enumerate(rows)}
    assert [e["reason"] for e in examples] == [
        "truncated", "refusal", "copy_of_source", "too_short", "too_long", "language",
        "duplicate"]  # the gate's order
    for example in examples:
        assert example["reasons"] == [example["reason"]]
        assert example["source_excerpt"] == SOURCE  # the document, not the whole prompt
        shard = int(example["shard"][-5:])
        assert example["output_excerpt"] == outputs[(shard, example["row"])]
        assert example["template_id"] == SHARDS[shard][0]
    duplicate = next(e for e in examples if e["reason"] == "duplicate")
    assert duplicate["row"] == 5  # the later copy, not the row that was kept


def test_the_ui_view_so_far_has_the_same_counts_without_examples(gated_run):
    report = _report(gated_run.run_url)
    files = RunFolder(gated_run.run_url, storage.read_json_or_none).read()
    so_far = build_report(gated_run.run_url, files, [shard_figures(s) for s in files.shards])
    assert so_far["quality"] == {**report["quality"], "examples": []}
    assert so_far["rephrase"]["truncated_share"] == report["rephrase"]["truncated_share"]


def test_seeds_selected_by_quality_are_counted(gated_run):
    stitch = _report(gated_run.run_url)["stitch"]
    assert stitch["documents_in"] == 13
    assert stitch["documents_below_min_quality"] == 2
    assert stitch["documents_without_quality"] == 1
    assert stitch["documents_stitched"] == 9
    assert stitch["quarantined_by_reason"]["quality below threshold 0.5"] == 2


def test_demo_summary_prints_usable_rows_tokens_and_truncated_share(gated_run):
    report = _report(gated_run.run_url)
    lines = quality_lines(report)
    assert [line[:LABEL].strip() for line in lines] == [
        "usable rows", "truncated share", "usable tokens"]
    assert all(line[LABEL - 1] == " " and line[LABEL] != " " for line in lines)
    usable, truncated, tokens = (line[LABEL:] for line in lines)
    assert usable == ("2 of 9 (22.2%); rejected 7 (copy_of_source 1, duplicate 1, language 1, "
                      "refusal 1, too_long 1, too_short 1, truncated 1)")
    assert truncated == "11.1% of rows stopped at their token budget (1 truncated)"
    rate = report["quality"]["usable_tokens_per_s"]
    assert tokens == f"{report['quality']['usable_output_tokens']} = {rate:.1f} usable tokens/s"


def test_demo_summary_says_how_grounded_the_usable_rows_are(gated_run):
    from synthfactory.demo_summary import grounding_lines, showcase

    report = _report(gated_run.run_url)
    lines = grounding_lines(report)
    assert [line[:LABEL].strip() for line in lines] == [
        "grounded usable rows", "rejected for grounding", "usable, stopped"]
    bands = report["quality"]["grounding"]["bands"]
    assert lines[0][LABEL:].startswith(", ".join(f"{b} {n}" for b, n in bands.items()))
    assert lines[1][LABEL:] == "ungrounded 0, content_lost 0, invented 0, repeated_block 0"
    # the example is usable, and the best-grounded of the usable rows
    joined = pa.concat_tables(storage.read_table(u) for u in storage.list_files(
        storage.join(gated_run.run_url, "joined"), suffix=".parquet")).to_pylist()
    example = showcase(gated_run.run_url)
    assert example["usable"] and example["grounded"] == max(
        r["grounded"] for r in joined if r["usable"])


def test_validates_flags_are_the_gates_reasons_counted_once(tmp_path):
    """One count per flag: validate's flags are the gate's reasons of those names, on the
    cleaned text. Flagged on the raw text (as before), the preamble-only row counted 0
    empty while the gate rejected it as empty."""
    shards = [("encyclopedic", [(REWRITE, "stop", []),
                                ("Sure! Here is the rewritten text:", "stop", ["empty"]),
                                (REFUSAL, "length", ["refusal", "truncated"])])]
    layout = _gated(tmp_path, shards)
    report = storage.read_json(layout.shard_validation("shard-00000"))
    verdicts = storage.read_table(layout.shard_verdicts("shard-00000")).to_pylist()
    assert report["flags"] == {"empty": 1, "truncated": 1, "repetition": 0, "refusal": 1}
    assert report["flags"] == {flag: report["quality"]["reasons"][flag] for flag in FLAGS}
    assert report["rows_flagged"] == 2 == sum(bool(set(v["reasons"]) & set(FLAGS))
                                              for v in verdicts)


def test_a_run_validated_before_the_gate_still_gets_its_report(tmp_path):
    run = build_run(storage.normalize(str(tmp_path / "out")), shard_rows=(5, 4), quarantined=1)
    for name in ("shard-00000", "shard-00001"):  # validation files of an older engine
        url = storage.join(run.layout.validation, f"{name}.json")
        storage.write_json(url, {k: v for k, v in storage.read_json(url).items()
                                 if k != "quality"})
        storage.delete(run.layout.shard_verdicts(name))
    report = _report(run.run_url)
    assert report["quality"] is None
    assert "rejection_reasons" not in report["figures"]
    assert report["cost"]["usd_per_1b_usable_tokens"] is None
    assert [m for m in report["missing"] if "quality" in m] == [
        f"validation/{n}.json: no quality verdicts (validated before the quality gate; "
        "rerun shard.validate)" for n in ("shard-00000", "shard-00001")]
    assert report["rephrase"]["rows_truncated"] == 2  # validation's flags, as before
    assert report["rephrase"]["truncated_share"] == round(2 / 7, 4)
    assert quality_lines(report)[0] == ("usable rows".ljust(LABEL) + "n/a (no quality "
                                        "verdicts: validated before the quality gate)")


def _corpus(tmp_path) -> str:
    """A corpus of one's own: columns doc_id, content, score; and its crawl manifest."""
    seeds = tmp_path / "seeds.parquet"
    pq.write_table(pa.table({"doc_id": ["a", "b"], "content": [SOURCE, REWRITE],
                             "score": [0.9, 0.1]}), seeds)
    (tmp_path / "manifest").mkdir()
    pq.write_table(pa.table({"key": [f"file://{seeds}"]}),
                   tmp_path / "manifest" / "part-00000.parquet")
    return f"file://{tmp_path}/manifest"


@pytest.mark.parametrize(("flags", "column"), [
    ([], "id"),
    (["--id-column", "doc_id"], "text"),
    (["--id-column", "doc_id", "--text-column", "content", "--quality-column", "quality",
      "--min-quality", "0.5"], "quality"),
])
def test_a_wrong_column_fails_stitch_naming_it_and_the_columns_there(tmp_path, capsys,
                                                                     flags, column):
    manifest = _corpus(tmp_path)
    code = cli.main(["stitch", "--manifest", manifest, "--run", f"file://{tmp_path}/run",
                     "--templates", "summary", "--shard-tokens", "4096", *flags])
    assert code == 3  # a retry reads the same file: never retried
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.endswith(f"seeds.parquet: missing column {column!r} "
                         "(columns: ['doc_id', 'content', 'score'])")


def test_the_workers_name_a_wrong_column_of_any_file(tmp_path):
    _corpus(tmp_path)
    with pytest.raises(PermanentError, match=r"seeds.parquet: missing column 'quality' "
                                             r"\(columns: \['doc_id', 'content', 'score'\]\)"):
        read_documents(f"file://{tmp_path}/seeds.parquet", "doc_id", "content", "quality")


def test_empty_quality_flags_mean_unset(tmp_path, capsys):
    manifest = _corpus(tmp_path)
    code = cli.main(["stitch", "--manifest", manifest, "--run", f"file://{tmp_path}/run",
                     "--templates", "summary", "--shard-tokens", "4096",
                     "--quality-column=", "--min-quality=0.5"])
    assert code == 3
    # the steps table's rule, in the command line's words (check_params: the Params')
    assert capsys.readouterr().err.strip().endswith(
        "--min-quality 0.5: needs --quality-column, the seed files' column to compare with "
        "it; set --quality-column or empty --min-quality")
