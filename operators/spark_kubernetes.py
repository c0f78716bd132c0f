"""Spark on Kubernetes for ``stitch_prompts``: the stitch pod is the Spark driver in client
mode, the executors are pods of the worker image that Spark creates from a pod template.

What this module adds to the stitch pod (docs/stitch.md, docs/adr/0090):

- a headless Service per try, created by ``SparkDriverPodOperator`` just before the pod and
  deleted after it, whatever the outcome; it selects the pod by a label carrying its own
  name, so executors reach the driver at ``{service}.{namespace}.svc`` on fixed ports;
- the driver pod's ServiceAccount (may create and delete executor pods: deploy/spark-rbac.yaml),
  its ports, and the environment ``synthfactory.stitch.spark_conf`` reads (image, namespace,
  own pod name through the downward API, the Service's host name, the executor template);
- the executor pod template: CPU pool, Pod Security Standard "restricted" (operators/
  pod_security.py), the worker Secret as environment, scratch volumes for a read-only root.

The names of the environment variables and ports are the engine's (spark_conf.py); the
Airflow layer does not import the engine, so tests/unit/airflow checks that they agree.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from kubernetes.client import models as k8s
from kubernetes.client.exceptions import ApiException

from synthfactory.contract.spark_driver import (
    BLOCK_MANAGER_PORT,
    DRIVER_PORT,
    ENV_DRIVER_HOST,
    ENV_DRIVER_POD,
    ENV_EXECUTOR_TEMPLATE,
    ENV_IMAGE,
    ENV_NAMESPACE,
    EXECUTOR_CONTAINER,
)
from synthfactory_airflow.operators.kube_client import to_json
from synthfactory_airflow.operators.kubernetes import (
    CPU_POLICY,
    SynthfactoryPodOperator,
    pod_operator_kwargs,
)
from synthfactory_airflow.operators.kueue import QUEUE_LABEL
from synthfactory_airflow.operators.pod_security import (
    container_security_context,
    pod_security_context,
    scratch_env,
    scratch_volume_mounts,
    scratch_volumes,
)
from synthfactory_airflow.operators.settings import Settings

log = logging.getLogger(__name__)

DRIVER_LABEL = "synthfactory.io/spark-driver"
# Spark mounts its own local-dir emptyDir unless the template has one by this name prefix.
SPARK_LOCAL_VOLUME = "spark-local-dir-1"


def service_name(dag_id: str, task_id: str, run_id: str, map_index: int, try_number: int) -> str:
    """One DNS-1035 name per task try: a reattached worker finds the same Service."""
    key = "/".join([dag_id, task_id, run_id, str(map_index), str(try_number)])
    return "synthfactory-spark-" + hashlib.sha256(key.encode()).hexdigest()[:16]


def headless_service(name: str, namespace: str) -> k8s.V1Service:
    """DNS for the driver pod (no cluster IP, no proxy): executors dial the pod itself."""
    return k8s.V1Service(
        api_version="v1", kind="Service",
        metadata=k8s.V1ObjectMeta(name=name, namespace=namespace, labels={
            "app.kubernetes.io/name": "synthfactory",
            "app.kubernetes.io/component": "spark-driver"}),
        spec=k8s.V1ServiceSpec(
            cluster_ip="None",
            selector={DRIVER_LABEL: name},
            # executors may dial before the driver container counts as ready
            publish_not_ready_addresses=True,
            ports=[k8s.V1ServicePort(name="driver-rpc", port=DRIVER_PORT,
                                     target_port=DRIVER_PORT, protocol="TCP"),
                   k8s.V1ServicePort(name="blockmanager", port=BLOCK_MANAGER_PORT,
                                     target_port=BLOCK_MANAGER_PORT, protocol="TCP")]),
    )


def _executor_volumes() -> tuple[list[k8s.V1Volume], list[k8s.V1VolumeMount]]:
    """The restricted pod's scratch volumes; Spark's local dir under Spark's own name."""
    def spark_name(name: str) -> str:
        return SPARK_LOCAL_VOLUME if name == "spark-local" else name

    volumes = [k8s.V1Volume(name=spark_name(v.name), empty_dir=v.empty_dir)
               for v in scratch_volumes("cpu")]
    mounts = [k8s.V1VolumeMount(name=spark_name(m.name), mount_path=m.mount_path)
              for m in scratch_volume_mounts("cpu")]
    return volumes, mounts


