"""How the catalog's credentials reach the catalog steps: a password never in the run's
conf or argv; a connection's URI as environment (local) or the pod's Secret (kubernetes)."""

from __future__ import annotations

import pendulum
import pytest


@pytest.mark.parametrize("uri", [
    "postgresql+psycopg2://sf:hunter2@db:5432/catalog",
    "postgresql://db/catalog?user=sf&password=hunter2",
])
def test_a_catalog_uri_with_a_password_is_refused_before_the_run_exists(dagbag_for, uri):
    from airflow.sdk import ParamsDict

    params = ParamsDict(dagbag_for("local").dags["synthetic_rephrase"].params)
    with pytest.raises(Exception, match="catalog_uri"):
        params["catalog_uri"] = uri
        params.validate()


@pytest.mark.parametrize("uri", [
    "sqlite:////abs/catalog.db", "", "postgresql+psycopg2://sf@db:5432/catalog",
])
def test_a_catalog_uri_without_a_secret_is_accepted(dagbag_for, uri):
    from airflow.sdk import ParamsDict

    params = ParamsDict(dagbag_for("local").dags["synthetic_rephrase"].params)
    params["catalog_uri"] = uri
    params.validate()


def _rendered(task, dag, conf: dict) -> object:
    params = {name: dag.params[name] for name in dag.params} | conf
    start = pendulum.datetime(2026, 11, 29, tz="UTC")
    task.render_template_fields({"params": params, "data_interval_start": start,
                                 "data_interval_end": start.add(days=1), "run_id": "manual__x",
                                 "ds": start.to_date_string()})
    return task


def _catalog_task_ids(dag) -> list[str]:
    """Every step that opens the catalog (register_catalog, audit_run, any later one)."""
    ids = [t.task_id for t in dag.tasks
           if isinstance(getattr(t, "arguments", None), list) and "--catalog-uri" in t.arguments]
    assert "register_catalog" in ids
    return ids


def test_local_catalog_steps_take_the_connection_instead_of_the_uri(dagbag_for):
    dag = dagbag_for("local").dags["synthetic_rephrase"]
    for task_id in _catalog_task_ids(dag):
        task = _rendered(dag.get_task(task_id), dag, {"catalog_conn_id": "pg_catalog"})
        argv = task.arguments
        assert argv[argv.index("--catalog-uri") + 1] == "", task_id
        assert task.catalog_conn_id == "pg_catalog"  # resolved into $SYNTHFACTORY_CATALOG_URI

        fresh = dagbag_for("local").dags["synthetic_rephrase"]
        plain = _rendered(fresh.get_task(task_id), fresh, {})
        assert plain.arguments[plain.arguments.index("--catalog-uri") + 1].startswith("sqlite:///")
        assert plain.catalog_conn_id == ""


def test_kubernetes_catalog_steps_read_the_uri_from_the_worker_secret(dagbag_for):
    dag = dagbag_for("kubernetes").dags["synthetic_rephrase"]
    for task_id in _catalog_task_ids(dag):
        task = _rendered(dag.get_task(task_id), dag, {})
        assert task.arguments[task.arguments.index("--catalog-uri") + 1] == "", task_id
        assert [source.secret_ref.name for source in task.env_from] == ["synthfactory-worker-env"]
