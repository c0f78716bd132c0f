"""Which Iceberg catalog a name means.

Order, last wins: pyiceberg's own configuration for the name (``.pyiceberg.yaml``,
``PYICEBERG_CATALOG__NAME__URI`` ...), then ``--catalog-uri`` / ``--warehouse``. A name
nothing configures gets the embedded default: a SQLite SQL catalog under
``$SYNTHFACTORY_HOME/var`` (SYNTHFACTORY_HOME defaults to the current directory).
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from synthfactory import storage
from synthfactory.errors import SynthfactoryError

DEFAULT_CATALOG_NAME = "synthfactory"


@dataclass(frozen=True)
class CatalogSettings:
    name: str
    properties: dict[str, str] = field(default_factory=dict)
    source: str = "embedded default"  # or "pyiceberg config", "flags", "pyiceberg config + flags"

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
    parser.add_argument(
        "--catalog",
        default=DEFAULT_CATALOG_NAME,
        help=f"pyiceberg catalog name (default {DEFAULT_CATALOG_NAME!r})",
    )
    parser.add_argument(
        "--catalog-uri",
        help="overrides the configured URI, e.g. sqlite:////abs/catalog.db or "
        "postgresql+psycopg2://user@host:5432/db",
    )
    parser.add_argument("--warehouse", help="overrides the configured warehouse (file:// or s3://)")


def settings_from_args(args: argparse.Namespace) -> CatalogSettings:
    return resolve_catalog(args.catalog, uri=args.catalog_uri, warehouse=args.warehouse)


def synthfactory_home() -> str:
    return os.path.abspath(os.environ.get("SYNTHFACTORY_HOME", "."))


def resolve_catalog(
    name: str, uri: str | None = None, warehouse: str | None = None
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
        properties["uri"] = f"sqlite:///{home}/var/catalog/catalog.db"
    if "warehouse" not in properties and _is_sql(properties):
        properties["warehouse"] = "file://" + os.path.join(home, "var", "warehouse")
    if configured and (uri or warehouse):
        source = "pyiceberg config + flags"
    elif configured:
        source = "pyiceberg config"
    elif uri or warehouse:
        source = "flags"
    else:
        source = "embedded default"
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
        return load_catalog(settings.name, **properties)
    except (ValueError, ImportError) as exc:
        where = redact_uri(uri) if uri else "its configuration"
        raise SynthfactoryError(
            f"catalog {settings.name!r} ({where}): cannot open ({exc})"
        ) from exc


def close_catalog(catalog) -> None:
    """Release a SQL catalog's connection pool (a PostgreSQL server counts open sessions)."""
    engine = getattr(catalog, "engine", None)
    if engine is not None:
        engine.dispose()


def redact_uri(uri: str) -> str:
    """``postgresql://user:secret@host/db`` -> ``postgresql://user:***@host/db``."""
    parts = urlsplit(uri)
    if parts.password is None:
        return uri
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))
