"""Deployment settings read from the environment at DAG-parse time (cheap: no DB,
no Variables, so DAG files stay fast to parse)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from synthfactory.contract import steps

RUNNERS = ("local", "kubernetes")
REPHRASE_MODES = ("pods", "kuberay")
PROJECT_HOME = Path(__file__).resolve().parent.parent


def _env(name: str, default: str) -> str:
    return os.environ.get(name) or default


def _env_seconds(name: str, default: int) -> int:
    value = _env(name, str(default))
    if not value.isdigit():
        raise ValueError(f"{name}={value!r}: expected a whole number of seconds")
    return int(value)


def _env_count(name: str, default: int) -> int:
    value = _env(name, str(default)).strip()
    if not value.isdigit() or int(value) < 1:
        raise ValueError(f"{name}={value!r}: expected a whole number of at least 1")
    return int(value)


def _env_delay(name: str) -> float | None:
    value = os.environ.get(name, "").strip()
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not 0 <= seconds < 3600:
        raise ValueError(f"{name}={value!r}: expected seconds between 0 and 3600")
    return seconds


@dataclass(frozen=True)
class Settings:
    runner: str = field(default_factory=lambda: _env("SYNTHFACTORY_RUNNER", "local"))
    home: str = field(default_factory=lambda: _env("SYNTHFACTORY_HOME", str(PROJECT_HOME)))
    # local runner: the worker environment's console script
    worker_bin: str = field(default_factory=lambda: _env(
        "SYNTHFACTORY_WORKER_BIN",
        str(Path(_env("SYNTHFACTORY_HOME", str(PROJECT_HOME))) / ".venv-worker/bin/synthfactory"),
    ))
    # kubernetes runner
    worker_image: str = field(default_factory=lambda: _env(
        "SYNTHFACTORY_WORKER_IMAGE", "ghcr.io/synthfactory/worker-gpu:0.1.0"))
    namespace: str = field(default_factory=lambda: _env("SYNTHFACTORY_NAMESPACE", "synthfactory"))
    kubernetes_conn_id: str = field(default_factory=lambda: _env(
        "SYNTHFACTORY_KUBERNETES_CONN_ID", "kubernetes_default"))
    # one cluster per pool (CPU: Spark, validation; GPU: vLLM); empty: kubernetes_conn_id
    cpu_kubernetes_conn_id: str = field(default_factory=lambda: _env(
        "SYNTHFACTORY_CPU_KUBERNETES_CONN_ID", ""))
    gpu_kubernetes_conn_id: str = field(default_factory=lambda: _env(
        "SYNTHFACTORY_GPU_KUBERNETES_CONN_ID", ""))
    # kubernetes runner: first retry delay of a pod step in seconds (0: the pool policy's)
    retry_delay_seconds: int = field(default_factory=lambda: _env_seconds(
        "SYNTHFACTORY_RETRY_DELAY_SECONDS", 0))
    secret_name: str = field(default_factory=lambda: _env(
        "SYNTHFACTORY_WORKER_SECRET", "synthfactory-worker-env"))
    # local runner: an Airflow AWS connection whose credentials steps receive (optional)
    aws_conn_id: str = field(default_factory=lambda: _env("SYNTHFACTORY_AWS_CONN_ID", ""))
    # the catalog database's Airflow connection: the default of the DAG's catalog_conn_id
    catalog_conn_id: str = field(default_factory=lambda: _env("SYNTHFACTORY_CATALOG_CONN_ID", ""))
    # runs of synthetic_rephrase at once (scheduled, triggered; the UI caps a backfill's
    # own limit at it): days overlap, each day's wave admitted by the capacity sensor on
    # its own, and the GPU steps bounded by the gpu pool's slots (docs/adr/0126)
    max_active_runs: int = field(default_factory=lambda: _env_count(
        "SYNTHFACTORY_MAX_ACTIVE_RUNS", 3))
    gpu_pool: str = field(default_factory=lambda: _env("SYNTHFACTORY_GPU_POOL", "gpu"))
    cpu_pool: str = field(default_factory=lambda: _env("SYNTHFACTORY_CPU_POOL", "cpu"))
    # kubernetes runner: a Kueue LocalQueue for every pod (empty: no Kueue), and how long
    # a pod may wait for admission on top of its schedule timeout (docs/adr/0086)
    kueue_queue: str = field(default_factory=lambda: _env("SYNTHFACTORY_KUEUE_QUEUE", ""))
    kueue_admission_seconds: int = field(default_factory=lambda: _env_seconds(
        "SYNTHFACTORY_KUEUE_ADMISSION_SECONDS", 7200))
    # kubernetes runner: the pods' PriorityClass (deploy/priorityclass.yaml); empty: none
    priority_class: str = field(default_factory=lambda: _env("SYNTHFACTORY_PRIORITY_CLASS", ""))
    # kubernetes runner: the stitch pod (Spark driver) may create executor pods
    # (deploy/spark-rbac.yaml)
    spark_service_account: str = field(default_factory=lambda: _env(
        "SYNTHFACTORY_SPARK_SERVICE_ACCOUNT", "synthfactory-spark"))

    # CeleryExecutor (docs/celery.md): the Celery queue of a step's task, by its kind in
    # the steps table, so that a GPU worker (`airflow celery worker --queues gpu`) takes
    # only GPU steps; the LocalExecutor ignores queues. Tasks that are no step (the
    # Params check, the capacity sensor, the report) go to Airflow's default queue.
    cpu_queue: str = field(default_factory=lambda: _env("SYNTHFACTORY_CPU_QUEUE", "cpu"))
    gpu_queue: str = field(default_factory=lambda: _env("SYNTHFACTORY_GPU_QUEUE", "gpu"))
    # CeleryExecutor: a task may run on any worker, so a file:// location is refused by
    # check_params unless every worker mounts the same disk (NFS and the like): set 1
    workers_share_disk: bool = field(default_factory=lambda: _env(
        "SYNTHFACTORY_WORKERS_SHARE_DISK", "0") == "1")

    # where steps and the capacity sensor push their metrics (docs/metrics.md), host:port
    # or a URL; empty: nothing pushed. Read again at run time from the same variable: the
    # local runner passes it to its steps, the sensor reads it in the worker.
    pushgateway: str = field(default_factory=lambda: _env("SYNTHFACTORY_PUSHGATEWAY", ""))

    # kubernetes runner: "pods" (one pod per shard group) or "kuberay" (one RayJob for the
    # whole wave, when it outgrows a node: operators/rayjob.py, docs/rephrase.md)
    rephrase_mode: str = field(default_factory=lambda: _env(
        "SYNTHFACTORY_REPHRASE_MODE", "pods"))

    # Orchestration dry runs only (benchmarks/orchestration.py, docs/scale.md): every
    # rephrase task runs the echo engine, no model, each poll taking this many seconds;
    # its argv says so (--engine echo). Unset: the trigger form's engine, as always.
    dry_run_echo_delay_s: float | None = field(default_factory=lambda: _env_delay(
        "SYNTHFACTORY_DRY_RUN_ECHO_DELAY_S"))

    def __post_init__(self) -> None:
        if self.runner not in RUNNERS:
            raise ValueError(f"SYNTHFACTORY_RUNNER={self.runner!r}: expected one of {RUNNERS}")
        if self.rephrase_mode not in REPHRASE_MODES:
            raise ValueError(f"SYNTHFACTORY_REPHRASE_MODE={self.rephrase_mode!r}: expected one "
                             f"of {REPHRASE_MODES}")
        if self.rephrase_mode == "kuberay" and self.runner != "kubernetes":
            raise ValueError("SYNTHFACTORY_REPHRASE_MODE=kuberay needs "
                             "SYNTHFACTORY_RUNNER=kubernetes (a RayJob runs on a cluster)")
        for pool in ("cpu", "gpu"):
            if not getattr(self, f"{pool}_kubernetes_conn_id"):
                object.__setattr__(self, f"{pool}_kubernetes_conn_id", self.kubernetes_conn_id)

    @property
    def mode(self) -> str:
        """The runner's mode (operators/runners/): local, kubernetes or kuberay."""
        return "kuberay" if self.rephrase_mode == "kuberay" else self.runner

    def kubernetes_conn_for(self, pool: str) -> str:
        """The Kubernetes connection of the cluster that runs ``pool``'s (cpu|gpu) pods."""
        return {"cpu": self.cpu_kubernetes_conn_id, "gpu": self.gpu_kubernetes_conn_id}[pool]

    def dry_run_rephrase_options(self) -> list[str]:
        """Options appended to every rephrase argv (after the DAG's own: the last
        ``--engine`` wins); none unless SYNTHFACTORY_DRY_RUN_ECHO_DELAY_S is set."""
        if self.dry_run_echo_delay_s is None:
            return []
        return steps.options("rephrase", {"--engine": "echo",
                                          "--echo-delay-s": f"{self.dry_run_echo_delay_s:g}"})

    def queue_for(self, kind: str) -> str:
        """The Celery queue of a step of ``kind`` (the steps table's: a Spark driver is
        CPU work)."""
        return self.gpu_queue if kind == steps.GPU else self.cpu_queue

    def url(self, *parts: str) -> str:
        return "file://" + str(Path(self.home, *parts))
