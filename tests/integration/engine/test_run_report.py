"""``synthfactory report`` on real run folders: a finished run, a run still rephrasing,
a run that failed before stitch. The report's figures must add up against the files."""

from __future__ import annotations

import pyarrow as pa
import pytest

from synthfactory import cli, storage
from synthfactory.contract.names import DEFAULT_GPU_HOUR_USD, GPU_HOUR_USD_ENV
from tests.support.run_folders import build_run

PNG = b"\x89PNG\r\n\x1a\n"
TOO_LONG = "too long for the context window (1900 prompt + 128 new tokens > 2048)"


def _stitch_quarantine(run) -> None:
    """What stitch leaves for 3 quarantined documents: parts plus counts in shards.json."""
    rows = [{"id": "dup-1", "source": "s", "source_row": 1, "reason": "duplicate id"},
            {"id": "long-1", "source": "s", "source_row": 2, "reason": TOO_LONG},
            {"id": "long-2", "source": "s", "source_row": 3, "reason": TOO_LONG}]
    storage.write_table(pa.Table.from_pylist(rows),
                        storage.join(run.layout.quarantine, "stitch", "part-00000.parquet"))
    plan = storage.read_json(run.layout.shards_json)
    plan.update(rows_in=plan["rows_in"] + 3, quarantined=3,
                quarantine_reasons={"duplicate id": 1, TOO_LONG: 2})
    storage.write_json(run.layout.shards_json, plan)


def _manifest(run) -> None:
    storage.write_json(storage.join(run.layout.manifest, "_SUMMARY.json"),
                       {"objects": 1, "bytes": 1234, "partitions": 1, "source": "file:///src"})


def _report(run_url: str, *extra: str) -> dict:
    assert cli.main(["report", "--run", run_url, *extra]) == 0
    return storage.read_json(storage.join(run_url, "report", "report.json"))


@pytest.fixture
def finished_run(tmp_path):
    run = build_run(storage.normalize(str(tmp_path / "out")), shard_rows=(5, 4), quarantined=1)
    _stitch_quarantine(run)
    _manifest(run)
    return run


def test_finished_run_report_adds_up(finished_run, capsys):
    run = finished_run
    report = _report(run.run_url, "--gpu-hour-usd", "3.0", "--airflow-run-id", "manual__x")
    generated = run.generated

    assert report["complete"] is True and report["missing"] == []
    assert report["airflow_run_id"] == "manual__x"
    assert report["documents_in"] == 5 + 3  # the fixture's 5 documents + 3 quarantined
    assert report["stitch"]["documents_quarantined"] == 3
    assert report["stitch"]["quarantined_by_reason"] == {
        "duplicate id": 1, "too long for the context window": 2}
    assert report["prompts"] == {"rows": 9, "shards": 2, "shard_tokens": 4096,
                                 "styles_per_doc": 2, "templates": ["encyclopedic", "qa"]}
    rephrase = report["rephrase"]
    assert rephrase["rows_generated"] == len(generated) == 7
    assert rephrase["rows_quarantined"] == 2
    assert rephrase["quarantined_by_reason"] == {"too_long": 2}
    assert rephrase["rows_generated"] + rephrase["rows_quarantined"] == report["prompts"]["rows"]
    assert rephrase["shards_committed"] == 2

    out_tokens = sum(r["output_tokens"] for r in generated)
    assert report["tokens"]["output"] == out_tokens
    assert report["tokens"]["device_seconds"] == 60.0 + 61.0
    assert report["tokens"]["tokens_per_s"] == round(out_tokens / 100.0, 2)
    by_shard = {s["name"]: s for s in report["shards"]}
    for name, shard in by_shard.items():
        rows = [r for r in generated if r["shard"] == name]
        assert shard["rows_generated"] == len(rows)
        assert shard["output_tokens"] == sum(r["output_tokens"] for r in rows)
        assert shard["tokens_per_s"] == round(shard["output_tokens"] / 50.0, 2)
        assert shard["rows_in"] == shard["rows_generated"] + shard["rows_quarantined"]

    cost = report["cost"]
    assert cost["gpu_hour_usd"] == 3.0
    assert cost["usd"] == pytest.approx(121 / 3600 * 3.0, abs=1e-6)
    assert cost["usd_per_1b_output_tokens"] == pytest.approx(
        121 / 3600 * 3.0 / out_tokens * 1e9, rel=1e-4)

    assert report["lengths"]["output_tokens"]["count"] == 7
    assert report["lengths"]["output_tokens"]["max"] == max(r["output_tokens"] for r in generated)
    assert report["lengths"]["prompt_tokens"]["count"] == 9
    prompt_tokens = [20 + i for i in range(5)] + [20 + i for i in range(4)]
    assert report["tokens"]["prompt"] == sum(prompt_tokens)

    examples = report["examples"]
    assert len(examples) == 3
    assert {e["template_id"] for e in examples[:2]} == {"encyclopedic", "qa"}
    assert len({e["document_id"] for e in examples}) >= 2
    texts = {(r["id"], r["template_id"]): " ".join(r["output_text"].split()) for r in generated}
    for example in examples:
        assert example["rephrasing"] == texts[(example["document_id"], example["template_id"])]
        assert example["document_id"] in example["source_excerpt"]

    assert set(report["figures"]) == {"rows_generated", "tokens_per_s", "rejection_reasons",
                                      "prompt_lengths", "output_lengths"}
    for name in report["figures"].values():
        assert storage.read_bytes(storage.join(run.run_url, "report", name)).startswith(PNG)
    summary = capsys.readouterr().out.strip().splitlines()[-1]
    assert '"complete": true' in summary and '"rows_generated": 7' in summary


