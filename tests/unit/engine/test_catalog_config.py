"""Which catalog a name resolves to: pyiceberg configuration, flags, embedded default."""

from __future__ import annotations

import os

import pytest

from synthfactory.catalog.config import open_catalog, redact_uri, resolve_catalog


@pytest.fixture(autouse=True)
def no_pyiceberg_config(tmp_path, monkeypatch):
    """Hide the machine's ~/.pyiceberg.yaml and PYICEBERG_* variables from these tests."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    for name in [n for n in os.environ if n.upper().startswith("PYICEBERG_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("SYNTHFACTORY_HOME", str(tmp_path / "sf"))


def test_an_unconfigured_name_gets_sqlite_under_synthfactory_home(tmp_path):
    settings = resolve_catalog("synthfactory")
    assert settings.uri == f"sqlite:///{tmp_path}/sf/var/catalog/catalog.db"
    assert settings.warehouse == f"file://{tmp_path}/sf/var/warehouse"
    assert settings.source == "embedded default"


def test_synthfactory_home_defaults_to_the_current_directory(tmp_path, monkeypatch):
    monkeypatch.delenv("SYNTHFACTORY_HOME")
    assert resolve_catalog("x").uri == f"sqlite:///{tmp_path}/var/catalog/catalog.db"


def test_pyiceberg_environment_variables_configure_the_name(monkeypatch):
    monkeypatch.setenv(
        "PYICEBERG_CATALOG__LAKE__URI", "postgresql+psycopg2://sf:s3cret@db:5432/cat"
    )
    monkeypatch.setenv("PYICEBERG_CATALOG__LAKE__WAREHOUSE", "s3://bucket/warehouse")
    settings = resolve_catalog("lake")
    assert settings.uri == "postgresql+psycopg2://sf:s3cret@db:5432/cat"
    assert settings.warehouse == "s3://bucket/warehouse"
    assert settings.source == "pyiceberg config"
    assert settings.describe()["catalog_uri"] == "postgresql+psycopg2://sf:***@db:5432/cat"
    # Another name is not configured by LAKE's variables.
    assert resolve_catalog("other").source == "embedded default"


def test_pyiceberg_yaml_configures_the_name(tmp_path, monkeypatch):
    (tmp_path / "cfg").mkdir()
    (tmp_path / "cfg" / ".pyiceberg.yaml").write_text(
        "catalog:\n  prod:\n    type: rest\n    uri: https://iceberg.example/api\n"
    )
    monkeypatch.setenv("PYICEBERG_HOME", str(tmp_path / "cfg"))
    settings = resolve_catalog("prod")
    assert settings.properties["type"] == "rest"
    assert settings.uri == "https://iceberg.example/api"
    assert settings.warehouse is None  # a REST catalog names its own warehouse


def test_flags_override_the_configuration(tmp_path, monkeypatch):
    monkeypatch.setenv("PYICEBERG_CATALOG__LAKE__URI", "sqlite:////configured.db")
    settings = resolve_catalog("lake", uri=f"sqlite:///{tmp_path}/flag.db", warehouse=str(tmp_path))
    assert settings.uri == f"sqlite:///{tmp_path}/flag.db"
    assert settings.warehouse == f"file://{tmp_path}"  # a plain path becomes a file:// URL
    assert settings.source == "pyiceberg config + flags"


def test_opening_the_default_catalog_creates_its_folders(tmp_path):
    catalog = open_catalog(resolve_catalog("synthfactory"))
    catalog.create_namespace("synth")
    assert (tmp_path / "sf/var/catalog/catalog.db").is_file()
    assert (tmp_path / "sf/var/warehouse").is_dir()


def test_redact_uri_leaves_uris_without_password_alone():
    assert redact_uri("postgresql://postgres@127.0.0.1:5432/test") == (
        "postgresql://postgres@127.0.0.1:5432/test"
    )
    assert redact_uri("postgresql://u:p%40ss@h/db") == "postgresql://u:***@h/db"


def test_a_catalog_database_another_step_created_meanwhile_opens(tmp_path, monkeypatch):
    """Days of a backfill registering at once into a new catalog database: one creates its
    tables between the other's look and its CREATE, which then fails "already exists"."""
    import pyiceberg.catalog
    from sqlalchemy.exc import OperationalError

    real = pyiceberg.catalog.load_catalog
    calls = []

    def racing(name, **properties):
        calls.append(name)
        if len(calls) == 1:
            real(name, **properties)  # the other step wins the race...
            raise OperationalError("CREATE TABLE iceberg_tables", {},  # ...we lose it
                                   Exception("table iceberg_tables already exists"))
        return real(name, **properties)

    monkeypatch.setattr(pyiceberg.catalog, "load_catalog", racing)
    settings = resolve_catalog("race", uri=f"sqlite:///{tmp_path}/catalog.db",
                               warehouse=f"file://{tmp_path}/warehouse")
    catalog = open_catalog(settings)
    assert catalog.list_namespaces() == [] and len(calls) == 2
