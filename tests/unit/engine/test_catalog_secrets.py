"""The catalog URI's password never rides on argv: refused there in one line, taken from
$SYNTHFACTORY_CATALOG_URI instead (what Airflow's catalog connection or a pod Secret sets)."""

from __future__ import annotations

import argparse
import os

import pytest

from synthfactory import cli
from synthfactory.catalog.config import (
    CATALOG_URI_ENV,
    add_catalog_arguments,
    has_password,
    redact_uri,
    settings_from_args,
)
from synthfactory.errors import SynthfactoryError

CANARY = "canary-7f3a9d-pw"


@pytest.fixture(autouse=True)
def no_catalog_config(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    for name in [n for n in os.environ if n.upper().startswith("PYICEBERG_")]:
        monkeypatch.delenv(name)
    monkeypatch.delenv(CATALOG_URI_ENV, raising=False)
    monkeypatch.setenv("SYNTHFACTORY_HOME", str(tmp_path / "sf"))


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_catalog_arguments(parser)
    return parser.parse_args(list(argv))


@pytest.mark.parametrize("uri", [
    f"postgresql+psycopg2://sf:{CANARY}@db:5432/catalog",
    f"postgresql://db/catalog?user=sf&password={CANARY}",
])
def test_a_password_on_argv_is_refused_without_echoing_it(uri):
    with pytest.raises(SynthfactoryError, match=r"--catalog-uri .*SYNTHFACTORY_CATALOG_URI") as e:
        settings_from_args(_args("--catalog-uri", uri))
    assert CANARY not in str(e.value) and "***" in str(e.value)


def test_the_cli_refuses_it_in_one_line_before_touching_the_catalog(capsys):
    code = cli.main(["catalog", "list", "--catalog-uri",
                     f"postgresql+psycopg2://sf:{CANARY}@127.0.0.1:1/none"])
    out, err = capsys.readouterr()
    assert code != 0
    assert len(err.strip().splitlines()) == 1, err
    assert "a password on the command line" in err
    assert CANARY not in out + err


def test_the_environment_carries_the_uri_when_argv_has_none(monkeypatch):
    monkeypatch.setenv(CATALOG_URI_ENV, f"postgresql+psycopg2://sf:{CANARY}@db:5432/catalog")
    settings = settings_from_args(_args("--warehouse", "file:///tmp/wh"))
    assert settings.uri == f"postgresql+psycopg2://sf:{CANARY}@db:5432/catalog"
    assert settings.source == "environment + flags"
    assert CANARY not in str(settings.describe())


def test_an_empty_flag_means_not_given(monkeypatch):
    """The DAG renders ``--catalog-uri ''`` when a connection supplies the catalog."""
    monkeypatch.setenv(CATALOG_URI_ENV, "sqlite:////tmp/from-env.db")
    assert settings_from_args(_args("--catalog-uri", "")).uri == "sqlite:////tmp/from-env.db"


def test_a_uri_without_secret_stays_on_argv_and_wins(monkeypatch, caplog):
    monkeypatch.setenv(CATALOG_URI_ENV, "sqlite:////tmp/from-env.db")
    settings = settings_from_args(_args("--catalog-uri", "sqlite:////tmp/flag.db"))
    assert (settings.uri, settings.source) == ("sqlite:////tmp/flag.db", "flags")
    assert "SYNTHFACTORY_CATALOG_URI is ignored" in caplog.text


def test_nothing_given_is_still_the_embedded_default(tmp_path):
    settings = settings_from_args(_args())
    assert settings.uri == f"sqlite:///{tmp_path}/sf/var/catalog/catalog.db"
    assert settings.source == "embedded default"


@pytest.mark.parametrize("uri, secret", [
    ("sqlite:////abs/catalog.db", False),
    ("postgresql+psycopg2://sf@db:5432/catalog", False),
    ("postgresql+psycopg2://sf:@db:5432/catalog", False),
    ("postgresql+psycopg2://sf:x@db/catalog", True),
    ("postgresql://db/catalog?sslmode=require&PASSWORD=x", True),
])
def test_what_counts_as_a_password(uri, secret):
    assert has_password(uri) is secret


def test_redaction_covers_the_query_too():
    assert redact_uri("postgresql://db/c?user=sf&password=x&sslmode=require") == (
        "postgresql://db/c?user=sf&password=***&sslmode=require")


@pytest.mark.parametrize("uri", [
    f"mysql://sf:{CANARY}@127.0.0.1/catalog",  # pyiceberg's error quotes the whole URI
    f"sf:{CANARY}@127.0.0.1/catalog",  # no scheme: urlsplit alone would miss the password
    f"postgresql+psycopg2://sf:{CANARY}@127.0.0.1:notaport/catalog",
])
def test_errors_about_a_bad_uri_from_the_environment_do_not_echo_it(uri, monkeypatch, capsys):
    monkeypatch.setenv(CATALOG_URI_ENV, uri)
    code = cli.main(["catalog", "list"])
    out, err = capsys.readouterr()
    assert code != 0 and "cannot open" in err
    assert CANARY not in out + err and "***" in err
