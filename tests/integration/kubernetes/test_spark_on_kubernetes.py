"""The stitch step with Spark's executors as pods: ``--master k8s://https://127.0.0.1:PORT`` of
the real CPU control plane, the driver in the stitch pod (client mode) under the deploy kit's
``synthfactory-spark`` ServiceAccount, run through `airflow dags test`.

Spark itself creates the executor pods through the apiserver (from the operator's executor
pod template, owned by the driver pod), the scheduler places them and the node agent runs them
through the image's entrypoint (docker/spark-entrypoint.sh: ``executor`` becomes Spark's
KubernetesExecutorBackend JVM), and they reach the driver through its headless Service.

One run, one fault: when the driver pauses with its executors up, the test deletes the driver
pod, as ``kubectl delete pod`` would; the garbage collector removes its executor pods, the
task fails that try and the next try stitches. The prompt rows must equal a ``local[*]`` stitch
of the same manifest, row for row."""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from pathlib import Path

import pytest

from tests.integration.kubernetes.e2e_support import (
    INTERVAL_DAY,
    NAMESPACE,
    AirflowHome,
    cpu_nodes,
    gpu_nodes,
    needs_worker,
    report,
    run_conf,
)
from tests.support.airflow_home import airflow_env, migrate
from tests.support.paths import ROOT, WORKER, WORKER_PYTHON

pytestmark = [pytest.mark.kubernetes_e2e, pytest.mark.slow, needs_worker]
DAG_ID = "synthetic_rephrase"
HERE = Path(__file__).resolve().parent
IMAGE = "synthfactory/worker:e2e"
ONLY_CRAWL_AND_STITCH = r"^(?!(crawl_metadata|stitch_prompts)$).*"


def _executors(core) -> list:
    return core.list_namespaced_pod(NAMESPACE, label_selector="spark-role=executor").items


def delete_driver_when_paused(plane, marker: Path, stop: threading.Event, seen: dict) -> None:
    """At the pause (executors up), delete the driver pod; time the executors' removal."""
    core = plane.core()
    while not stop.is_set() and not marker.exists():
        time.sleep(0.1)
    if stop.is_set():
        return
    drivers = core.list_namespaced_pod(
        NAMESPACE, label_selector="synthfactory.io/step=stitch_prompts,spark-role!=executor")
    driver = next(p for p in drivers.items if not p.metadata.deletion_timestamp)
    executors = _executors(core)
    seen["driver"] = (driver.metadata.name, driver.metadata.uid)
    seen["executors"] = [(p.metadata.name, [(o.kind, o.name, o.uid) for o in
                                            p.metadata.owner_references or []],
                          p.status.phase) for p in executors]
    started = time.monotonic()
    core.delete_namespaced_pod(driver.metadata.name, NAMESPACE)
    while _executors(core) and time.monotonic() - started < 120:
        time.sleep(0.2)
    seen["executors_left"] = [p.metadata.name for p in _executors(core)]
    seen["gc_seconds"] = time.monotonic() - started


