"""The runners, by mode: ``runner_for(settings)`` is the one the DAGs use."""

from __future__ import annotations

from synthfactory_airflow.operators.runners.base import Runner
from synthfactory_airflow.operators.runners.kuberay import KubeRayRunner
from synthfactory_airflow.operators.runners.kubernetes import KubernetesRunner
from synthfactory_airflow.operators.runners.local import LocalRunner
from synthfactory_airflow.operators.settings import Settings

RUNNERS: dict[str, type[Runner]] = {
    runner.name: runner for runner in (LocalRunner, KubernetesRunner, KubeRayRunner)}


def runner_for(settings: Settings) -> Runner:
    return RUNNERS[settings.mode](settings)
