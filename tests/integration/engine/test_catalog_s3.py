"""The production shape: the run and the warehouse on S3 (a moto server over real HTTP)."""

from __future__ import annotations

import socket

import pytest
from catalog_fixtures import build_run, table_keys

from synthfactory.catalog import config
from synthfactory.catalog.command import register

S3_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_REGION": "us-east-1",
    "AWS_DEFAULT_REGION": "us-east-1",
}


@pytest.fixture
def s3_endpoint(monkeypatch):
    moto_server = pytest.importorskip("moto.server")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    for key, value in {**S3_ENV, "AWS_ENDPOINT_URL": endpoint}.items():
        monkeypatch.setenv(key, value)
    import boto3

    boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket="lake")
    yield endpoint
    server.stop()


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
