"""``synthfactory register`` and ``catalog list|show`` through the console script's main()."""

from __future__ import annotations

import json

import pytest

from synthfactory.cli import main
from tests.support.run_folders import build_run


@pytest.fixture
def catalog_flags(tmp_path) -> list[str]:
    return [
        "--catalog",
        "test",
        "--catalog-uri",
        f"sqlite:///{tmp_path}/catalog.db",
        "--warehouse",
        f"file://{tmp_path}/warehouse",
    ]


@pytest.fixture
def registered(tmp_path, catalog_flags, capsys, monkeypatch):
    """Two runs registered through the CLI; returns their summaries as the CLI published them."""
    summaries = []
    for interval, shard_rows in (("2024-01-01", (5, 4)), ("2024-01-02", (3,))):
        run = build_run(f"file://{tmp_path}/root", interval=interval, shard_rows=shard_rows)
        result_file = tmp_path / f"result-{interval}.json"
        monkeypatch.setenv("SYNTHFACTORY_RESULT_FILE", str(result_file))
        argv = [
            "register",
            "--run",
            run.run_url,
            "--table",
            "synth.rephrased",
            "--airflow-run-id",
            f"scheduled__{interval}",
            *catalog_flags,
        ]
        assert main(argv) == 0
        summaries.append(json.loads(result_file.read_text()))
    monkeypatch.delenv("SYNTHFACTORY_RESULT_FILE")
    capsys.readouterr()
    return summaries


def test_register_publishes_its_summary_for_airflow(registered):
    first, second = registered
    assert first["rows"] == 7 and second["rows"] == 2
    assert second["table_rows"] == 9
    assert first["airflow_run_id"] == "scheduled__2024-01-01"
    for key in (
        "table",
        "catalog",
        "snapshot_id",
        "rows",
        "files",
        "query_hint",
        "run_url",
        "pipeline",
        "interval",
        "templates",
        "model",
        "engine_args",
        "prompt_tokens",
        "output_tokens",
        "device_seconds",
        "rows_in",
        "rows_quarantined",
        "registered_at",
        "manifest",
    ):
        assert first[key] is not None, key


def test_list_prints_each_table_with_its_rows(registered, catalog_flags, capsys):
    assert main(["catalog", "list", *catalog_flags]) == 0
    out = capsys.readouterr().out.splitlines()
    rephrased = next(line.split() for line in out if line.strip().startswith("synth.rephrased"))
    runs = next(line.split() for line in out if line.strip().startswith("synth.runs"))
    assert rephrased[1] == "9" and runs[1] == "2"  # the ROWS column
    listing = json.loads(out[-1])
    assert [t["table"] for t in listing["tables"]] == ["synth.rephrased", "synth.runs"]


def test_show_prints_the_runs_and_their_totals(registered, catalog_flags, capsys):
    assert main(["catalog", "show", "synth.rephrased", *catalog_flags]) == 0
    out = capsys.readouterr().out
    assert "rows 9" in out
    assert "runs (2):" in out
    assert "scheduled__2024-01-01" in out and "scheduled__2024-01-02" in out
    assert "totals: rows_in 12  rows_generated 9  rows_quarantined 3" in out
    shown = json.loads(out.splitlines()[-1])
    assert [r["interval"] for r in shown["runs"]] == ["2024-01-01", "2024-01-02"]
    assert shown["totals"]["output_tokens"] == sum(s["output_tokens"] for s in registered)


def test_show_of_an_unknown_table_is_an_error(tmp_path, catalog_flags, capsys):
    assert main(["catalog", "show", "synth.nope", *catalog_flags]) == 3  # permanent: bad input
    assert "synth.nope: no such table in catalog 'test'" in capsys.readouterr().err
