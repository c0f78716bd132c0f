"""moto S3 servers started in this process, on 127.0.0.1 over real HTTP (boto3 and
pyarrow talk to them as to S3), with the backend at hand for seeding: HTTP uploads of
thousands of objects are too slow. moto keeps one backend per process, so every server
here shares its buckets: a test names buckets of its own.

The session's DAG run starts its own, signature-checking moto_server (dag_run.py)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from datetime import datetime

import pytest

from tests.support.ports import free_port

S3_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_REGION": "us-east-1",
}


class MotoS3:
    """A moto server (not started yet) and direct access to its backend."""

    def __init__(self) -> None:
        from moto.server import ThreadedMotoServer  # heavy: only when a test needs S3

        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.server = ThreadedMotoServer(ip_address="127.0.0.1", port=self.port, verbose=False)

    @property
    def backend(self):
        from moto.core import DEFAULT_ACCOUNT_ID
        from moto.s3.models import s3_backends

        return s3_backends[DEFAULT_ACCOUNT_ID]["global"]

    def create_bucket(self, name: str) -> None:
        self.backend.create_bucket(name, "us-east-1")

    def seed(self, bucket: str, keys: Iterable[str], body: bytes = b"x",
             last_modified: datetime | None = None) -> None:
        for key in keys:
            obj = self.backend.put_object(bucket, key, body)
            if last_modified is not None:
                obj.last_modified = last_modified

    def client(self, endpoint: str | None = None):
        import boto3

        return boto3.client("s3", endpoint_url=endpoint or self.endpoint, region_name="us-east-1")


@contextlib.contextmanager
def moto_s3(monkeypatch: pytest.MonkeyPatch | None = None) -> Iterator[MotoS3]:
    """A started server, with S3_ENV and AWS_ENDPOINT_URL in os.environ until exit.

    Pass the test's ``monkeypatch`` when the test changes those variables too: one undo
    chain then restores them in order (a second one would put the stopped server's
    endpoint back)."""
    s3 = MotoS3()
    s3.server.start()
    try:
        with contextlib.ExitStack() as stack:
            patch = monkeypatch or stack.enter_context(pytest.MonkeyPatch.context())
            for key, value in {**S3_ENV, "AWS_ENDPOINT_URL": s3.endpoint}.items():
                patch.setenv(key, value)
            yield s3
    finally:
        s3.server.stop()


@pytest.fixture(scope="module")
def crawl_s3() -> Iterator[MotoS3]:
    """One server per module: the crawl tests seed thousands of objects once."""
    with moto_s3() as s3:
        yield s3
