"""A throwaway PostgreSQL database for the catalog tests."""

from __future__ import annotations

import contextlib
import os
import uuid

# The PostgreSQL server the catalog cases use (libpq URI; this machine runs one here).
PG_DSN_ENV = "SYNTHFACTORY_TEST_PG_DSN"
DEFAULT_PG_DSN = "postgresql://postgres@127.0.0.1:5432/test"


@contextlib.contextmanager
def postgres_database():
    """A uniquely named database on the server at ``SYNTHFACTORY_TEST_PG_DSN`` (default
    the local one, trust auth), dropped afterwards.

    Yields its SQLAlchemy URI, or None when no server answers there (the caller skips;
    under CI=true tests/conftest.py turns that skip into a failure).
    """
    from sqlalchemy.engine import make_url

    try:
        import psycopg2
    except ImportError:
        yield None
        return
    try:
        admin = psycopg2.connect(postgres_dsn(), connect_timeout=3)
    except psycopg2.OperationalError:
        yield None
        return
    name = f"sf_catalog_{uuid.uuid4().hex[:12]}"
    admin.autocommit = True
    try:
        with admin.cursor() as cur:
            cur.execute(f'CREATE DATABASE "{name}"')
        url = make_url(postgres_dsn()).set(drivername="postgresql+psycopg2", database=name)
        yield url.render_as_string(hide_password=False)
    finally:
        with admin.cursor() as cur:
            cur.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()


def postgres_dsn() -> str:
    return os.environ.get(PG_DSN_ENV, DEFAULT_PG_DSN)
