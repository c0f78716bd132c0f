"""The ``local`` runner: a step's argv as a subprocess of the worker environment.

The subprocess gets an allowlisted environment (operators/step_env.py), plus the
credentials of the step's AWS, catalog, endpoint and Hub connections as variables: never on argv,
which is logged, rendered in the UI and readable by every process.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from airflow.sdk import BaseOperator

from synthfactory.contract import METRIC_LABEL_ENV, RESULT_FILE_ENV, TRY_NUMBER_ENV
from synthfactory_airflow.operators.exit_codes import fail_without_retry_on
from synthfactory_airflow.operators.lineage import StepLineageMixin
from synthfactory_airflow.operators.results import attach_to_outlets
from synthfactory_airflow.operators.step_env import step_environment


def metric_labels(context: Any) -> dict[str, str]:
    """The step's Prometheus labels (synthfactory/metrics.py) from its task instance, and
    its attempt (a metric's value: the retries alert)."""
    ti = context.get("ti") if hasattr(context, "get") else None
    if ti is None:
        return {}
    values = {"dag_id": ti.dag_id, "run_id": getattr(ti, "run_id", None) or context.get("run_id"),
              "task": ti.task_id,
              "map_index": ti.map_index}
    return {**{name: str(values[label]) for label, name in METRIC_LABEL_ENV.items()},
            TRY_NUMBER_ENV: str(ti.try_number)}


class StepFailed(RuntimeError):
    pass


class LocalStepOperator(StepLineageMixin, BaseOperator):
    """Run ``synthfactory ARGUMENTS...`` from the worker venv; the step's summary JSON
    is the task's XCom. The pod in the kubernetes runner runs the very same argv.
    OpenLineage: operators/lineage.py."""

    template_fields: Sequence[str] = ("arguments", "env_vars", "catalog_conn_id",
                                       "endpoint_conn_id", "hub_conn_id")
    ui_color = "#e8f4ea"

    def __init__(self, *, arguments: list[str], worker_bin: str,
                 env_vars: dict[str, str] | None = None, aws_conn_id: str | None = None,
                 catalog_conn_id: str | None = None, endpoint_conn_id: str | None = None,
                 hub_conn_id: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.arguments = arguments
        self.worker_bin = worker_bin
        self.env_vars = env_vars or {}
        self.aws_conn_id = aws_conn_id
        self.catalog_conn_id = catalog_conn_id  # templated: "" means none
        self.endpoint_conn_id = endpoint_conn_id  # templated: "" means none
        self.hub_conn_id = hub_conn_id  # templated: "" means none
        self._process: subprocess.Popen | None = None

    def execute(self, context: Any) -> dict | None:
        argv = [self.worker_bin, *[str(a) for a in self.arguments]]
        if not Path(self.worker_bin).exists():
            raise StepFailed(f"{self.worker_bin}: worker environment missing (run `make setup`)")
        with tempfile.TemporaryDirectory(prefix="synthfactory-step-") as tmp:
            result_file = Path(tmp) / "result.json"
            env = {**step_environment(os.environ), **self._aws_env(), **self._catalog_env(),
                   **self._endpoint_env(), **self._hub_env(), **metric_labels(context),
                   **self.env_vars, RESULT_FILE_ENV: str(result_file)}
            self.log.info("running %s", " ".join(argv))
            self._process = subprocess.Popen(
                argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                start_new_session=True,  # so on_kill can stop Spark/vLLM children too
            )
            assert self._process.stdout is not None
            for line in self._process.stdout:
                self.log.info("%s", line.rstrip())
            code = self._process.wait()
            if code != 0:
                fail_without_retry_on(code, f"{' '.join(argv[:2])} exited with code {code}")
                raise StepFailed(f"{' '.join(argv[:2])} exited with code {code}")
            summary = json.loads(result_file.read_text()) if result_file.exists() else None
        attach_to_outlets(context, self.outlets, summary)
        self._keep_for_lineage(summary)
        return summary

    def _aws_env(self) -> dict[str, str]:
        if not self.aws_conn_id:
            return {}
        from synthfactory_airflow.operators.aws_env import aws_environment

        return aws_environment(self.aws_conn_id)

    def _catalog_env(self) -> dict[str, str]:
        if not self.catalog_conn_id:
            return {}
        from synthfactory_airflow.operators.catalog_env import catalog_environment

        return catalog_environment(self.catalog_conn_id)

    def _endpoint_env(self) -> dict[str, str]:
        if not self.endpoint_conn_id:
            return {}
        from synthfactory_airflow.operators.endpoint_env import endpoint_environment

        return endpoint_environment(self.endpoint_conn_id)

    def _hub_env(self) -> dict[str, str]:
        if not self.hub_conn_id:
            return {}
        from synthfactory_airflow.operators.hub_env import hub_environment

        return hub_environment(self.hub_conn_id)

    def on_kill(self) -> None:
        if self._process and self._process.poll() is None:
            os.killpg(self._process.pid, signal.SIGTERM)