def test_run_still_rephrasing_reports_what_exists(finished_run):
    run = finished_run
    storage.delete(run.commit_url(1))  # shard 1 has parts but no commit yet
    storage.delete(storage.join(run.layout.validation, "shard-00001.json"))
    report = _report(run.run_url)

    assert report["complete"] is False
    assert any("generated/shard-00001/_COMMITTED.json" in m for m in report["missing"])
    assert any("validation/shard-00001.json" in m for m in report["missing"])
    by_shard = {s["name"]: s for s in report["shards"]}
    assert by_shard["shard-00001"]["committed"] is False
    assert by_shard["shard-00001"]["rows_generated"] == 3  # its parts so far
    assert report["rephrase"]["shards_committed"] == 1
    assert report["tokens"]["device_seconds"] == 60.0  # only the committed shard's
    shard0_tokens = by_shard["shard-00000"]["output_tokens"]
    assert report["cost"]["usd_per_1b_output_tokens"] == pytest.approx(
        60 / 3600 * DEFAULT_GPU_HOUR_USD / shard0_tokens * 1e9, rel=1e-4)


def test_run_failed_before_stitch_still_gets_a_report(tmp_path, monkeypatch):
    monkeypatch.setenv(GPU_HOUR_USD_ENV, "1.25")
    run_url = storage.normalize(str(tmp_path / "out" / "synthetic_rephrase" / "2026-01-01"))
    report = _report(run_url)
    assert report["complete"] is False
    assert [m.split(":")[0] for m in report["missing"]] == [
        "manifest/_SUMMARY.json", "prompts/shards.json"]
    assert report["documents_in"] is None and report["rephrase"]["rows_generated"] == 0
    assert report["cost"]["gpu_hour_usd"] == 1.25
    assert report["cost"]["usd_per_1b_output_tokens"] is None
    assert list(report["figures"]) == ["rows_generated"]


def test_bad_price_is_one_clear_line(tmp_path, monkeypatch, capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main(["report", "--run", str(tmp_path), "--gpu-hour-usd", "-2"])
    assert exit_.value.code == 2
    assert "'-2': expected a price in USD >= 0" in capsys.readouterr().err
    monkeypatch.setenv(GPU_HOUR_USD_ENV, "cheap")
    assert cli.main(["report", "--run", str(tmp_path)]) == 3  # a bad price stays bad
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == ("synthfactory report: error: $SYNTHFACTORY_GPU_HOUR_USD='cheap': "
                       "expected a price in USD >= 0")


def test_run_on_s3_gets_its_report_on_s3(crawl_s3):
    crawl_s3.create_bucket("report-lake")  # moto's backend is shared by the whole process
    run = build_run("s3://report-lake/runs", shard_rows=(4, 3), quarantined=1)
    _manifest(run)
    report = _report(run.run_url)
    assert report["complete"] is True
    assert report["rephrase"]["rows_generated"] == len(run.generated) == 5
    listed = storage.list_files(storage.join(run.run_url, "report"))
    assert sorted(u.rsplit("/", 1)[-1] for u in listed) == sorted(
        ["report.json", *report["figures"].values()])
