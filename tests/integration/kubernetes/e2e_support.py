"""Helpers shared by the kubernetes runner's end-to-end tests: node agents for a CPU and a GPU
cluster (real control planes, conftest.py) whose pods run `.venv-worker`, an Airflow home
migrated once per session, and `airflow dags test` runs pointed at the clusters through
Kubernetes connections that hold the deploy kit's launcher ServiceAccount token."""

from __future__ import annotations

import json
import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.kube_api import NodeAgent, node_spec
from tests.support.airflow_home import airflow_env
from tests.support.kube_control_plane import NAMESPACE, ControlPlane
from tests.support.paths import AIRFLOW_PYTHON, MODEL, RESULTS, ROOT, WORKER

LOGICAL_DATE = "2026-11-30T00:00:00+00:00"  # data interval 2026-11-29, as test_dag_run
INTERVAL_DAY = "2026-11-29"
POOL_LABEL = "synthfactory.io/pool"
GPU_NODE_CACHE = ROOT / "var" / "node-agent" / "gpu-node-home"  # kept between sessions
LAUNCHER = "synthfactory-launcher"  # deploy/serviceaccount.yaml

needs_worker = pytest.mark.skipif(
    not (WORKER.exists() and (MODEL / "config.json").exists()) and os.environ.get("CI") != "true",
    reason="needs .venv-worker and the prepared model (make setup)",
)


def report(line: str) -> None:
    """A figure for the person reading the run: printed, and kept as the latest of its
    name in var/test-results/ ("RESULT pod-kill: ..." -> pod-kill.txt), since pytest
    hides a passing test's output."""
    print(line)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{line.split()[1].rstrip(':')}.txt").write_text(line + "\n")


def pod_env(**extra: str) -> dict[str, str]:
    """What the worker image's environment stands for: this machine's, without Airflow's
    and synthfactory's settings (a pod gets those from its spec only)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("AIRFLOW", "SYNTHFACTORY_", "PYTEST", "KUBE"))}
    return {**env, **extra}


def cpu_nodes(plane: ControlPlane, workdir: Path, cpu: str = "16",
              **extra_env: str) -> NodeAgent:
    """The CPU cluster's node, run by a node agent (not started)."""
    return NodeAgent(plane.kubeconfig, [node_spec("cpu-a", {POOL_LABEL: "cpu"}, cpu, "64Gi")],
                     workdir / "cpu", commands={"synthfactory": str(WORKER)},
                     base_env=pod_env(**extra_env))


def gpu_nodes(plane: ControlPlane, workdir: Path, **extra_env: str) -> NodeAgent:
    # the pods' HOME (vLLM's and torch's compile caches) is kept warm between pods, as on a
    # node that ran the image before: only the first rephrase pod compiles
    return NodeAgent(plane.kubeconfig,
                     [node_spec("gpu-a", {POOL_LABEL: "gpu"}, "32", "512Gi", gpus=2)],
                     workdir / "gpu", commands={"synthfactory": str(WORKER)},
                     base_env=pod_env(**extra_env), shared_volumes={"home": GPU_NODE_CACHE})


@dataclass
class AirflowHome:
    home: Path

    def env(self, clusters: dict[str, ControlPlane], **extra: str) -> dict[str, str]:
        """Airflow's environment for the kubernetes runner, one connection per cluster, each
        holding the launcher ServiceAccount's token (never the admin's)."""
        env = {**airflow_env(self.home),
               "SYNTHFACTORY_HOME": str(ROOT), "SYNTHFACTORY_RUNNER": "kubernetes",
               "SYNTHFACTORY_NAMESPACE": NAMESPACE, "SYNTHFACTORY_RETRY_DELAY_SECONDS": "1",
               "SYNTHFACTORY_WORKER_IMAGE": "synthfactory/worker:e2e",
               # a 2-core machine running the suite parses slowly; the default is 30 s
               "AIRFLOW__CORE__DAGBAG_IMPORT_TIMEOUT": "600"}
        for pool, plane in clusters.items():
            kubeconfig = plane.service_account_kubeconfig(
                self.home / f"{pool}-launcher.kubeconfig", LAUNCHER)
            env[f"AIRFLOW_CONN_K8S_{pool.upper()}"] = json.dumps(
                {"conn_type": "kubernetes", "extra": {"kube_config_path": str(kubeconfig)}})
            env[f"SYNTHFACTORY_{pool.upper()}_KUBERNETES_CONN_ID"] = f"k8s_{pool}"
        env["SYNTHFACTORY_KUBERNETES_CONN_ID"] = "k8s_cpu" if "cpu" in clusters else "k8s_gpu"
        env.update(extra)
        return env

    @staticmethod
    def dags_test(dag_id: str, *args: str, logical_date: str = LOGICAL_DATE) -> list[str]:
        """`airflow dags test` whose run id depends on the logical date only (dag_test_run.py):
        running it again continues the same DAG run."""
        return [str(AIRFLOW_PYTHON), str(Path(__file__).with_name("dag_test_run.py")), dag_id,
                logical_date, *args]

    def db(self) -> sqlite3.Connection:
        return sqlite3.connect(self.home / "airflow.db")

    def task_instances(self, dag_id: str, logical_date: str = LOGICAL_DATE
                       ) -> list[tuple[str, int, int, str]]:
        with self.db() as db:
            return list(db.execute(
                "SELECT task_id, map_index, try_number, state FROM task_instance "
                "WHERE dag_id = ? AND run_id = ? ORDER BY task_id, map_index",
                (dag_id, f"manual__{logical_date}")))

    def task_instance(self, dag_id: str, task_id: str, logical_date: str) -> tuple[int, str]:
        """(try_number, state) of a task in the `dags test` run of ``logical_date``."""
        with self.db() as db:
            return db.execute(
                "SELECT try_number, state FROM task_instance WHERE dag_id = ? AND task_id = ? "
                "AND run_id = ?", (dag_id, task_id, f"manual__{logical_date}")).fetchone()

    def xcom(self, dag_id: str, task_id: str, map_index: int = -1) -> object:
        with self.db() as db:
            row = db.execute(
                "SELECT value FROM xcom WHERE dag_id = ? AND task_id = ? AND map_index = ? "
                "AND key = 'return_value'", (dag_id, task_id, map_index)).fetchone()
        return None if row is None else _json_value(row[0])


def _json_value(raw: object) -> object:
    value = json.loads(raw) if isinstance(raw, str | bytes) else raw
    return json.loads(value) if isinstance(value, str) and value[:1] in "[{" else value


def run_conf(corpus: str, tmp: Path) -> dict:
    """A tiny run: two shard groups, short generations, a checkpoint every two rows. The
    16-token budget truncates every row, so the quality gate rejects them all: they are
    registered anyway (``include_rejected``), to follow every row through the pods; the
    export then holds none of them."""
    return {"source": corpus, "output_root": f"file://{tmp}/data",
            "catalog_uri": f"sqlite:///{tmp}/catalog.db", "warehouse": f"file://{tmp}/warehouse",
            "templates": ["summary", "qa"], "styles_per_doc": 1, "shard_tokens": 2048,
            "max_new_tokens": 16, "checkpoint_rows": 2, "max_shard_groups": 2,
            "smoke_steps": 2, "include_rejected": True,
            # the export runs too (as a pod), so every task of the DAG has one
            "export_url": f"file://{tmp}/export"}
