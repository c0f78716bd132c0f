"""Register committed runs into Iceberg on SQLite and PostgreSQL catalogs and read them back."""

from __future__ import annotations

import json
import os
import uuid

import pyarrow as pa
import pytest
from pyiceberg.expressions import EqualTo

from synthfactory import storage
from synthfactory.catalog import config
from synthfactory.catalog.command import register
from synthfactory.join import join_run
from tests.support.run_folders import ENGINE_ARGS, MODEL, build_run, table_keys


@pytest.fixture(params=["sqlite", "postgres"])
def settings(request, tmp_path) -> config.CatalogSettings:
    if request.param == "sqlite":
        uri = f"sqlite:///{tmp_path}/catalog/catalog.db"
    else:
        uri = request.getfixturevalue("postgres_uri")
    return config.resolve_catalog("test", uri=uri, warehouse=f"file://{tmp_path}/warehouse")


@pytest.fixture
def table() -> str:
    # A namespace per test: the PostgreSQL database is shared by the module's tests.
    return f"synth_{uuid.uuid4().hex[:8]}.rephrased"


def _read(settings: config.CatalogSettings, identifier: str, row_filter=None) -> pa.Table:
    catalog = config.open_catalog(settings)
    try:
        scan = catalog.load_table(identifier).scan(
            **({"row_filter": row_filter} if row_filter else {})
        )
        return scan.to_arrow()
    finally:
        config.close_catalog(catalog)


def test_register_reads_back_exactly_the_committed_rows(tmp_path, settings, table):
    run = build_run(f"file://{tmp_path}/root", shard_rows=(5, 4), quarantined=1)
    summary = register(run.run_url, table, settings, airflow_run_id="scheduled__2024-01-02")

    rows = _read(settings, table)
    assert table_keys(rows) == run.generated_keys
    by_key = {(r["shard"], r["id"], r["template_id"]): r for r in run.generated}
    for got in rows.to_pylist():
        want = by_key[(got["shard"], got["id"], got["template_id"])]
        assert got["output_text"] == want["output_text"]
        assert got["output_tokens"] == want["output_tokens"]
        assert got["run_url"] == run.run_url

    assert summary["table"] == table and summary["catalog"] == "test"
    assert summary["rows"] == 7 == len(rows)
    assert (summary["rows_in"], summary["rows_quarantined"], summary["prompt_rows"]) == (9, 2, 9)
    assert summary["files"] >= 1 and summary["source_parts"] == 2  # joined/: one a shard
    assert summary["pipeline"] == "wrap-demo" and summary["interval"] == "2024-01-01"
    assert summary["model"] == MODEL and summary["engine_args"] == ENGINE_ARGS
    assert summary["device_seconds"] == 121.0  # 60 + 61
    # the yield: every generated row is usable here, each document 30 seed tokens
    seed = storage.read_json(run.layout.shards_json)["seed_tokens"]
    usable = sum(r["output_tokens"] for r in run.generated)
    assert (summary["seed_tokens"], summary["usable_tokens"]) == (seed, usable)
    assert summary["token_yield"] == round(usable / seed, 4)
    assert (summary["joined_rows"], summary["joined_usable"], summary["chunked_rows"]) == (
        7, 7, 0)
    assert json.loads(json.dumps(summary)) == summary  # goes onto an Asset event as is


def test_snapshot_summary_carries_the_lineage(tmp_path, settings, table):
    run = build_run(f"file://{tmp_path}/root")
    summary = register(
        run.run_url, table, settings, interval="2024-01-01/2024-01-02", airflow_run_id="manual__1"
    )
    catalog = config.open_catalog(settings)
    try:
        snapshot = catalog.load_table(table).current_snapshot()
    finally:
        config.close_catalog(catalog)
    assert snapshot.snapshot_id == summary["snapshot_id"]
    props = snapshot.summary.additional_properties
    assert props["synthfactory.run-url"] == run.run_url
    assert props["synthfactory.interval"] == "2024-01-01/2024-01-02"
    assert props["synthfactory.airflow-run-id"] == "manual__1"
    assert props["synthfactory.model"] == MODEL
    assert json.loads(props["synthfactory.engine-args"]) == ENGINE_ARGS
    assert [t["id"] for t in json.loads(props["synthfactory.templates"])] == ["encyclopedic", "qa"]
    assert props["synthfactory.rows-generated"] == "7"


