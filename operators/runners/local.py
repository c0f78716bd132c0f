"""The ``local`` runner: every step a subprocess of ``.venv-worker`` on this machine."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from synthfactory.contract import default_catalog_uri, engine_names, steps
from synthfactory.contract.param_names import param_expr
from synthfactory_airflow.operators.runners.base import Runner


class LocalRunner(Runner):
    name = "local"
    capacity_cluster = "local"  # this machine as one node

    def step_class(self) -> type:
        from synthfactory_airflow.operators.local import LocalStepOperator

        return LocalStepOperator

    def step_kwargs(self, kind: str, step: str, gang_size: str | None = None) -> dict[str, Any]:
        # The pods' retry shape, shorter delays; resumable steps make retries cheap.
        return {
            "worker_bin": self.settings.worker_bin,
            "aws_conn_id": self.settings.aws_conn_id or None,
            "retries": 2 if kind == "gpu" else 1,
            "retry_delay": timedelta(seconds=10),
            "retry_exponential_backoff": True,
            "max_retry_delay": timedelta(minutes=2),
            # GPU steps of all runs at once (days overlap: max_active_runs) share this
            # machine's GPUs: one slot of the gpu pool each. `make standalone` creates the
            # pool, one slot per GPU (1 without); size it in Admin > Pools (docs/adr/0126).
            # CPU steps are bounded by Airflow's parallelism (the core count).
            **({"pool": self.settings.gpu_pool} if kind == "gpu" else {}),
            # the worker that runs the task runs the step: under the CeleryExecutor a GPU
            # step goes to a GPU worker's queue (docs/celery.md)
            "queue": self.settings.queue_for(kind),
        }

    @property
    def default_catalog_uri(self) -> str:
        return default_catalog_uri(str(self.settings.home))

    def catalog_kwargs(self) -> dict[str, Any]:
        # resolved into $SYNTHFACTORY_CATALOG_URI when the step starts; null Param: none
        return {"catalog_conn_id": "{{ params.catalog_conn_id or '' }}"}

    def endpoint_kwargs(self) -> dict[str, Any]:
        # resolved into $SYNTHFACTORY_ENDPOINT_* when the rephrase step starts
        return {"endpoint_conn_id": engine_names.server_only("params.endpoint_conn_id or ''")}

    def hub_kwargs(self) -> dict[str, Any]:
        # resolved into $HF_TOKEN when the export step starts; null Param: none
        return {"hub_conn_id": "{{ params.hub_conn_id or '' }}"}

    def wave(self, groups: str) -> list[dict[str, Any]]:
        # One worker process of a kind at a time on one machine: what it needs here (vLLM
        # CPU peaks near 4 GB), one core per engine replica (`replicas` on the CPU build).
        replicas = param_expr(steps.REPHRASE.flag("--replicas").param or "")
        return [{"pool": "gpu", "count": "1",
                 "requests": {"cpu": "{{ " + replicas + " }}",
                              "memory": "{{ 4 * " + replicas + " }}Gi"}},
                {"pool": "cpu", "count": "1", "requests": {"cpu": "1", "memory": "1Gi"}}]
