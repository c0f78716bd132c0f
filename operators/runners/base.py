"""What a runner gives the DAG: everything that differs between the ways a step runs.

Modelled on astronomer-cosmos's ``ExecutionMode``: one runner per mode, one operator
module per mode (operators/local.py, operators/kubernetes.py, operators/rayjob_operator.py),
and the DAG asks its runner instead of branching on the mode's name. The argv of every
step is the same in all modes; only how it is launched differs.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar

from synthfactory.contract import steps
from synthfactory_airflow.operators.settings import Settings

POOLS = ("gpu", "cpu")


def shard_argvs(group: dict) -> dict[str, list[str]]:
    """One plan entry -> the arguments of one ``shard`` task group (expand_kwargs)."""
    return {"rephrase_argv": group["rephrase"], "validate_argv": group["validate"]}


class Runner(ABC):
    """One mode of running steps. ``capacity_cluster`` is what ``wait_for_capacity`` reads."""

    name: ClassVar[str]
    capacity_cluster: ClassVar[str]

    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    # -- the steps -------------------------------------------------------------------
    @abstractmethod
    def step_class(self) -> type:
        """The operator class of every step."""

    def spark_driver_class(self) -> type:
        """The operator class of a step that runs a Spark driver (stitch)."""
        return self.step_class()

    @abstractmethod
    def step_kwargs(self, kind: str, step: str, gang_size: str | None = None) -> dict[str, Any]:
        """Everything but ``task_id`` and ``arguments`` for a step of ``kind`` (cpu|gpu);
        ``gang_size`` (a wave's pod count, templated) marks a step of the rephrase wave."""

    def spark_driver_kwargs(self, step: str) -> dict[str, Any]:
        return self.step_kwargs("cpu", step)

    # -- the catalog and its secret --------------------------------------------------
    @property
    @abstractmethod
    def default_catalog_uri(self) -> str:
        """The catalog_uri Param's default."""

    @abstractmethod
    def catalog_kwargs(self) -> dict[str, Any]:
        """Operator arguments that bring a catalog connection's URI to the step as
        environment, never argv."""

    # -- the endpoint engine ---------------------------------------------------------
    def endpoint_kwargs(self) -> dict[str, Any]:
        """Operator arguments of the rephrase step that bring an endpoint connection's URL,
        model and key to the step as environment (engine = endpoint)."""
        return {}

    # -- the Hub token of export_dataset ----------------------------------------------
    def hub_kwargs(self) -> dict[str, Any]:
        """Operator arguments of the export step that bring the hub connection's token to
        it as environment ($HF_TOKEN). Kubernetes: none; the worker Secret holds it."""
        return {}

    # -- the rephrase wave -----------------------------------------------------------
    @abstractmethod
    def wave(self, groups: str) -> list[dict[str, Any]]:
        """The pods ``wait_for_capacity`` must place at one moment (templates over the
        run's Params; ``groups`` is the template of the plan's group count)."""

    def capacity_kwargs(self, groups: str) -> dict[str, Any]:
        """WaveCapacitySensor's arguments that depend on the runner."""
        settings = self.settings
        return {
            "wave": self.wave(groups),
            "cluster": self.capacity_cluster,
            "namespace": settings.namespace,
            "kubernetes_conn_id": settings.kubernetes_conn_id,
            # CPU and GPU pools may live in two clusters: one poke reads both
            "pool_connections": {kind: settings.kubernetes_conn_for(kind) for kind in POOLS},
        }

    def shard_groups(self, plan: Any, groups: str) -> list[Any]:
        """The tasks between ``wait_for_capacity`` and ``register_catalog``, in chain order:
        here one ``shard`` task group (rephrase >> validate) mapped over the plan."""
        from airflow.sdk import task_group

        step = self.step_class()

        @task_group(group_id="shard")
        def shard(rephrase_argv: list[str], validate_argv: list[str]) -> None:
            """One shard group: its validation starts as soon as its own rephrase ends."""
            rephrase = step(task_id="rephrase", arguments=rephrase_argv,  # one Kueue gang a wave
                            **self.step_kwargs(steps.REPHRASE.kind, "rephrase", gang_size=groups),
                            **self.endpoint_kwargs())
            validate = step(task_id="validate", arguments=validate_argv,
                            **self.step_kwargs(steps.VALIDATE.kind, "validate"))
            rephrase >> validate

        return [shard.expand_kwargs(plan.output.map(shard_argvs))]
