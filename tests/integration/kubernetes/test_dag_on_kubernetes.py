"""The whole synthetic_rephrase DAG under SYNTHFACTORY_RUNNER=kubernetes, run by
`airflow dags test` against two Kubernetes API doubles (a CPU and a GPU cluster) whose pods
run the real worker: Spark, vLLM (CPU), pyiceberg, torch.

One run, one fault: the first rephrase pod is OOM-killed right after its first checkpoint
part (the worker pauses at the named point ``rephrase:part-written``, the test kills it). The
provider retries, the worker resumes from its parts, and the tests below check what a user
would: every task succeeded, summaries came back through the xcom sidecar, the Asset event
carries the register summary, succeeded pods were deleted and the failed one kept, each pool's
pods ran in its own cluster, and every (id, template_id) was written exactly once."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from pathlib import Path

import pytest

from tests.integration.kubernetes.e2e_support import (
    INTERVAL_DAY,
    POOL_LABEL,
    cpu_cluster,
    gpu_cluster,
    needs_worker,
    report,
    run_conf,
)
from tests.support.paths import WORKER_PYTHON

pytestmark = [pytest.mark.kubernetes_e2e, pytest.mark.slow, needs_worker]
DAG_ID = "synthetic_rephrase"
HERE = Path(__file__).resolve().parent


def kill_first_paused_pod(double, marker: Path, stop: threading.Event, killed: list) -> None:
    """When a worker pauses at the marker, OOM-kill the pod that runs it."""
    while not stop.is_set():
        if marker.exists():
            pid = int(marker.read_text().split()[0])
            with double.lock:
                names = [r.key[1] for r in double.pods.values()
                         if r.process is not None and r.process.pid == pid]
            if names:
                double.inject(names[0], "OOMKilled")
                killed.append(names[0])
                return
        time.sleep(0.05)


@pytest.fixture(scope="module")
def k8s_run(airflow_home, corpus, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("k8s-dag")
    marker = tmp / "paused-rephrase"
    clusters = {
        "cpu": cpu_cluster(tmp),
        "gpu": gpu_cluster(tmp, SYNTHFACTORY_PAUSE_AT="rephrase:part-written",
                           SYNTHFACTORY_PAUSE_MARKER=str(marker)),
    }
    for double in clusters.values():
        double.start()
    stop, killed = threading.Event(), []
    killer = threading.Thread(target=kill_first_paused_pod,
                              args=(clusters["gpu"], marker, stop, killed), daemon=True)
    killer.start()
    conf = run_conf(corpus, tmp)
    started = time.monotonic()
    try:
        done = subprocess.run(
            airflow_home.dags_test(DAG_ID, "--conf", json.dumps(conf)),
            capture_output=True, text=True, env=airflow_home.env(clusters), timeout=2400)
    finally:
        stop.set()
        for double in clusters.values():
            double.stop()
    (tmp / "dags-test.log").write_text(done.stdout + done.stderr)
    run = tmp / "data" / "synthetic_rephrase" / INTERVAL_DAY
    return {"done": done, "clusters": clusters, "killed": killed, "run": run, "conf": conf,
            "seconds": time.monotonic() - started}


def _tail(done) -> str:
    return (done.stdout + done.stderr)[-6000:]


def test_every_task_succeeds_through_pods(k8s_run, airflow_home):
    done = k8s_run["done"]
    assert done.returncode == 0, _tail(done)
    states = airflow_home.task_instances(DAG_ID)
    assert states and {s for *_, s in states} == {"success"}, states
    pod_tasks = {t for t, *_ in states} - {"check_params", "wait_for_capacity"}
    created = [p for d in k8s_run["clusters"].values() for p in d.created]
    assert {p["labels"]["task_id"] for p in created} == pod_tasks


def test_a_rephrase_pod_killed_mid_shard_is_retried_and_the_shard_is_exactly_once(k8s_run,
                                                                                 airflow_home):
    assert k8s_run["done"].returncode == 0, _tail(k8s_run["done"])
    assert len(k8s_run["killed"]) == 1, "no rephrase pod paused after its first part"
    gpu = k8s_run["clusters"]["gpu"]
    killed = next(p for p in gpu.created if p["name"] == k8s_run["killed"][0])
    index = killed["labels"].get("map_index")
    retried = [p for p in gpu.created if p["labels"].get("task_id") == killed["labels"]["task_id"]
               and p["labels"].get("map_index") == index]
    assert [p["labels"]["try_number"] for p in retried] == ["1", "2"]
    summary = airflow_home.xcom(DAG_ID, killed["labels"]["task_id"], int(index))
    (shard,) = summary["shards"]  # one shard per group in this run
    assert shard["status"] == "committed" and shard["resumed_rows"] >= 2, summary
    counted = subprocess.run([str(WORKER_PYTHON), str(HERE / "count_rows.py"),
                              str(k8s_run["run"])], capture_output=True, text=True, check=True)
    rows = json.loads(counted.stdout.strip().splitlines()[-1])
    report(f"RESULT pod-kill: prompts={rows['prompts']} written={rows['written']} "
          f"lost={rows['lost']} duplicated={rows['duplicated']}")
    assert rows["prompts"] > 0
    assert (rows["lost"], rows["duplicated"], rows["unknown"]) == (0, 0, 0), rows
    assert rows["written"] == rows["prompts"]


def test_step_summaries_arrive_through_the_sidecar_and_the_asset_event(k8s_run, airflow_home):
    assert k8s_run["done"].returncode == 0, _tail(k8s_run["done"])
    plan = airflow_home.xcom(DAG_ID, "plan_shards")
    assert isinstance(plan, list) and len(plan) == 2 and plan[0]["rephrase"][0] == "rephrase"
    register = airflow_home.xcom(DAG_ID, "register_catalog")
    assert register["table"] == "synthetic.rephrased" and register["rows"] > 0
    assert register["include_rejected"] is True
    assert register["rows"] == register["rows_generated"] == (
        register["rows_usable"] + register["rows_rejected"])
    with airflow_home.db() as db:
        extras = [json.loads(e) for (e,) in db.execute("SELECT extra FROM asset_event")]
    assert extras and extras[-1] == register


def test_succeeded_pods_are_deleted_and_the_failed_one_kept(k8s_run):
    assert k8s_run["done"].returncode == 0, _tail(k8s_run["done"])
    clusters = k8s_run["clusters"]
    left = {pool: sorted(name for _, name in d.pods) for pool, d in clusters.items()}
    assert left == {"cpu": [], "gpu": k8s_run["killed"]}
    for double in clusters.values():
        created = {p["name"] for p in double.created}
        assert set(double.deleted) == created - set(k8s_run["killed"])


def test_each_pool_ran_in_its_own_cluster(k8s_run):
    assert k8s_run["done"].returncode == 0, _tail(k8s_run["done"])
    for pool, double in k8s_run["clusters"].items():
        pools = {p["labels"][POOL_LABEL] for p in double.created}
        assert pools == {pool}, (pool, pools)
    report(f"RESULT k8s-dag: {k8s_run['seconds']:.0f} s, pods "
          + ", ".join(f"{pool}={len(d.created)}" for pool, d in k8s_run["clusters"].items()))
