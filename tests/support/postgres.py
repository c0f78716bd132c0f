"""A throwaway PostgreSQL database for the catalog tests."""

from __future__ import annotations

import contextlib
import os
import secrets
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


def query(db_url: str, sql: str, *args) -> list[tuple]:
    """Rows of the database at the SQLAlchemy URL ``db_url`` (``%s`` placeholders): the
    scheduler tests read Airflow's metadata database this way."""
    import psycopg2
    from sqlalchemy.engine import make_url

    url = make_url(db_url)
    db = psycopg2.connect(host=url.host, port=url.port, user=url.username,
                          dbname=url.database, connect_timeout=10)
    try:
        with db.cursor() as cursor:
            cursor.execute(sql, args)
            return cursor.fetchall()
    finally:
        db.close()


def create_canary_role(prefix: str) -> tuple[str, str]:
    """A login role named ``prefix`` + random hex, with a canary password, owning a
    database of its name; psycopg2.OperationalError when no server answers."""
    import psycopg2

    name = prefix + secrets.token_hex(4)
    password = "pgcanary-" + secrets.token_hex(8)
    admin = psycopg2.connect(postgres_dsn(), dbname="postgres", connect_timeout=3)
    admin.autocommit = True
    try:
        with admin.cursor() as cur:
            cur.execute(f"CREATE ROLE {name} LOGIN PASSWORD %s", (password,))
            cur.execute(f"CREATE DATABASE {name} OWNER {name}")
    finally:
        admin.close()
    return name, password


def drop_role(name: str) -> None:
    """The role of create_canary_role and its database."""
    import psycopg2

    admin = psycopg2.connect(postgres_dsn(), dbname="postgres", connect_timeout=10)
    admin.autocommit = True
    try:
        with admin.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
            cur.execute(f"DROP ROLE IF EXISTS {name}")
    finally:
        admin.close()
