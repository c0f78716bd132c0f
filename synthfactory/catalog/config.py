"""Which Iceberg catalog a name means.

Order, last wins: pyiceberg's own configuration for the name (``.pyiceberg.yaml``,
``PYICEBERG_CATALOG__NAME__URI`` ...), then ``$SYNTHFACTORY_CATALOG_URI``, then
``--catalog-uri`` / ``--warehouse``. A name nothing configures gets the embedded default:
a SQLite SQL catalog under ``$SYNTHFACTORY_HOME/var`` (SYNTHFACTORY_HOME defaults to the
current directory).

A URI holding a password is refused on the command line: argv is readable by every
process of the machine and is copied into Airflow's rendered fields and pod specs. It
travels as ``$SYNTHFACTORY_CATALOG_URI`` instead (docs/adr/0070). What counts as a
password is ``synthfactory.contract.has_password``: the regex the DAG's ``catalog_uri``
Param applies before a run exists.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlsplit, urlunsplit

from synthfactory import storage
from synthfactory.contract import CATALOG_URI_ENV, DEFAULT_WAREHOUSE, HOME_ENV, has_password
from synthfactory.contract.catalog_uri import PASSWORD_KEYS, USERINFO, default_catalog_uri
from synthfactory.contract.steps import CATALOG_FLAGS
from synthfactory.errors import PermanentError, RetryableError, SynthfactoryError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CatalogSettings:
    name: str
    properties: dict[str, str] = field(default_factory=dict)
    # "embedded default", "pyiceberg config", "flags", "environment" or "... + ..." of them
    source: str = "embedded default"

    @property
    def uri(self) -> str | None:
        return self.properties.get("uri")

    @property
    def warehouse(self) -> str | None:
        return self.properties.get("warehouse")

    def describe(self) -> dict[str, str | None]:
        """Where the catalog is, safe to print or put on an Asset event (no password)."""
        return {
            "catalog": self.name,
            "catalog_uri": redact_uri(self.uri) if self.uri else None,
            "warehouse": self.warehouse,
            "catalog_source": self.source,
        }


def add_catalog_arguments(parser: argparse.ArgumentParser) -> None:
    """--catalog, --catalog-uri, --warehouse as the steps table declares them for register
    and audit (``synthfactory catalog`` takes the same three)."""
    for flag in CATALOG_FLAGS:
        parser.add_argument(flag.name, default=flag.default, help=flag.help)


def settings_from_args(args: argparse.Namespace) -> CatalogSettings:
    """``--catalog-uri`` (never with a password) or, when absent or empty,
    ``$SYNTHFACTORY_CATALOG_URI``; then pyiceberg's configuration and the default."""
    if args.catalog_uri:
        refuse_password_on_argv(args.catalog_uri)
        if os.environ.get(CATALOG_URI_ENV):
            log.warning("--catalog-uri given: $%s is ignored", CATALOG_URI_ENV)
        return resolve_catalog(args.catalog, uri=args.catalog_uri, warehouse=args.warehouse)
    return resolve_catalog(
        args.catalog,
        uri=os.environ.get(CATALOG_URI_ENV) or None,
        warehouse=args.warehouse,
        uri_source="environment",
    )


def refuse_password_on_argv(uri: str) -> None:
    if has_password(uri):
        raise PermanentError(
            f"--catalog-uri {redact_uri(uri)}: a password on the command line is readable by "
            f"every process (and Airflow keeps argv in rendered fields and pod specs); pass "
            f"the URI as ${CATALOG_URI_ENV} (in Airflow: the catalog_conn_id connection, or "
            "the worker Secret on Kubernetes)"
        )


def synthfactory_home() -> str:
    return os.path.abspath(os.environ.get(HOME_ENV, "."))


def resolve_catalog(
    name: str, uri: str | None = None, warehouse: str | None = None, uri_source: str = "flags"
) -> CatalogSettings:
    from pyiceberg.utils.config import Config

    # A fresh Config, not pyiceberg's import-time copy, so environment set later counts.
    configured = dict(Config().get_catalog_config(name) or {})
    home = synthfactory_home()
    properties = {str(k): v for k, v in configured.items()}
    if uri:
        properties["uri"] = uri
    if warehouse:
        properties["warehouse"] = storage.normalize(warehouse)
    if "uri" not in properties and "type" not in properties:
        properties["uri"] = default_catalog_uri(home)
    if "warehouse" not in properties and _is_sql(properties):
        properties["warehouse"] = "file://" + os.path.join(home, DEFAULT_WAREHOUSE)
    given = [uri_source] if uri else []
    if warehouse and "flags" not in given:
        given.append("flags")
    source = " + ".join((["pyiceberg config"] if configured else []) + given)
    source = source or "embedded default"
    return CatalogSettings(name=name, properties=properties, source=source)


