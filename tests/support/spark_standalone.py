"""A Spark standalone cluster on this machine, from the jars PySpark ships: one master and
N workers on 127.0.0.1, each a ``spark-class`` JVM in its own process group.

For the tests and benchmarks of the stitch job on a real cluster master (``spark://``;
nothing in production starts one, so it is not in the engine): executors run inside
the workers, so tasks cross process boundaries, shuffles go over the network stack and
every Python function is pickled to another JVM's Python worker, as on a real cluster.
``stop()`` ends every process the cluster started (executors and their Python workers
included), also when the caller failed.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from synthfactory.errors import RetryableError

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


@dataclass
class StandaloneCluster:
    """A running master and its workers; ``master_url`` is what ``--master`` takes."""

    work_dir: Path
    master_port: int
    webui_port: int
    worker_webui_ports: list[int]
    processes: list[subprocess.Popen] = field(default_factory=list)

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.master_port}"

    @property
    def webui_url(self) -> str:
        return f"http://127.0.0.1:{self.webui_port}"

    def state(self) -> dict:
        """The master's JSON status (workers, running and completed applications)."""
        with urllib.request.urlopen(f"{self.webui_url}/json", timeout=5) as response:
            return json.load(response)

    def logs(self) -> str:
        tails = []
        for path in sorted(self.work_dir.glob("*.log")):
            tails.append(f"--- {path.name}\n" + "\n".join(path.read_text().splitlines()[-20:]))
        return "\n".join(tails)

    def stop(self) -> None:
        """SIGTERM then SIGKILL to every process the daemons started, and the daemons."""
        import psutil

        victims: list[psutil.Process] = []
        for proc in self.processes:
            try:
                parent = psutil.Process(proc.pid)
                victims += [*parent.children(recursive=True), parent]
            except psutil.NoSuchProcess:
                pass
        for proc in self.processes:  # the daemons' process groups: executors started there
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        for victim in victims:
            try:
                victim.terminate()
            except psutil.NoSuchProcess:
                pass
        _, alive = psutil.wait_procs(victims, timeout=15)
        for victim in alive:
            try:
                victim.kill()
            except psutil.NoSuchProcess:
                pass
        psutil.wait_procs(alive, timeout=10)
        for proc in self.processes:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait(timeout=10)
        self.processes.clear()

    def __enter__(self) -> StandaloneCluster:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM when the process that started it dies, even by
    SIGKILL, so no daemon outlives its test or benchmark (Linux; elsewhere a no-op)."""
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def daemon_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """What the daemons run with: this interpreter for Python workers, loopback only."""
    return {
        **os.environ,
        "SPARK_HOME": str(spark_home()),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
        **(env or {}),
    }


def start_cluster(work_dir: Path, workers: int = 2, cores: int = 1, memory: str = "1g",
                  env: dict[str, str] | None = None, timeout_s: float = 120) -> StandaloneCluster:
    """Start a master and ``workers`` workers of ``cores`` cores and ``memory`` each and
    wait until all are registered. ``env`` is added to every daemon's environment (and
    so to the executors': e.g. storage credentials, as a real cluster's nodes hold them)."""
    work_dir.mkdir(parents=True, exist_ok=True)
    cluster = StandaloneCluster(work_dir, free_port(), free_port(),
                                [free_port() for _ in range(workers)])
    spark_class = str(spark_home() / "bin" / "spark-class")
    environment = daemon_env(env)

    def launch(name: str, args: list[str]) -> None:
        log = open(work_dir / f"{name}.log", "wb")  # the child keeps its own descriptor
        cluster.processes.append(subprocess.Popen(
            [spark_class, *args], env=environment, cwd=work_dir, stdout=log,
            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
            preexec_fn=_die_with_parent))
        log.close()

    try:
        launch("master", [MASTER_CLASS, "--host", "127.0.0.1", "--port",
                          str(cluster.master_port), "--webui-port", str(cluster.webui_port)])
        for i, ui_port in enumerate(cluster.worker_webui_ports):
            worker_dir = work_dir / f"worker-{i}"
            worker_dir.mkdir(exist_ok=True)
            launch(f"worker-{i}", [WORKER_CLASS, "--host", "127.0.0.1", "--cores", str(cores),
                                   "--memory", memory, "--webui-port", str(ui_port),
                                   "--work-dir", str(worker_dir), cluster.master_url])
        _wait_for_workers(cluster, workers, timeout_s)
    except BaseException:
        cluster.stop()
        raise
    return cluster


def _wait_for_workers(cluster: StandaloneCluster, workers: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    alive = 0
    while time.monotonic() < deadline:
        for proc in cluster.processes:
            if proc.poll() is not None:
                raise RetryableError(
                    f"Spark standalone daemon {proc.args[1]} exited with {proc.returncode}:\n"
                    + cluster.logs())
        try:
            alive = sum(w["state"] == "ALIVE" for w in cluster.state()["workers"])
        except OSError:
            alive = 0
        if alive == workers:
            return
        time.sleep(0.5)
    raise RetryableError(
        f"Spark standalone cluster at {cluster.master_url}: {alive} of {workers} workers "
        f"registered after {timeout_s:.0f} s:\n" + cluster.logs())


def event_log_conf(folder: Path) -> dict[str, str]:
    """Spark settings that write an uncompressed, single-file event log under ``folder``."""
    return {"spark.eventLog.enabled": "true", "spark.eventLog.dir": f"file://{folder}",
            "spark.eventLog.compress": "false", "spark.eventLog.rolling.enabled": "false"}


def executors_in_event_log(folder: Path) -> dict[str, dict]:
    """Executor id -> ``{"stdout": its log URL (it names the worker's web UI), "tasks":
    how many tasks it ran}``, from the event logs under ``folder``."""
    executors: dict[str, dict] = {}
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        for line in path.read_text().splitlines():
            event = json.loads(line)
            if event["Event"] == "SparkListenerExecutorAdded":
                executors.setdefault(event["Executor ID"], {"tasks": 0})["stdout"] = \
                    event["Executor Info"]["Log Urls"].get("stdout")
            elif event["Event"] == "SparkListenerTaskEnd":
                entry = executors.setdefault(event["Task Info"]["Executor ID"],
                                             {"stdout": None, "tasks": 0})
                entry["tasks"] += 1
    return executors
