"""A run that is not fully committed, or whose counts do not add up, is refused unwritten."""

from __future__ import annotations

import pytest

from synthfactory import storage
from synthfactory.catalog import config
from synthfactory.catalog.command import register
from synthfactory.cli import main
from synthfactory.errors import SynthfactoryError
from tests.support.run_folders import build_run

TABLE = "synth.rephrased"


@pytest.fixture
def settings(tmp_path) -> config.CatalogSettings:
    return config.resolve_catalog(
        "test", uri=f"sqlite:///{tmp_path}/catalog.db", warehouse=f"file://{tmp_path}/warehouse"
    )


@pytest.fixture
def run(tmp_path):
    return build_run(f"file://{tmp_path}/root", shard_rows=(5, 4, 6), quarantined=1)


def _refusal(run, settings) -> str:
    with pytest.raises(SynthfactoryError) as caught:
        register(run.run_url, TABLE, settings)
    catalog = config.open_catalog(settings)
    try:
        assert not catalog.table_exists(TABLE), "a refused run must write nothing"
    finally:
        config.close_catalog(catalog)
    return str(caught.value)


def test_an_uncommitted_shard_is_refused_by_name(run, settings):
    storage.delete(run.commit_url(1))
    message = _refusal(run, settings)
    assert "1 of 3 shards are not committed" in message
    assert "shard-00001" in message and "shard-00000" not in message


def test_rows_in_that_do_not_add_up_are_refused(run, settings):
    run.edit_commit(2, rows_quarantined=2)  # 5 generated + 2 quarantined != 6 in
    message = _refusal(run, settings)
    assert "shard-00002/_COMMITTED.json: counts do not add up" in message
    assert "rows_in 6 != rows_generated 5 + rows_quarantined 2" in message


def test_shards_that_do_not_sum_to_the_prompt_rows_are_refused(run, settings):
    shards_json = storage.read_json(run.layout.shards_json)
    shards_json["prompt_rows"] = 16
    storage.write_json(run.layout.shards_json, shards_json)
    assert "rows_in sum to 15 but prompt_rows is 16" in _refusal(run, settings)


def test_a_part_shorter_than_its_commit_says_is_refused(run, settings):
    part = storage.join(run.layout.generated_shard(0), "part-00001.parquet")
    storage.write_table(storage.read_table(part).slice(0, 1), part)
    assert f"{part}: holds 1 rows but _COMMITTED.json lists 2" in _refusal(run, settings)


def test_a_missing_part_is_refused(run, settings):
    part = storage.join(run.layout.generated_shard(2), "part-00000.parquet")
    storage.delete(part)
    assert f"{part}: listed in _COMMITTED.json but missing" in _refusal(run, settings)


def test_a_shard_without_validation_is_refused(run, settings):
    storage.delete(storage.join(run.layout.validation, "shard-00001.json"))
    assert "validation/shard-00001.json: not found" in _refusal(run, settings)


def test_a_folder_without_shards_json_is_refused(tmp_path, settings):
    with pytest.raises(SynthfactoryError, match="prompts/shards.json: not found"):
        register(f"file://{tmp_path}/nothing/here", TABLE, settings)


def test_every_problem_is_reported_at_once(run, settings):
    storage.delete(run.commit_url(0))
    run.edit_commit(2, rows_generated=4)
    message = _refusal(run, settings)
    assert "shard-00000" in message and "shard-00002/_COMMITTED.json" in message


def test_the_cli_prints_the_refusal_and_exits_3(run, settings, capsys):
    """A refusal is permanent (exit 3, docs/contracts.md): a retry of the same run would be
    refused the same way, so Airflow does not spend its retries on it."""
    storage.delete(run.commit_url(2))
    code = main(
        [
            "register",
            "--run",
            run.run_url,
            "--table",
            TABLE,
            "--catalog-uri",
            settings.uri,
            "--warehouse",
            settings.warehouse,
        ]
    )
    assert code == 3
    err = capsys.readouterr().err
    assert "synthfactory register: error: refusing to register" in err
    assert "shard-00002" in err


def test_a_table_named_runs_is_refused(run, settings):
    with pytest.raises(SynthfactoryError, match="synth.runs holds the run lineage"):
        register(run.run_url, "synth.runs", settings)
