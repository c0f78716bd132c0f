"""The production shape: the run and the warehouse on S3 (a moto server over real HTTP)."""

from __future__ import annotations

import pytest

from synthfactory.catalog import config
from synthfactory.catalog.command import register
from tests.support.moto import moto_s3
from tests.support.run_folders import build_run, table_keys


@pytest.fixture
def s3_endpoint(monkeypatch):
    with moto_s3(monkeypatch) as s3:
        s3.client().create_bucket(Bucket="lake")
        yield s3.endpoint


def test_a_run_on_s3_registers_into_an_s3_warehouse(tmp_path, s3_endpoint):
    run = build_run("s3://lake/runs", shard_rows=(4, 3), quarantined=1)
    settings = config.resolve_catalog(
        "s3test", uri=f"sqlite:///{tmp_path}/catalog.db", warehouse="s3://lake/warehouse"
    )
    register(run.run_url, "synth.rephrased", settings)
    summary = register(run.run_url, "synth.rephrased", settings)

    assert summary["metadata_location"].startswith("s3://lake/warehouse/synth/rephrased/")
    assert (summary["rows"], summary["rows_replaced"], summary["table_rows"]) == (5, 5, 5)
    catalog = config.open_catalog(settings)
    try:
        rows = catalog.load_table("synth.rephrased").scan().to_arrow()
    finally:
        config.close_catalog(catalog)
    assert table_keys(rows) == run.generated_keys
