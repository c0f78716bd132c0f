"""An Airflow connection turned into the catalog URI the engine reads from its
environment (``SYNTHFACTORY_CATALOG_URI``), so the password never rides on argv.

The connection's fields make a SQLAlchemy URL (pyiceberg's SQL catalog): a
``postgres`` connection becomes ``postgresql+psycopg2://login:password@host:port/schema``;
the extra ``sqlalchemy_scheme`` overrides the scheme, and libpq options in the extra
(``sslmode``...) become query parameters. The password is masked in task logs.
"""

from __future__ import annotations

from urllib.parse import quote, urlencode

from synthfactory.contract import CATALOG_URI_ENV  # synthfactory.catalog.config reads it

SCHEMES = {"postgres": "postgresql+psycopg2", "postgresql": "postgresql+psycopg2",
           "mysql": "mysql+pymysql"}
QUERY_EXTRAS = ("sslmode", "sslrootcert", "sslcert", "sslkey", "connect_timeout",
                "application_name", "options", "target_session_attrs")


class CatalogConnectionError(ValueError):
    pass


def sqlalchemy_uri(conn_type: str, host: str | None, port: int | None, login: str | None,
                   password: str | None, schema: str | None, extra: dict) -> str:
    scheme = extra.get("sqlalchemy_scheme") or SCHEMES.get(conn_type or "")
    if not scheme:
        raise CatalogConnectionError(
            f"connection type {conn_type!r}: not a SQL catalog database (use postgres, or set "
            "extra sqlalchemy_scheme)")
    if not host:
        raise CatalogConnectionError("the catalog connection has no host")
    userinfo = quote(login or "", safe="")
    if password:
        userinfo += ":" + quote(password, safe="")
    netloc = (userinfo + "@" if userinfo else "") + host + (f":{port}" if port else "")
    query = urlencode({k: extra[k] for k in QUERY_EXTRAS if extra.get(k) not in (None, "")})
    return f"{scheme}://{netloc}/{quote(schema or '', safe='')}" + (f"?{query}" if query else "")


def catalog_environment(conn_id: str) -> dict[str, str]:
    from airflow.sdk import BaseHook
    from airflow.sdk.log import mask_secret

    conn = BaseHook.get_connection(conn_id)
    try:
        uri = sqlalchemy_uri(conn.conn_type, conn.host, conn.port, conn.login, conn.password,
                             conn.schema, conn.extra_dejson)
    except CatalogConnectionError as exc:
        raise CatalogConnectionError(f"catalog_conn_id {conn_id!r}: {exc}") from None
    if conn.password:  # the SDK masks it too; the quoted form may differ from the raw one
        mask_secret(conn.password)
        mask_secret(quote(conn.password, safe=""))
    return {CATALOG_URI_ENV: uri}