def executor_pod_template(settings: Settings, labels: dict[str, str] | None = None) -> dict:
    """The executor pod template (a Pod manifest): Spark fills in image, command, env,
    resources and owner; the rest is ours. Executors join the driver's Kueue queue
    (from ``labels``), never a pod group: they are not part of any gang."""
    volumes, mounts = _executor_volumes()
    pod = k8s.V1Pod(
        api_version="v1", kind="Pod",
        metadata=k8s.V1ObjectMeta(labels={
            "app.kubernetes.io/name": "synthfactory",
            "app.kubernetes.io/component": "spark-executor",
            "synthfactory.io/step": "stitch_prompts", "synthfactory.io/pool": "cpu",
            **{k: v for k, v in (labels or {}).items() if k == QUEUE_LABEL}}),
        spec=k8s.V1PodSpec(
            restart_policy="Never",
            automount_service_account_token=False,  # executors never call the API
            security_context=pod_security_context(),
            node_selector=dict(CPU_POLICY.node_selector),
            tolerations=[k8s.V1Toleration(**t) for t in CPU_POLICY.tolerations] or None,
            volumes=volumes,
            containers=[k8s.V1Container(
                name=EXECUTOR_CONTAINER,
                image=settings.worker_image,
                security_context=container_security_context(),
                # Spark sets SPARK_LOCAL_DIRS to the spark-local-dir-* mounts itself
                env=[e for e in scratch_env() if e.name != "SPARK_LOCAL_DIRS"],
                env_from=[k8s.V1EnvFromSource(secret_ref=k8s.V1SecretEnvSource(
                    name=settings.secret_name, optional=True))],
                volume_mounts=mounts,
            )],
        ),
    )
    return to_json(pod)


def _field_env(name: str, path: str) -> k8s.V1EnvVar:
    return k8s.V1EnvVar(name=name, value_from=k8s.V1EnvVarSource(
        field_ref=k8s.V1ObjectFieldSelector(field_path=path)))


def driver_pod_kwargs(settings: Settings, step: str = "stitch_prompts") -> dict[str, Any]:
    """``pod_operator_kwargs("cpu", ...)`` plus what makes the pod a Spark driver."""
    kwargs = pod_operator_kwargs("cpu", settings, step)
    template = executor_pod_template(settings, kwargs.get("labels"))
    kwargs["env_vars"] = [
        *kwargs["env_vars"],
        k8s.V1EnvVar(name=ENV_IMAGE, value=settings.worker_image),
        _field_env(ENV_NAMESPACE, "metadata.namespace"),
        _field_env(ENV_DRIVER_POD, "metadata.name"),
        k8s.V1EnvVar(name=ENV_EXECUTOR_TEMPLATE,
                     value=json.dumps(template, separators=(",", ":"), sort_keys=True)),
    ]
    kwargs["service_account_name"] = settings.spark_service_account
    kwargs["ports"] = [
        *kwargs.get("ports", []),  # the step's `metrics` port (operators/kubernetes.py)
        k8s.V1ContainerPort(name="driver-rpc", container_port=DRIVER_PORT),
        k8s.V1ContainerPort(name="blockmanager", container_port=BLOCK_MANAGER_PORT)]
    return kwargs


@contextmanager
def driver_service(client: Any, service: k8s.V1Service) -> Iterator[None]:
    """The Service exists while the block runs and is deleted after, even on failure."""
    name, namespace = service.metadata.name, service.metadata.namespace
    try:
        client.create_namespaced_service(namespace=namespace, body=service)
    except ApiException as exc:
        if exc.status != 409:  # 409: a reattached worker made it already
            raise
    try:
        yield
    finally:
        try:
            client.delete_namespaced_service(name=name, namespace=namespace)
        except ApiException as exc:  # never hide the pod's own outcome
            if exc.status != 404:
                log.warning("could not delete Service %s/%s: %s", namespace, name, exc.reason)


class SparkDriverPodOperator(SynthfactoryPodOperator):
    """The stitch pod as a Spark driver: its headless Service lives as long as the try."""

    def execute(self, context: Any):
        ti = context["ti"]
        service = self.bind_service(
            service_name(ti.dag_id, ti.task_id, ti.run_id, ti.map_index, ti.try_number))
        with driver_service(self.client, service):
            return super().execute(context)

    def bind_service(self, name: str) -> k8s.V1Service:
        """Label the pod for the Service ``name`` and tell the driver its host name."""
        self.labels = {**(self.labels or {}), DRIVER_LABEL: name}
        self.env_vars = [*(e for e in self.env_vars if e.name != ENV_DRIVER_HOST),
                         k8s.V1EnvVar(name=ENV_DRIVER_HOST, value=f"{name}.{self.namespace}.svc")]
        return headless_service(name, self.namespace)
