"""`synthfactory audit` on a registered run: clean, then each kind of damage it must name."""

from __future__ import annotations

import subprocess
import sys

import pyarrow as pa
import pytest
from pyiceberg.expressions import EqualTo

from synthfactory import storage
from synthfactory.audit import audit
from synthfactory.catalog import config
from synthfactory.catalog.command import register
from synthfactory.contract import EXIT_PERMANENT
from synthfactory.contract.names import DEFAULT_CATALOG_NAME
from tests.support.run_folders import build_run

TABLE = "synthetic.rephrased"


@pytest.fixture
def settings(tmp_path) -> config.CatalogSettings:
    return config.resolve_catalog(DEFAULT_CATALOG_NAME,
                                  uri=f"sqlite:///{tmp_path}/catalog.db",
                                  warehouse=f"file://{tmp_path}/warehouse")


@pytest.fixture
def run(tmp_path, settings):
    run = build_run(f"file://{tmp_path}/data", shard_rows=(6, 5), quarantined=1)
    register(run.run_url, TABLE, settings)
    return run


def test_a_clean_run_adds_up(run, settings):
    report = audit(run.run_url, TABLE, settings)
    assert report.problems == []
    assert (report.docs_in, report.prompt_rows) == (6, 11)  # 2 styles per document
    assert (report.generated, report.quarantined, report.registered) == (9, 2, 9)
    assert (report.lost, report.duplicated, report.stale) == (0, 0, 0)
    assert report.result_line() == ("RESULT audit docs_in=6 prompt_rows=11 generated=9 "
                                    "quarantined=2 rejected=0 registered=9 lost=0 duplicated=0 "
                                    "stale=0 joined=9 left_out=2 attempts=9 usable_at=1:9")


def test_cli_prints_each_discrepancy_and_exits_3(run, settings, tmp_path):
    """A discrepancy is a fact of the run's files: the command exits EXIT_PERMANENT (3) so
    Airflow fails audit_run without spending its retries on a rereading. Fails if
    audit_main raises a RetryableError instead of its PermanentError (exit 1)."""
    part = storage.local_path(storage.join(run.layout.generated_shard(0), "part-00001.parquet"))
    table = pa.parquet.read_table(part)
    pa.parquet.write_table(table.slice(0, 1), part)  # one generated row lost
    proc = subprocess.run(
        [sys.executable, "-m", "synthfactory.cli", "audit", "--run", run.run_url,
         "--table", TABLE, "--catalog-uri", settings.uri, "--warehouse", settings.warehouse],
        capture_output=True, text=True, timeout=120)
    assert proc.returncode == EXIT_PERMANENT, proc.stderr
    lines = proc.stdout.strip().splitlines()
    result = [line for line in lines if line.startswith("RESULT audit ")][-1]
    fields = dict(kv.split("=") for kv in result.split()[2:])
    assert fields["lost"] == "1" and fields["stale"] == "1"  # the row, and the checksum
    assert any("shard-00000: 1 prompt row(s) in no output" in line for line in lines)
    assert "Traceback" not in proc.stderr
    assert "discrepanc" in proc.stderr.strip().splitlines()[-1]


def test_changed_prompts_are_stale(run, settings):
    prompts = storage.read_table(run.layout.prompt_shard(1))
    users = [u + " (second edition)" for u in prompts.column("user").to_pylist()]
    storage.write_table(prompts.set_column(prompts.schema.get_field_index("user"), "user",
                                           pa.array(users)), run.layout.prompt_shard(1))
    report = audit(run.run_url, TABLE, settings)
    assert report.stale == 1 and report.lost == 0
    assert any("shard-00001: stale" in p for p in report.problems)


def test_a_duplicated_output_row_is_counted(run, settings):
    shard = run.layout.generated_shard(0)
    first = storage.read_table(storage.join(shard, "part-00000.parquet"))
    second = storage.read_table(storage.join(shard, "part-00001.parquet"))
    storage.write_table(pa.concat_tables([second, first.slice(0, 1)]),
                        storage.join(shard, "part-00001.parquet"))
    report = audit(run.run_url)
    assert report.duplicated == 2  # the prompt row twice, and its (id, template) twice
    assert report.registered is None
    assert "registered=unchecked lost=0 duplicated=2 stale=1 " in report.result_line()


