"""The whole synthetic_rephrase DAG under SYNTHFACTORY_RUNNER=kubernetes, run by
`airflow dags test` against two real control planes (a CPU and a GPU cluster), under the
deploy kit's RBAC, whose pods the node agents run with the real worker: Spark, vLLM (CPU),
pyiceberg, torch.

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
    NAMESPACE,
    POOL_LABEL,
    cpu_nodes,
    gpu_nodes,
    needs_worker,
    report,
    run_conf,
)
from tests.support.paths import WORKER_PYTHON

pytestmark = [pytest.mark.kubernetes_e2e, pytest.mark.slow, needs_worker]
DAG_ID = "synthetic_rephrase"
HERE = Path(__file__).resolve().parent


def kill_first_paused_pod(agent, marker: Path, stop: threading.Event, killed: list) -> None:
    """When a worker pauses at the marker, OOM-kill the pod that runs it."""
    while not stop.is_set():
        if marker.exists():
            run = agent.pid_owner(int(marker.read_text().split()[0]))
            if run is not None:
                agent.inject(run.namespace, run.name, "OOMKilled")
                killed.append(run.name)
                return
        time.sleep(0.05)


@pytest.fixture(scope="module")
def k8s_run(airflow_home, corpus, control_planes, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("k8s-dag")
    marker = tmp / "paused-rephrase"
    agents = {
        "cpu": cpu_nodes(control_planes["cpu"], tmp),
        "gpu": gpu_nodes(control_planes["gpu"], tmp, SYNTHFACTORY_PAUSE_AT="rephrase:part-written",
                         SYNTHFACTORY_PAUSE_MARKER=str(marker)),
    }
    for agent in agents.values():
        agent.start()
    stop, killed = threading.Event(), []
    killer = threading.Thread(target=kill_first_paused_pod,
                              args=(agents["gpu"], marker, stop, killed), daemon=True)
    killer.start()
    conf = run_conf(corpus, tmp)
    started = time.monotonic()
    try:
        done = subprocess.run(
            airflow_home.dags_test(DAG_ID, "--conf", json.dumps(conf)),
            capture_output=True, text=True, env=airflow_home.env(control_planes), timeout=2400)
        # what the apiserver still holds once the run is over (before the agents go)
        left = {pool: sorted(p.metadata.name for p in plane.core().list_namespaced_pod(
            NAMESPACE).items) for pool, plane in control_planes.items()}
    finally:
        stop.set()
        for agent in agents.values():
            agent.stop()
        for plane in control_planes.values():
            plane.clear_namespace()
    (tmp / "dags-test.log").write_text(done.stdout + done.stderr)
    run = tmp / "data" / "synthetic_rephrase" / INTERVAL_DAY
    return {"done": done, "agents": agents, "killed": killed, "run": run, "conf": conf,
            "left": left, "seconds": time.monotonic() - started}


def _tail(done) -> str:
    return (done.stdout + done.stderr)[-6000:]


def test_every_task_succeeds_through_pods(k8s_run, airflow_home):
    done = k8s_run["done"]
    assert done.returncode == 0, _tail(done)
    states = airflow_home.task_instances(DAG_ID)
    assert states and {s for *_, s in states} == {"success"}, states
    pod_tasks = {t for t, *_ in states} - {"check_params", "wait_for_capacity"}
    created = [p for a in k8s_run["agents"].values() for p in a.started_pods]
    assert {p["labels"]["task_id"] for p in created} == pod_tasks


def test_a_rephrase_pod_killed_mid_shard_is_retried_and_the_shard_is_exactly_once(k8s_run,
                                                                                 airflow_home):
    assert k8s_run["done"].returncode == 0, _tail(k8s_run["done"])
    assert len(k8s_run["killed"]) == 1, "no rephrase pod paused after its first part"
    gpu = k8s_run["agents"]["gpu"]
    killed = next(p for p in gpu.started_pods if p["name"] == k8s_run["killed"][0])
    index = killed["labels"].get("map_index")
    retried = [p for p in gpu.started_pods
               if p["labels"].get("task_id") == killed["labels"]["task_id"]
               and p["labels"].get("map_index") == index]
    assert [p["labels"]["try_number"] for p in retried] == ["1", "2"]
    summary = airflow_home.xcom(DAG_ID, killed["labels"]["task_id"], int(index))
    (shard,) = summary["shards"]  # one shard per group in this run
    # a part holds checkpoint_rows (2) attempts; with rejection sampling (ADR 0141) they may
    # belong to one finished row and one still being tried, so count attempts, not rows
    assert shard["status"] == "committed" and shard["resumed_attempts"] >= 2, summary
    assert shard["resumed_rows"] <= shard["resumed_attempts"], summary
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
    assert k8s_run["left"] == {"cpu": [], "gpu": k8s_run["killed"]}


def test_each_pool_ran_in_its_own_cluster(k8s_run):
    assert k8s_run["done"].returncode == 0, _tail(k8s_run["done"])
    for pool, agent in k8s_run["agents"].items():
        pools = {p["labels"][POOL_LABEL] for p in agent.started_pods}
        assert pools == {pool}, (pool, pools)
        assert {p["node"] for p in agent.started_pods} == {f"{pool}-a"}
    report(f"RESULT k8s-dag: {k8s_run['seconds']:.0f} s, pods "
          + ", ".join(f"{pool}={len(a.started_pods)}" for pool, a in k8s_run["agents"].items()))
