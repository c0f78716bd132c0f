"""The ``kubernetes`` runner: every step a pod of the worker image, the same argv.

The provider's pod operator is imported when a step is built, not when this module is:
parsing the DAG under the local runner never pays for it.
"""

from __future__ import annotations

from typing import Any

from synthfactory_airflow.operators.runners.base import POOLS, Runner


class KubernetesRunner(Runner):
    name = "kubernetes"
    capacity_cluster = "kubernetes"

    def step_class(self) -> type:
        from synthfactory_airflow.operators.kubernetes import SynthfactoryPodOperator

        return SynthfactoryPodOperator

    def spark_driver_class(self) -> type:
        # client mode: the stitch pod is the driver, executors are pods (docs/stitch.md)
        from synthfactory_airflow.operators.spark_kubernetes import SparkDriverPodOperator

        return SparkDriverPodOperator

    def step_kwargs(self, kind: str, step: str, gang_size: str | None = None) -> dict[str, Any]:
        from synthfactory_airflow.operators.kubernetes import pod_operator_kwargs

        return pod_operator_kwargs(kind, self.settings, step, gang_size)

    def spark_driver_kwargs(self, step: str) -> dict[str, Any]:
        from synthfactory_airflow.operators.spark_kubernetes import driver_pod_kwargs

        return driver_pod_kwargs(self.settings, step)

    @property
    def default_catalog_uri(self) -> str:
        return ""  # the worker Secret's SYNTHFACTORY_CATALOG_URI

    def catalog_kwargs(self) -> dict[str, Any]:
        return {}  # the pod reads the URI from its Secret (envFrom): nothing secret in its spec

    # endpoint_kwargs: none either; with engine = endpoint the rephrase pod reads
    # SYNTHFACTORY_ENDPOINT_URL/_MODEL/_API_KEY from the same Secret (docs/rephrase.md)

    def wave(self, groups: str) -> list[dict[str, Any]]:
        """Every shard group's pod of each pool, with the pod policy's requests."""
        from synthfactory_airflow.operators.kubernetes import POLICIES, per_gpu_template

        wave = []
        for kind in POOLS:
            policy = POLICIES[kind]
            wave.append({
                "pool": kind, "count": groups,
                "requests": (per_gpu_template(policy.requests) if kind == "gpu"
                             else dict(policy.requests)),
                "node_selector": dict(policy.node_selector),
                "tolerations": [dict(t) for t in policy.tolerations]})
        return wave