def test_registering_a_run_twice_leaves_one_copy(tmp_path, settings, table):
    first = build_run(f"file://{tmp_path}/root", interval="2024-01-01", shard_rows=(5, 4))
    second = build_run(f"file://{tmp_path}/root", interval="2024-01-02", shard_rows=(3,))
    register(first.run_url, table, settings)
    register(second.run_url, table, settings)
    again = register(first.run_url, table, settings)

    rows = _read(settings, table)
    assert len(rows) == 7 + 2 == again["table_rows"]
    catalog = config.open_catalog(settings)
    try:  # the old copy's files were dropped whole (no rewrite of other runs' files)
        operations = [s.summary.operation.value for s in catalog.load_table(table).snapshots()]
    finally:
        config.close_catalog(catalog)
    assert operations[-2:] == ["delete", "append"]
    assert again["rows"] == 7 and again["rows_replaced"] == 7
    assert (
        table_keys(_read(settings, table, EqualTo("run_url", first.run_url)))
        == first.generated_keys
    )
    assert (
        table_keys(_read(settings, table, EqualTo("run_url", second.run_url)))
        == second.generated_keys
    )

    runs = _read(settings, table.rsplit(".", 1)[0] + ".runs").to_pylist()
    assert sorted((r["interval"], r["rows_generated"], r["rows_in"]) for r in runs) == [
        ("2024-01-01", 7, 9),
        ("2024-01-02", 2, 3),
    ]
    latest = next(r for r in runs if r["run_url"] == first.run_url)
    assert latest["snapshot_id"] == again["snapshot_id"]
    assert latest["prompt_tokens"] == again["prompt_tokens"] > 0
    # the cost of a usable token (docs/adr/0141): these commits predate attempts, so each
    # prompt row made one; every generated row is usable here
    assert (latest["attempts_made"], latest["attempts_per_row"]) == (9, 1.0)
    assert latest["generated_per_usable"] == round(
        latest["output_tokens"] / latest["usable_tokens"], 4) and latest["usable_tokens"] > 0


def test_a_new_column_evolves_the_schema(tmp_path, settings, table):
    old = build_run(f"file://{tmp_path}/root", interval="2024-01-01")
    new = build_run(
        f"file://{tmp_path}/root", interval="2024-01-02", extra_columns={"language": "en"}
    )
    register(old.run_url, table, settings)
    register(new.run_url, table, settings)
    register(old.run_url, table, settings)  # an old-schema run still registers after evolution

    rows = _read(settings, table)
    languages = {(r["run_url"], r["language"]) for r in rows.to_pylist()}
    assert languages == {(old.run_url, None), (new.run_url, "en")}
    assert len(rows) == 14


def test_qa_pairs_reach_the_table_as_a_column(tmp_path, settings, table):
    """The gate's parsed pairs (verdicts' qa_pairs) travel through join into the table;
    the rows of a template without the shape, null in the joined files, hold an empty
    list there (pyiceberg 0.12 writes a null list as an empty one)."""
    from synthfactory.layout import RunLayout

    run = build_run(f"file://{tmp_path}/root", shard_rows=(4,), quarantined=0, join=False)
    url = RunLayout(run.run_url).shard_verdicts("shard-00000")
    verdicts = storage.read_table(url)
    rows = verdicts.to_pylist()
    for row in rows:
        row["qa_pairs"] = ([{"question": f"What is {row['id']}?", "answer": "A document."}]
                           if row["template_id"] == "qa" else None)
    storage.write_table(pa.Table.from_pylist(rows, schema=verdicts.schema), url)
    join_run(run.run_url)
    register(run.run_url, table, settings)
    got = {(r["id"], r["template_id"]): r["qa_pairs"] for r in _read(settings, table).to_pylist()}
    assert got == {(r["id"], r["template_id"]): r["qa_pairs"] or [] for r in rows}
    assert {t for (_, t), pairs in got.items() if pairs} == {"qa"}


def test_the_query_hint_reads_the_run_back(tmp_path, settings, table):
    run = build_run(f"file://{tmp_path}/root")
    summary = register(run.run_url, table, settings)
    import_line, expression = summary["query_hint"]["pyiceberg"].split("; ", 1)
    namespace: dict = {}
    exec(import_line, namespace)
    assert eval(expression, namespace).num_rows == 7
    assert summary["metadata_location"].removeprefix("file://") in summary["query_hint"]["duckdb"]


def test_with_nothing_configured_the_catalog_lives_under_synthfactory_home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # no ~/.pyiceberg.yaml
    for name in [n for n in os.environ if n.upper().startswith("PYICEBERG_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("SYNTHFACTORY_HOME", str(tmp_path / "sf"))
    monkeypatch.chdir(tmp_path)
    run = build_run(f"file://{tmp_path}/root")
    summary = register(run.run_url, "synth.rephrased", config.resolve_catalog("synthfactory"))

    assert summary["catalog_uri"] == f"sqlite:///{tmp_path}/sf/var/catalog/catalog.db"
    assert (tmp_path / "sf/var/catalog/catalog.db").is_file()
    assert summary["metadata_location"].startswith(f"file://{tmp_path}/sf/var/warehouse/")


def test_a_column_no_part_ever_filled_registers(tmp_path, table):
    # Every part wrote finish_reason as all-null, so Arrow typed it null (Iceberg has no null).
    settings = config.resolve_catalog(
        "test", uri=f"sqlite:///{tmp_path}/c.db", warehouse=f"file://{tmp_path}/wh"
    )
    run = build_run(f"file://{tmp_path}/root", shard_rows=(5,), quarantined=1)
    for part in storage.list_files(run.layout.generated_shard(0), suffix=".parquet"):
        rows = storage.read_table(part)
        index = rows.schema.get_field_index("finish_reason")
        storage.write_table(rows.set_column(index, "finish_reason", pa.nulls(rows.num_rows)), part)
    join_run(run.run_url)  # joined again from the parts as they are now

    assert register(run.run_url, table, settings)["rows"] == 4
    assert _read(settings, table)["finish_reason"].to_pylist() == [None] * 4
