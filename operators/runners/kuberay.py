"""The ``kuberay`` runner: pods as the kubernetes runner, but the rephrase wave is one
RayJob over every shard group (a head and one GPU worker per group), then each group's
validation as a mapped pod task (docs/adr/0057)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from synthfactory.contract import steps
from synthfactory.contract.param_names import param_expr
from synthfactory_airflow.operators.runners.kubernetes import KubernetesRunner

# engine replicas per rephrase task, one GPU each: a RayJob worker asks that many GPUs
REPLICAS = param_expr(steps.REPHRASE.flag("--replicas").param or "")


def validate_argv(group: dict) -> list[str]:
    return group["validate"]


class KubeRayRunner(KubernetesRunner):
    name = "kuberay"

    def wave(self, groups: str) -> list[dict[str, Any]]:
        """The head and every worker of the wave's RayJob, admitted together."""
        from synthfactory_airflow.operators.rayjob import rayjob_wave_template

        return rayjob_wave_template(groups)

    def shard_groups(self, plan: Any, groups: str) -> list[Any]:
        from synthfactory_airflow.operators.rayjob_operator import RayJobWaveOperator

        settings = self.settings
        rephrase_wave = RayJobWaveOperator(
            task_id="rephrase_wave", kubernetes_conn_id=settings.kubernetes_conn_for("gpu"),
            namespace=settings.namespace, image=settings.worker_image, workers=groups,
            gpus_per_worker="{{ " + REPLICAS + " }}", secret_name=settings.secret_name,
            kueue_queue=settings.kueue_queue, priority_class=settings.priority_class,
            retries=3, retry_delay=timedelta(minutes=1), retry_exponential_backoff=True,
            pool=settings.gpu_pool)
        validates = self.step_class().partial(
            task_id="validate", **self.step_kwargs(steps.VALIDATE.kind, "validate"),
        ).expand(arguments=plan.output.map(validate_argv))
        return [rephrase_wave, validates]
