"""`airflow dags test`, with the run's ``run_after`` fixed to its logical date.

The CLI stamps each invocation's run id with the current time, so a second invocation is a
new DAG run; here a second invocation continues the same run (same run id), the way the
scheduler starts the next try of a task within one run. Run with .venv's python:
``dag_test_run.py DAG_ID LOGICAL_DATE [--conf JSON] [--mark-success-pattern REGEX]``."""

from __future__ import annotations

import argparse
import json
import re

from airflow.sdk import timezone
from airflow.utils.cli import get_bagged_dag
from airflow.utils.providers_configuration_loader import providers_configuration_loaded


@providers_configuration_loaded
def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("dag_id")
    parser.add_argument("logical_date")
    parser.add_argument("--conf", default=None)
    parser.add_argument("--mark-success-pattern", default=None)
    args = parser.parse_args()
    when = timezone.parse(args.logical_date)
    dag = get_bagged_dag(bundle_names=None, dag_id=args.dag_id)
    run = dag.test(logical_date=when, run_after=when,
                   run_conf=json.loads(args.conf) if args.conf else None,
                   mark_success_pattern=(re.compile(args.mark_success_pattern)
                                         if args.mark_success_pattern else None))
    print(f"dag run {run.run_id}: state={run.state}", flush=True)


if __name__ == "__main__":
    main()