def _is_sql(properties: dict[str, Any]) -> bool:
    kind = str(properties.get("type", "")).lower()
    return kind == "sql" or (
        not kind and str(properties.get("uri", "")).startswith(("sqlite", "postgresql"))
    )


def open_catalog(settings: CatalogSettings):
    """A pyiceberg Catalog; local folders it needs are created first."""
    from pyiceberg.catalog import load_catalog

    properties = dict(settings.properties)
    uri = properties.get("uri", "")
    if uri.startswith("sqlite:///"):
        db_path = uri[len("sqlite:///") :]
        if db_path and db_path != ":memory:":
            os.makedirs(os.path.dirname(os.path.abspath(db_path)), exist_ok=True)
    warehouse = properties.get("warehouse", "")
    if warehouse.startswith("file://"):
        storage.makedirs(warehouse)
    elif warehouse.startswith("s3://"):
        # The endpoint and region storage.py uses, so one AWS configuration serves the run
        # and the warehouse. A known region also spares pyiceberg's bucket-region lookup,
        # which goes to AWS itself (and hangs for seconds off-line or on another store).
        endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
        region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
        if endpoint and "s3.endpoint" not in properties:
            properties["s3.endpoint"] = endpoint
        if region and "s3.region" not in properties and "client.region" not in properties:
            properties["s3.region"] = region
    try:
        try:
            return load_catalog(settings.name, **properties)
        except Exception as exc:
            if not (_is_database_error(exc) and _lost_creation_race(exc)):
                raise
            # A new catalog database: another step (a backfill's other day) created its
            # tables between our look and our CREATE. They exist now.
            time.sleep(0.5)
            return load_catalog(settings.name, **properties)
    except (ValueError, ImportError) as exc:
        where = redact_uri(uri) if uri else "its configuration"
        raise SynthfactoryError(
            f"catalog {settings.name!r} ({where}): cannot open ({scrub(str(exc), uri)})"
        ) from exc
    except Exception as exc:
        if not _is_database_error(exc):
            raise
        # Down, refused, unknown database, bad credentials: say which catalog, in one line
        # (the driver's first line; SQLAlchemy appends SQL and a link on the next ones).
        where = redact_uri(uri) if uri else "its configuration"
        reason = scrub(str(getattr(exc, "orig", None) or exc).strip().splitlines()[0], uri)
        # retried: a database that is down or restarting comes back (a wrong database
        # name or password does not, but the drivers do not tell them apart reliably)
        raise RetryableError(
            f"catalog {settings.name!r} ({where}): cannot reach the catalog database ({reason})"
        ) from exc


def _is_database_error(exc: Exception) -> bool:
    try:
        from sqlalchemy.exc import SQLAlchemyError
    except ImportError:  # no SQL catalog support installed: not a database error
        return False
    return isinstance(exc, SQLAlchemyError)


def _lost_creation_race(exc: Exception) -> bool:
    """SQLite's "table ... already exists", PostgreSQL's duplicate key on its catalogs."""
    text = str(getattr(exc, "orig", None) or exc).lower()
    return "already exists" in text or "duplicate key" in text


def close_catalog(catalog) -> None:
    """Release a SQL catalog's connection pool (a PostgreSQL server counts open sessions)."""
    engine = getattr(catalog, "engine", None)
    if engine is not None:
        engine.dispose()


def redact_uri(uri: str) -> str:
    """``postgresql://user:secret@host/db`` -> ``postgresql://user:***@host/db``."""
    if not has_password(uri):
        return uri
    parts = urlsplit(re.sub("^" + USERINFO, r"\1:***@", uri, count=1))
    query = "&".join(
        f"{k}=***" if k.lower() in PASSWORD_KEYS else f"{k}={v}"
        for k, v in parse_qsl(parts.query, keep_blank_values=True)
    )
    return urlunsplit(parts._replace(query=query))


def scrub(text: str, uri: str | None) -> str:
    """``text`` (a library's error message) with ``uri`` in it redacted."""
    return text.replace(uri, redact_uri(uri)) if uri and has_password(uri) else text