def test_a_document_missing_from_prompts_and_quarantine_is_lost(run, tmp_path):
    seeds = storage.join(f"file://{tmp_path}/data", "seeds", "part-00000.parquet")
    docs = storage.read_table(seeds)
    extra = pa.table({"id": ["never-stitched"], "text": ["a document stitch dropped"]})
    storage.write_table(pa.concat_tables([docs, extra]), seeds)
    report = audit(run.run_url)
    assert report.docs_in == 7 and report.lost == 1
    assert any("never-stitched" in p for p in report.problems)


def test_catalog_rows_must_equal_committed_rows(run, settings):
    catalog = config.open_catalog(settings)
    try:
        catalog.load_table(TABLE).delete(EqualTo("shard", "shard-00001"))
    finally:
        config.close_catalog(catalog)
    report = audit(run.run_url, TABLE, settings)
    assert report.registered == 5 and report.lost == 4
    assert any("usable joined row(s)" in p and "not in the table" in p for p in report.problems)


def test_uncommitted_shard_loses_all_its_rows(run, settings):
    storage.delete(run.commit_url(1))
    report = audit(run.run_url)
    assert report.lost == 5
    assert any("shard-00001: not committed" in p for p in report.problems)


def test_rejected_rows_are_their_own_bucket(tmp_path, settings):
    """Every prompt row ends in exactly one of registered, rejected and quarantined."""
    run = build_run(f"file://{tmp_path}/data", shard_rows=(6, 5), quarantined=1, rejected=2)
    summary = register(run.run_url, TABLE, settings)
    assert summary["rows"] == 5 and summary["rows_rejected"] == 4
    report = audit(run.run_url, TABLE, settings)
    assert report.problems == []
    assert (report.generated, report.rejected, report.quarantined, report.registered) == (
        9, 4, 2, 5)
    assert report.registered + report.rejected + report.quarantined == report.prompt_rows
    assert "quarantined=2 rejected=4 registered=5 lost=0 duplicated=0 stale=0" in (
        report.result_line())


def test_include_rejected_registers_every_row_with_its_verdict(tmp_path, settings):
    run = build_run(f"file://{tmp_path}/data", shard_rows=(6, 5), quarantined=1, rejected=2)
    register(run.run_url, TABLE, settings, include_rejected=True)
    catalog = config.open_catalog(settings)
    try:
        rows = catalog.load_table(TABLE).scan(
            row_filter=EqualTo("run_url", run.run_url),
            selected_fields=("shard", "id", "template_id", "usable", "reasons",
                             "clean_text")).to_arrow()
    finally:
        config.close_catalog(catalog)
    got = sorted((r["shard"], r["id"], r["template_id"], r["usable"], tuple(r["reasons"]))
                 for r in rows.to_pylist())
    assert got == sorted((g["shard"], g["id"], g["template_id"], g["row"] >= 2,
                          () if g["row"] >= 2 else ("too_short",)) for g in run.generated)
    assert len(got) == 9
    report = audit(run.run_url, TABLE, settings)
    assert report.problems == [] and report.registered == 9 and report.rejected == 4


def test_a_rejected_row_in_the_table_is_named(tmp_path, settings):
    run = build_run(f"file://{tmp_path}/data", shard_rows=(6, 5), quarantined=1, rejected=2)
    register(run.run_url, TABLE, settings, include_rejected=True)
    # the lineage says usable rows only, as a plain register would have written it
    register(run.run_url, TABLE, settings)
    verdicts = run.layout.shard_verdicts("shard-00000")
    table = storage.read_table(verdicts)
    usable = table.column("usable").to_pylist()
    usable[2] = False  # the gate now rejects a row that is in the table
    storage.write_table(table.set_column(table.schema.get_field_index("usable"), "usable",
                                         pa.array(usable)), verdicts)
    report = audit(run.run_url, TABLE, settings)
    assert any("1 of them rejected by the quality gate" in p for p in report.problems)
    assert report.duplicated == 1
