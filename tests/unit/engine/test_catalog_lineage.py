"""A run's lineage and accounting, as snapshot properties, a runs-table row and a summary."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from synthfactory.catalog.command import query_hint
from synthfactory.catalog.config import CatalogSettings
from synthfactory.catalog.iceberg_table import split_identifier
from synthfactory.catalog.lineage import RUNS_SCHEMA, lineage_of
from synthfactory.errors import SynthfactoryError
from synthfactory.run_reader import CommittedRun, CommittedShard

RUN = "s3://bucket/synth/wrap-web/2024-03-01"


def _shard(index: int, engine_args: dict, model: str = "smollm2") -> CommittedShard:
    commit = {
        "rows_in": 10,
        "rows_generated": 8,
        "rows_quarantined": 2,
        "parts": [],
        "prompt_tokens": 1000,
        "output_tokens": 700 + index,
        "device_seconds": 30.5,
        "model": model,
        "engine_args": engine_args,
        "sampling": {"temperature": 0.7},
        "device": "cuda",
    }
    validation = {"rows": 8, "flags": {"empty": 1, "refusal": index}, "rows_flagged": 1 + index}
    return CommittedShard(f"shard-{index:05d}", "", commit, validation, ())


def _run(*shards: CommittedShard) -> CommittedRun:
    shards_json = {
        "shards": [],
        "prompt_rows": 10 * len(shards),
        "manifest": f"{RUN}/manifest",
        "templates": [{"id": "qa", "version": "3", "style": "qa", "hash": "sha256:ab12"}],
    }
    return CommittedRun(RUN, shards_json, shards)


def test_accounting_sums_the_shards():
    lineage = lineage_of(_run(_shard(0, {"max_num_seqs": 64}), _shard(1, {"max_num_seqs": 64})))
    assert (lineage.rows_in, lineage.rows_generated, lineage.rows_quarantined) == (20, 16, 4)
    assert (lineage.prompt_tokens, lineage.output_tokens) == (2000, 1401)
    assert lineage.device_seconds == 61.0
    assert lineage.rows_flagged == 3
    assert lineage.quality_flags == {"empty": 2, "refusal": 1}
    assert lineage.engine_args == {"max_num_seqs": 64}
    assert (lineage.model, lineage.device) == ("smollm2", "cuda")


def test_pipeline_and_interval_come_from_the_run_url_unless_given():
    run = _run(_shard(0, {}))
    assert (lineage_of(run).pipeline, lineage_of(run).interval) == ("wrap-web", "2024-03-01")
    given = lineage_of(run, pipeline="p", interval="2024-03-01T00:00/2024-03-02T00:00")
    assert (given.pipeline, given.interval) == ("p", "2024-03-01T00:00/2024-03-02T00:00")


def test_shards_that_ran_with_different_settings_are_recorded_per_shard():
    lineage = lineage_of(
        _run(_shard(0, {"max_num_seqs": 64}), _shard(1, {"max_num_seqs": 32}, model="other"))
    )
    assert lineage.engine_args == {
        "by_shard": {"shard-00000": {"max_num_seqs": 64}, "shard-00001": {"max_num_seqs": 32}}
    }
    assert lineage.model == "other, smollm2"


def test_snapshot_properties_are_prefixed_strings():
    props = lineage_of(
        _run(_shard(0, {"dtype": "bf16"})), airflow_run_id="r1"
    ).snapshot_properties()
    assert all(k.startswith("synthfactory.") and isinstance(v, str) for k, v in props.items())
    assert props["synthfactory.airflow-run-id"] == "r1"
    assert json.loads(props["synthfactory.templates"]) == [
        {"id": "qa", "version": "3", "style": "qa", "hash": "sha256:ab12"}
    ]
    assert props["synthfactory.rows-in"] == "10"


def test_a_run_stitched_before_template_hashes_records_them_as_null():
    run = _run(_shard(0, {}))
    run.shards_json["templates"] = [{"id": "qa", "version": 1, "style": "qa"}]
    assert lineage_of(run).templates == [{"id": "qa", "version": 1, "style": "qa", "hash": None}]


def test_runs_row_has_the_runs_schema():
    when = datetime(2024, 3, 2, tzinfo=UTC)
    row = lineage_of(_run(_shard(0, {"dtype": "bf16"}))).runs_row("synth.t", 42, when)
    assert row.schema == RUNS_SCHEMA and row.num_rows == 1
    got = row.to_pylist()[0]
    assert (got["table_name"], got["snapshot_id"], got["registered_at"]) == ("synth.t", 42, when)
    assert json.loads(got["engine_args"]) == {"dtype": "bf16"}


@pytest.mark.parametrize("bad", ["rephrased", ".rephrased", "synth."])
def test_a_table_needs_a_namespace(bad):
    with pytest.raises(SynthfactoryError, match="expected NAMESPACE.TABLE"):
        split_identifier(bad)


def test_the_query_hint_never_shows_a_password():
    settings = CatalogSettings(
        "prod", {"uri": "postgresql://sf:s3cret@db/cat", "warehouse": "s3://b/wh"}
    )
    hint = query_hint(settings, "synth.t", RUN, "s3://b/wh/synth/t/metadata/1.metadata.json")
    assert "s3cret" not in hint["pyiceberg"] and "sf:***@db" in hint["pyiceberg"]
    assert "iceberg_scan('s3://b/wh/synth/t/metadata/1.metadata.json')" in hint["duckdb"]


def test_the_routing_hash_is_in_the_lineage_when_routed():
    """ADR 0139: shards.json's routing hash reaches the snapshot and the runs row."""
    unrouted = lineage_of(_run(_shard(0, {})))
    assert unrouted.routing_hash is None
    assert "synthfactory.routing-hash" not in unrouted.snapshot_properties()
    run = _run(_shard(0, {}))
    routed = lineage_of(CommittedRun(run.run_url, {
        **run.shards_json, "routing": {"url": "file:///t/routing.json", "hash": "sha256:ab",
                                       "table": {}}}, run.shards))
    assert routed.snapshot_properties()["synthfactory.routing-hash"] == "sha256:ab"
    when = datetime(2026, 1, 2, tzinfo=UTC)
    assert routed.runs_row("synth.t", 1, when).column("routing_hash").to_pylist() == ["sha256:ab"]
