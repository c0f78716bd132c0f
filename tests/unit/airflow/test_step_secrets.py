"""What a local step inherits: an allowlisted environment, the catalog connection's URI as
a variable (never argv), and the connection's password masked in the task log."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from synthfactory_airflow.operators.catalog_env import CatalogConnectionError, sqlalchemy_uri
from synthfactory_airflow.operators.local import LocalStepOperator
from tests.support.events import OutletEvents

CANARY = "canary-5c1e0b"


@pytest.fixture
def env_dumping_worker(tmp_path) -> Path:
    """A stand-in console script whose summary is its argv and its whole environment."""
    script = tmp_path / "synthfactory"
    script.write_text(textwrap.dedent("""\
        #!/usr/bin/env python3
        import json, os, sys
        summary = {"argv": sys.argv[1:], "env": dict(os.environ)}
        open(os.environ["SYNTHFACTORY_RESULT_FILE"], "w").write(json.dumps(summary))
    """))
    script.chmod(0o755)
    return script


def _run(task: LocalStepOperator) -> dict:
    return task.execute(context={"outlet_events": OutletEvents()})


def test_the_worker_environment_does_not_reach_the_step(env_dumping_worker, monkeypatch):
    monkeypatch.setenv("AIRFLOW__DATABASE__SQL_ALCHEMY_CONN", f"postgresql://a:{CANARY}@db/af")
    monkeypatch.setenv("AIRFLOW__CORE__FERNET_KEY", CANARY)
    monkeypatch.setenv("SOME_DEPLOYMENT_TOKEN", CANARY)
    monkeypatch.setenv("PYTHONPATH", "/airflow/dags")
    for name, value in {"SYNTHFACTORY_HOME": "/sf", "HF_HOME": "/hf", "VLLM_CPU_KVCACHE_SPACE": "2",
                        "JAVA_HOME": "/jvm", "LC_ALL": "C.UTF-8", "AWS_REGION": "eu-west-1",
                        "RAY_AUTH_MODE": "disabled", "TMPDIR": "/scratch"}.items():
        monkeypatch.setenv(name, value)
    task = LocalStepOperator(task_id="t", arguments=["crawl"], worker_bin=str(env_dumping_worker),
                             env_vars={"SYNTHFACTORY_STEP_OWN": "1"})
    env = _run(task)["env"]
    assert CANARY not in json.dumps(env)
    assert not [name for name in env if name.startswith("AIRFLOW")]
    assert "PYTHONPATH" not in env
    for name in ("PATH", "HOME", "SYNTHFACTORY_HOME", "HF_HOME", "VLLM_CPU_KVCACHE_SPACE",
                 "JAVA_HOME", "LC_ALL", "AWS_REGION", "RAY_AUTH_MODE", "TMPDIR",
                 "SYNTHFACTORY_STEP_OWN", "SYNTHFACTORY_RESULT_FILE"):
        assert name in env, name


def test_the_catalog_connection_arrives_as_environment_and_is_masked(env_dumping_worker,
                                                                    monkeypatch):
    from airflow.sdk._shared.secrets_masker import redact

    password = f"{CANARY}/p@ss:w"  # characters a URL must quote
    monkeypatch.setenv("AIRFLOW_CONN_SF_CATALOG", json.dumps({
        "conn_type": "postgres", "host": "127.0.0.1", "port": 5432, "login": "sf",
        "password": password, "schema": "catalog", "extra": {"sslmode": "prefer"}}))
    task = LocalStepOperator(task_id="register_catalog",
                             arguments=["register", "--catalog-uri", ""],
                             worker_bin=str(env_dumping_worker), catalog_conn_id="sf_catalog")
    summary = _run(task)
    uri = urlsplit(summary["env"]["SYNTHFACTORY_CATALOG_URI"])
    assert (uri.scheme, uri.username, unquote(uri.password), uri.hostname, uri.port, uri.path,
            uri.query) == ("postgresql+psycopg2", "sf", password, "127.0.0.1", 5432, "/catalog",
                           "sslmode=prefer")
    assert CANARY not in " ".join(summary["argv"])
    assert CANARY not in str(redact(f"connecting with {password} and {uri.password}"))


def test_an_empty_connection_id_means_none(env_dumping_worker):
    task = LocalStepOperator(task_id="t", arguments=["register"],
                             worker_bin=str(env_dumping_worker), catalog_conn_id="")
    assert "SYNTHFACTORY_CATALOG_URI" not in _run(task)["env"]


def test_a_connection_that_is_not_a_sql_database_is_named():
    with pytest.raises(CatalogConnectionError, match="'http': not a SQL catalog database"):
        sqlalchemy_uri("http", "example.com", None, None, None, None, {})


def test_the_scheme_can_be_chosen_in_the_extra():
    assert sqlalchemy_uri("postgres", "db", None, "sf", None, "cat",
                          {"sqlalchemy_scheme": "postgresql+psycopg"}) == (
        "postgresql+psycopg://sf@db/cat")


def test_the_endpoint_connection_arrives_as_environment_and_is_masked(env_dumping_worker,
                                                                     monkeypatch):
    from airflow.sdk._shared.secrets_masker import redact

    key = f"sk-{CANARY}"
    monkeypatch.setenv("AIRFLOW_CONN_SF_LLM", json.dumps({
        "conn_type": "http", "host": "llm.internal", "port": 8000, "schema": "https",
        "password": key, "extra": {"model": "smollm2-135m"}}))
    task = LocalStepOperator(task_id="rephrase", arguments=["rephrase", "--engine", "endpoint"],
                             worker_bin=str(env_dumping_worker), endpoint_conn_id="sf_llm")
    summary = _run(task)
    env = summary["env"]
    assert env["SYNTHFACTORY_ENDPOINT_URL"] == "https://llm.internal:8000"
    assert env["SYNTHFACTORY_ENDPOINT_MODEL"] == "smollm2-135m"
    assert env["SYNTHFACTORY_ENDPOINT_API_KEY"] == key
    assert CANARY not in " ".join(summary["argv"])
    assert CANARY not in str(redact(f"calling the server with {key}"))


def test_an_endpoint_connection_without_a_key_sets_no_key(env_dumping_worker, monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_SF_LLM", json.dumps({
        "conn_type": "http", "host": "http://127.0.0.1:8000/v1"}))
    task = LocalStepOperator(task_id="rephrase", arguments=["rephrase"],
                             worker_bin=str(env_dumping_worker), endpoint_conn_id="sf_llm")
    env = _run(task)["env"]
    assert env["SYNTHFACTORY_ENDPOINT_URL"] == "http://127.0.0.1:8000/v1"
    assert "SYNTHFACTORY_ENDPOINT_API_KEY" not in env
    assert "SYNTHFACTORY_ENDPOINT_MODEL" not in env


@pytest.mark.parametrize("host, port, schema, url", [
    ("llm", 8000, None, "http://llm:8000"),
    ("llm", None, "https", "https://llm"),
    ("https://gw.example/team", 443, None, "https://gw.example:443/team"),
    ("http://llm:8000", 8000, None, "http://llm:8000"),
])
def test_endpoint_url_from_the_connection_fields(host, port, schema, url):
    from synthfactory_airflow.operators.endpoint_env import endpoint_url

    assert endpoint_url(host, port, schema) == url


def test_an_endpoint_connection_without_host_is_named(monkeypatch):
    from synthfactory_airflow.operators.endpoint_env import (
        EndpointConnectionError,
        endpoint_environment,
    )

    monkeypatch.setenv("AIRFLOW_CONN_SF_LLM", json.dumps({"conn_type": "http"}))
    with pytest.raises(EndpointConnectionError,
                       match="endpoint_conn_id 'sf_llm': the connection has no host"):
        endpoint_environment("sf_llm")


def test_the_hub_connection_arrives_as_hf_token_and_is_masked(env_dumping_worker,
                                                              monkeypatch):
    """export --hub-repo's token: the hub_conn_id connection's password as $HF_TOKEN, not
    on argv, masked in the log, over the worker's own HF_TOKEN (which the allowlist passes
    on for model downloads, operators/step_env.py)."""
    from airflow.sdk._shared.secrets_masker import redact

    token = f"hf_{CANARY}"
    monkeypatch.setenv("HF_TOKEN", "hf_the_schedulers_own")
    monkeypatch.setenv("AIRFLOW_CONN_HF_TEAM", json.dumps({"conn_type": "generic",
                                                           "password": token}))
    task = LocalStepOperator(task_id="export_dataset",
                             arguments=["export", "--hub-repo=team/synth"],
                             worker_bin=str(env_dumping_worker), hub_conn_id="hf_team")
    summary = _run(task)
    assert summary["env"]["HF_TOKEN"] == token
    assert CANARY not in " ".join(summary["argv"])
    assert CANARY not in str(redact(f"pushing with {token}"))
    without = LocalStepOperator(task_id="export_dataset", arguments=["export"],
                                worker_bin=str(env_dumping_worker), hub_conn_id="")
    assert _run(without)["env"]["HF_TOKEN"] == "hf_the_schedulers_own"


def test_a_hub_connection_without_a_password_is_named(monkeypatch):
    from synthfactory_airflow.operators.hub_env import HubConnectionError, hub_environment

    monkeypatch.setenv("AIRFLOW_CONN_HF_TEAM", json.dumps({"conn_type": "generic"}))
    with pytest.raises(HubConnectionError, match="hub_conn_id 'hf_team': the connection has "
                                                 "no password"):
        hub_environment("hf_team")
