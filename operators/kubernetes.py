"""The ``kubernetes`` runner: the same argv in a pod of the worker image.

The retry policy is the point (GPU nodes and pods fail mid-run): a pod that dies is
retried with exponential backoff up to a max delay, reattached to if the worker restarts
(``durable``), and a failed pod is kept for debugging. The worker resumes from its
checkpoints, so a retry costs at most one checkpoint of GPU time. Credentials come from
a Kubernetes secret (``envFrom``), never as literal values in the pod spec.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import timedelta
from functools import cached_property
from typing import Any

from airflow.providers.cncf.kubernetes.operators.pod import KubernetesPodOperator
from airflow.sdk.exceptions import AirflowException
from kubernetes.client import models as k8s

from synthfactory.contract import RESULT_FILE_ENV, steps
from synthfactory.contract.names import METRICS_PORT_ENV
from synthfactory.contract.param_names import param_expr, param_value
from synthfactory_airflow.operators.exit_codes import fail_without_retry_on
from synthfactory_airflow.operators.kube_client import kubernetes_hook
from synthfactory_airflow.operators.kueue import POD_GROUP_LABEL, kueue_pod_kwargs, pod_group_name
from synthfactory_airflow.operators.lineage import StepLineageMixin
from synthfactory_airflow.operators.local import metric_labels
from synthfactory_airflow.operators.pod_security import scratch_env, security_kwargs
from synthfactory_airflow.operators.results import attach_to_outlets
from synthfactory_airflow.operators.settings import Settings

XCOM_RESULT_FILE = "/airflow/xcom/return.json"  # read by the provider's xcom sidecar
# The step serves its Prometheus metrics on this container port, named "metrics" (what
# deploy/podmonitor.yaml scrapes) and annotated for deploy/prometheus/prometheus.yml's
# kubernetes-pods job. Each pod has its own network: one port for every step is no clash.
METRICS_PORT = 9400
METRICS_PORT_NAME = "metrics"


def metrics_annotations(port: int = METRICS_PORT) -> dict[str, str]:
    return {"prometheus.io/scrape": "true", "prometheus.io/port": str(port),
            "prometheus.io/path": "/metrics"}


@dataclass(frozen=True)
class PodPolicy:
    """Resources, placement and retry policy of one kind of step (cpu or gpu)."""

    requests: dict[str, str]
    limits: dict[str, str]
    node_selector: dict[str, str] = field(default_factory=dict)
    tolerations: tuple[dict[str, str], ...] = ()
    retries: int = 3
    retry_delay: timedelta = timedelta(minutes=1)
    max_retry_delay: timedelta = timedelta(minutes=20)
    execution_timeout: timedelta = timedelta(hours=6)
    # GPU nodes come from an autoscaler: allow time to provision and pull a big image.
    startup_timeout_seconds: int = 1800
    schedule_timeout_seconds: int = 1800


GPU_POLICY = PodPolicy(
    requests={"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": "1"},
    limits={"memory": "64Gi", "nvidia.com/gpu": "1"},
    node_selector={"synthfactory.io/pool": "gpu"},
    tolerations=({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},),
    execution_timeout=timedelta(hours=4),
)
CPU_POLICY = PodPolicy(
    requests={"cpu": "2", "memory": "4Gi"},
    limits={"memory": "8Gi"},
    node_selector={"synthfactory.io/pool": "cpu"},
    startup_timeout_seconds=600,
    schedule_timeout_seconds=900,
)
POLICIES = {"gpu": GPU_POLICY, "cpu": CPU_POLICY}
# The rephrase pod asks for this many GPUs (and GPU_POLICY's cpu and memory per GPU), and
# runs one engine replica per GPU (`rephrase --replicas`, docs/rephrase.md).
GPUS_PARAM = steps.REPHRASE.flag("--replicas").param or ""
_QUANTITY = re.compile(r"^(\d+)([A-Za-z]*)$")


def per_gpu(requests: dict[str, str], gpus: int) -> dict[str, str]:
    """GPU_POLICY's quantities are per GPU: a pod of ``gpus`` GPUs asks ``gpus`` times."""
    scaled = {}
    for key, value in requests.items():
        match = _QUANTITY.match(str(value))
        scaled[key] = f"{int(match[1]) * gpus}{match[2]}" if match else str(value)
    return scaled


def per_gpu_template(requests: dict[str, str], param: str = GPUS_PARAM) -> dict[str, str]:
    """The same, as templates over the run's Param (the capacity sensor renders them)."""
    out = {}
    for key, value in requests.items():
        match = _QUANTITY.match(str(value))
        out[key] = (f"{{{{ {match[1]} * {param_expr(param)} }}}}{match[2]}" if match
                    else str(value))
    return out


