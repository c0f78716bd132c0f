"""Which run folder belongs to a DAG run, from Airflow's metadata database.

Mirrors ``RUN`` in dags/synthetic_rephrase.py:
``{{ params.output_root }}/synthetic_rephrase/{{ data_interval_start | ds }}``, with
``output_root`` from the run's conf, else the DAG's Param default (tests/dags checks the
two agree). Airflow is imported inside the function: only the API server calls it.
"""

from __future__ import annotations

import os

PIPELINE = "synthetic_rephrase"  # the DAG whose runs write run folders
REPORTED_DAGS = (PIPELINE,)


def folder(output_root: str, interval_start) -> str:
    # as Jinja renders `ds` of a run without a data interval (no logical date): "None"
    day = "None" if interval_start is None else interval_start.strftime("%Y-%m-%d")
    return f"{output_root.rstrip('/')}/{PIPELINE}/{day}"


def default_roots() -> list[str]:
    """Where run folders are listed: ``$SYNTHFACTORY_OUTPUT_ROOTS`` (comma-separated URLs),
    else the DAG's default ``output_root``."""
    given = [r.strip().rstrip("/") for r in os.environ.get("SYNTHFACTORY_OUTPUT_ROOTS", "")
             .split(",") if r.strip()]
    if given:
        return given
    from synthfactory_airflow.operators.settings import Settings

    return [Settings().url("var", "data")]


def run_folder(dag_id: str, run_id: str) -> str | None:
    """The run folder URL of a DAG run, or None when Airflow knows no such run."""
    from airflow.models.dagrun import DagRun
    from airflow.models.serialized_dag import SerializedDagModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        run = session.scalar(
            select(DagRun).where(DagRun.dag_id == dag_id, DagRun.run_id == run_id))
        if run is None:
            return None
        root = (run.conf or {}).get("output_root")
        if not root:
            dag = SerializedDagModel.get_dag(dag_id, session=session)
            root = dag.params["output_root"] if dag and "output_root" in dag.params else None
        return folder(root or default_roots()[0], run.data_interval_start)