@pytest.fixture(scope="module")
def spark_run(corpus, control_planes, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("k8s-spark")
    home = AirflowHome(tmp / "airflow")
    home.home.mkdir()
    migrate(airflow_env(home.home))  # its own database: the same logical date as the DAG test
    marker = tmp / "paused-stitch"
    worker_bin = str(WORKER.parent)
    executor_env = {"PATH": f"{worker_bin}:{os.environ.get('PATH', '/usr/bin:/bin')}",
                    "PYSPARK_PYTHON": str(WORKER_PYTHON), "SPARK_LOCAL_IP": "127.0.0.1"}
    cpu = cpu_nodes(control_planes["cpu"], tmp, SYNTHFACTORY_PAUSE_AT="stitch:before-shards-json",
                    SYNTHFACTORY_PAUSE_MARKER=str(marker), **executor_env)
    cpu.images[IMAGE] = [str(ROOT / "docker" / "spark-entrypoint.sh")]
    gpu = gpu_nodes(control_planes["gpu"], tmp)
    master = f"k8s://{control_planes['cpu'].url}"
    conf = {**run_conf(corpus, tmp), "spark_master": master, "spark_executors": 2,
            "spark_executor_cores": 1, "spark_executor_memory": "512m"}
    stop, seen = threading.Event(), {}
    deleter = threading.Thread(target=delete_driver_when_paused,
                               args=(control_planes["cpu"], marker, stop, seen), daemon=True)
    started = time.monotonic()
    with cpu, gpu:
        deleter.start()
        try:
            done = subprocess.run(
                home.dags_test(DAG_ID, "--conf", json.dumps(conf),
                               "--mark-success-pattern", ONLY_CRAWL_AND_STITCH),
                capture_output=True, text=True, env=home.env(control_planes), timeout=1500)
        finally:
            stop.set()
            deleter.join(130)
            for plane in control_planes.values():
                plane.clear_namespace()
    (tmp / "dags-test.log").write_text(done.stdout + done.stderr)
    drivers = [p for p in cpu.started_pods if p["labels"].get("task_id") == "stitch_prompts"]
    executors = [p for p in cpu.started_pods if p["labels"].get("spark-role") == "executor"]
    return {"done": done, "home": home, "seen": seen, "drivers": drivers,
            "executors": executors, "master": master, "tmp": tmp,
            "run": tmp / "data" / DAG_ID / INTERVAL_DAY, "seconds": time.monotonic() - started}


def _tail(done) -> str:
    return (done.stdout + done.stderr)[-6000:]


def test_spark_creates_its_executor_pods_through_the_apiserver(spark_run):
    assert spark_run["done"].returncode == 0, _tail(spark_run["done"])
    seen = spark_run["seen"]
    assert "driver" in seen, "the driver never paused with its executors up"
    driver_name, driver_uid = seen["driver"]
    # spark_executors=2 and minRegisteredResourcesRatio 1.0: both were there at the pause,
    # each owned by the driver pod (what the garbage collector follows)
    assert len(seen["executors"]) == 2, seen["executors"]
    for _, owners, phase in seen["executors"]:
        assert owners == [("Pod", driver_name, driver_uid)]
        assert phase == "Running"
    # run by the node agent through the image's entrypoint, with Spark's own argument
    assert len(spark_run["executors"]) >= 2
    assert {tuple(p["args"]) for p in spark_run["executors"]} == {("executor",)}
    assert {p["node"] for p in spark_run["executors"]} == {"cpu-a"}


def test_deleting_the_driver_pod_removes_its_executors_and_the_next_try_stitches(spark_run):
    assert spark_run["done"].returncode == 0, _tail(spark_run["done"])
    seen = spark_run["seen"]
    assert seen.get("executors_left") == [], seen
    try_number, state = spark_run["home"].task_instance(DAG_ID, "stitch_prompts",
                                                       "2026-11-30T00:00:00+00:00")
    assert (try_number, state) == (2, "success")
    assert [p["labels"]["try_number"] for p in spark_run["drivers"]] == ["1", "2"]
    report(f"RESULT spark-k8s: executors removed {seen['gc_seconds']:.1f} s after their "
           f"driver pod was deleted; run {spark_run['seconds']:.0f} s")


def test_the_prompts_equal_a_local_stitch_row_for_row(spark_run):
    assert spark_run["done"].returncode == 0, _tail(spark_run["done"])
    args = list(spark_run["drivers"][-1]["args"])
    local_out = spark_run["tmp"] / "local"
    args[args.index("--run") + 1] = f"file://{local_out}"
    args[args.index("--master") + 1] = "local[*]"
    assert spark_run["master"] in spark_run["drivers"][-1]["args"]
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "SYNTHFACTORY_HOME": str(ROOT)}
    subprocess.run([str(WORKER), *args], check=True, capture_output=True, env=env, timeout=600)
    compared = subprocess.run([str(WORKER_PYTHON), str(HERE / "compare_prompts.py"),
                               str(spark_run["run"]), str(local_out)],
                              capture_output=True, text=True, check=True)
    result = json.loads(compared.stdout.strip().splitlines()[-1])
    assert result["rows_a"] > 0 and result["rows_a"] == result["rows_b"], result
    assert result["equal"], result
