"""The session's whole DAG run (dag_run_fixtures.py), shared by this folder's tests."""

from dag_run_fixtures import canary_pg_role, dag_run, signing_s3  # noqa: F401
