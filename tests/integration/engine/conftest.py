"""Fixtures shared by the engine's integration tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy.engine import make_url

from tests.support.postgres import PG_DSN_ENV, postgres_database, postgres_dsn


@pytest.fixture(scope="module")
def postgres_uri() -> Iterator[str]:
    """A fresh PostgreSQL database for the module (dropped after it), or a skip that names
    the DSN tried (a failure under CI=true)."""
    with postgres_database() as uri:
        if uri is None:
            where = make_url(postgres_dsn())  # str() hides a password
            pytest.skip(f"no PostgreSQL answers at {where} (set {PG_DSN_ENV})")
        yield uri


@pytest.fixture(scope="module")
def spark():
    """A local Spark session (2 cores) for the module's stitch jobs."""
    from synthfactory.stitch.spark_session import spark_session

    session = spark_session("local[2]")
    yield session
    session.stop()