class SynthfactoryPodOperator(StepLineageMixin, KubernetesPodOperator):
    """KubernetesPodOperator whose xcom (the step summary) also rides on outlet events;
    OpenLineage as the local runner's step (operators/lineage.py).

    :param pod_group: the wave this pod belongs to under Kueue (operators/kueue.py): its
        pod gets the pod-group name of this run and wave when it is built.
    """

    def __init__(self, *, pod_group: str | None = None, gpus_param: str | None = None,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.pod_group = pod_group
        self.gpus_param = gpus_param  # resources scale with this Param (an N-GPU pod)

    @cached_property
    def hook(self) -> Any:
        """The client every other caller of this package builds, for the same connection."""
        return kubernetes_hook(self.kubernetes_conn_id, config_file=self.config_file,
                               cluster_context=self.cluster_context, in_cluster=self.in_cluster)

    def build_pod_request_obj(self, context: Any = None, **kwargs: Any) -> k8s.V1Pod:
        pod = super().build_pod_request_obj(context, **kwargs)
        if self.gpus_param and context:
            gpus = int(param_value(context["params"], self.gpus_param, 1))
            for container in pod.spec.containers:
                if container.name == self.base_container_name and container.resources:
                    base = container.resources  # may be the operator's own object: not mutated
                    container.resources = k8s.V1ResourceRequirements(
                        requests=per_gpu(base.requests or {}, gpus),
                        limits=per_gpu(base.limits or {}, gpus))
        if self.pod_group and context:
            pod.metadata.labels[POD_GROUP_LABEL] = pod_group_name(
                context["ti"].dag_id, context["run_id"], self.pod_group)
        labels = metric_labels(context) if context else {}
        if labels:  # the step's metric labels and attempt, as the local runner sets them
            for container in pod.spec.containers:
                if container.name == self.base_container_name:
                    given = {e.name for e in container.env or []}
                    container.env = [*(container.env or []),
                                     *(k8s.V1EnvVar(name=name, value=value)
                                       for name, value in labels.items() if name not in given)]
        return pod

    def execute(self, context: Any):
        summary = super().execute(context)
        attach_to_outlets(context, self.outlets, summary if isinstance(summary, dict) else None)
        self._keep_for_lineage(summary)
        return summary

    def cleanup(self, pod, remote_pod, *args: Any, **kwargs: Any) -> None:
        """A pod whose engine exited 2 or 3 (bad input, refused commit) fails the task
        without retries, as the local runner does (operators/exit_codes.py)."""
        try:
            super().cleanup(pod, remote_pod, *args, **kwargs)
        except AirflowException as exc:
            fail_without_retry_on(_base_exit_code(remote_pod, self.base_container_name),
                                  str(exc).splitlines()[0])
            raise


def _base_exit_code(remote_pod: Any, container: str) -> int | None:
    statuses = (remote_pod.status.container_statuses if remote_pod and remote_pod.status
                else None) or []
    status = next((s for s in statuses if s.name == container), None)
    terminated = status.state.terminated if status and status.state else None
    return terminated.exit_code if terminated else None


def pod_operator_kwargs(kind: str, settings: Settings, step: str,
                        gang_size: str | None = None) -> dict[str, Any]:
    """Everything but ``task_id`` and ``arguments`` for a step of ``kind`` (cpu|gpu).

    ``gang_size``: for a wave's step, the template of its pod count; under Kueue the
    wave's pods are then admitted together, as one pod group.
    """
    policy = POLICIES[kind]
    kueue = kueue_pod_kwargs(settings.kueue_queue, step, gang_size)
    # a pod gated by Kueue is Pending until admitted: queueing time on top of scheduling
    queueing = settings.kueue_admission_seconds if settings.kueue_queue else 0
    return {
        "image": settings.worker_image,
        "cmds": ["synthfactory"],
        "namespace": settings.namespace,
        "kubernetes_conn_id": settings.kubernetes_conn_for(kind),  # CPU and GPU clusters
        "name": f"synthfactory-{step.replace('_', '-')}",
        "labels": {"app.kubernetes.io/name": "synthfactory", "synthfactory.io/step": step,
                   "synthfactory.io/pool": kind, **kueue["labels"]},
        # the kubernetes-pods scrape job reads these; the PodMonitor the port's name
        "annotations": {**metrics_annotations(), **kueue["annotations"]},
        "pod_group": kueue["pod_group"],
        "gpus_param": GPUS_PARAM if step == "rephrase" else None,
        "priority_class_name": settings.priority_class or None,
        "container_resources": k8s.V1ResourceRequirements(
            requests=policy.requests, limits=policy.limits),
        "node_selector": dict(policy.node_selector),
        "tolerations": [k8s.V1Toleration(**t) for t in policy.tolerations],
        "env_vars": [k8s.V1EnvVar(name=RESULT_FILE_ENV, value=XCOM_RESULT_FILE),
                     # the step serves /metrics on the pod's `metrics` port
                     k8s.V1EnvVar(name=METRICS_PORT_ENV, value=str(METRICS_PORT)),
                     *scratch_env()],
        "ports": [k8s.V1ContainerPort(name=METRICS_PORT_NAME, container_port=METRICS_PORT,
                                      protocol="TCP")],
        **security_kwargs(kind),  # Pod Security Standard "restricted", sidecar included
        "env_from": [k8s.V1EnvFromSource(
            secret_ref=k8s.V1SecretEnvSource(name=settings.secret_name, optional=True))],
        "do_xcom_push": True,
        "get_logs": True,
        "durable": True,  # reattach to the running pod if the worker restarts (3.3's name)
        "on_finish_action": "delete_succeeded_pod",  # failed pods stay for debugging
        "startup_timeout_seconds": policy.startup_timeout_seconds,
        "schedule_timeout_seconds": policy.schedule_timeout_seconds + queueing,
        "retries": policy.retries,
        "retry_delay": (timedelta(seconds=settings.retry_delay_seconds)
                        if settings.retry_delay_seconds else policy.retry_delay),
        "retry_exponential_backoff": True,
        "max_retry_delay": policy.max_retry_delay,
        "execution_timeout": policy.execution_timeout + timedelta(seconds=queueing),
        "pool": settings.gpu_pool if kind == "gpu" else settings.cpu_pool,
    }
