"""A task that runs only when a trigger Param asks for it (write_card, export_dataset):
the operator's ``pre_execute`` hook skips it otherwise, as Airflow's ``@task.run_if`` does
for TaskFlow tasks. Skipped, not failed: the run stays green and its downstream teardown
(write_report) still runs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def run_if_param(name: str) -> Callable[[Any], None]:
    def skip_unless_asked(context: Any) -> None:
        from airflow.sdk.exceptions import AirflowSkipException

        if not context["params"].get(name):
            raise AirflowSkipException(f"the {name} Param does not ask for this task")

    return skip_unless_asked
