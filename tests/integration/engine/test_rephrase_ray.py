"""Rephrase on Ray replicas: work stealing, a SIGKILLed actor, reruns, the GPU check.

A local Ray (2 CPUs) drives two replicas of the deterministic echo engine, slowed down
so a shard takes time; one replica is SIGKILLed in the middle of a shard (a named
pause point tells the test when and which process). The slow-marked test does the same
with two replicas of the real vLLM CPU engine and checks no engine process outlives
its replica. One test runs the console script over a two-node Ray cluster on 127.0.0.1,
a replica pinned to each node, and removes the worker node mid-shard.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from synthfactory import storage
from synthfactory.errors import SynthfactoryError
from synthfactory.model import default_model_dir, is_ready
from synthfactory.rephrase.engine_spec import EngineSpec
from synthfactory.rephrase.ray_pool import (
    PoolOptions,
    placement_nodes,
    rephrase_on_ray,
    replica_cores,
)
from synthfactory.rephrase.worker import WorkerOptions, read_commit
from tests.support.shards import write_prompt_shard, write_real_prompt_shard

ray = pytest.importorskip("ray")

SHARDS = 6
ROWS = 12


@pytest.fixture
def run_url(tmp_path):
    return f"file://{tmp_path}/run"


@pytest.fixture
def shards(run_url):
    return [write_prompt_shard(run_url, i, rows=ROWS) for i in range(SHARDS)]


def _committed_rows(run_url: str, index: int) -> list[int]:
    """Row indices of the parts a shard's commit lists, plus its quarantine parts."""
    out = storage.join(run_url, "generated", f"shard-{index:05d}")
    commit = read_commit(out)
    assert commit is not None, f"shard {index} not committed"
    rows = []
    for part in commit["parts"]:
        rows += storage.read_table(storage.join(out, part["name"])).column("row").to_pylist()
    listed = {p["name"] for p in commit["parts"]}
    on_disk = {u.rsplit("/", 1)[-1] for u in storage.list_files(out, suffix=".parquet")}
    assert on_disk == listed, "every part on storage is one the commit lists"
    return sorted(rows)


def _kill_when_paused(marker: Path, killed: list, deadline_s: float = 120) -> threading.Thread:
    def watch():
        deadline = time.monotonic() + deadline_s
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        if marker.exists():
            pid = int(marker.read_text().split()[0])
            killed.append(pid)
            os.kill(pid, signal.SIGKILL)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


def test_two_replicas_survive_a_killed_actor_exactly_once(run_url, shards, tmp_path,
                                                          monkeypatch):
    marker = tmp_path / "paused"
    monkeypatch.setenv("SYNTHFACTORY_PAUSE_AT", "rephrase:part-written")
    monkeypatch.setenv("SYNTHFACTORY_PAUSE_MARKER", str(marker))
    killed: list = []
    watcher = _kill_when_paused(marker, killed)
    ray.init(num_cpus=2, include_dashboard=False)  # after the env: its workers inherit it
    try:
        _killed_then_rerun(run_url, shards, killed, watcher)
    finally:
        ray.shutdown()


def _killed_then_rerun(run_url, shards, killed, watcher):
    results, figures = rephrase_on_ray(
        shards, None, EngineSpec(model="echo", engine="echo", echo_delay_s=0.02),
        WorkerOptions(model="echo", checkpoint_rows=4),
        PoolOptions(replicas=2, max_attempts=3))
    watcher.join(5)

    assert len(killed) == 1, "one replica was SIGKILLed mid-shard"
    assert figures["actor_deaths"] == 1 and figures["requeued"] == 1
    assert killed[0] in [p["pid"] for p in figures["replica_processes"]]
    assert all(r["status"] == "committed" for r in results)
    for i in range(SHARDS):  # 0 lost, 0 duplicated, nothing orphaned
        assert _committed_rows(run_url, i) == list(range(ROWS))
    resumed = [r for r in results if r["resumed_rows"]]
    assert len(resumed) == 1 and resumed[0]["resumed_rows"] == 4  # the killed one's part
    cores = [set(p["cores"]) for p in figures["replica_processes"]]
    if len(os.sched_getaffinity(0)) >= 2:  # each replica pinned to its own core(s)
        assert not cores[0] & cores[1]
        binds = [p["omp_bind"] for p in figures["replica_processes"]]
        assert len(set(binds)) == 2 and None not in binds  # VLLM_CPU_OMP_THREADS_BIND

    again, figures = rephrase_on_ray(  # a rerun is a no-op (the marker: no second pause)
        shards, None, EngineSpec(model="echo", engine="echo"),
        WorkerOptions(model="echo", checkpoint_rows=4), PoolOptions(replicas=2))
    assert [r["status"] for r in again] == ["already committed"] * SHARDS
    assert figures["actor_deaths"] == 0


def test_a_replica_given_a_gpu_without_cuda_fails_at_once(run_url, shards):
    ray.init(num_cpus=2, num_gpus=1, include_dashboard=False)  # a GPU slot, no CUDA
    try:
        started = time.monotonic()
        with pytest.raises(SynthfactoryError, match="CUDA is not visible"):
            rephrase_on_ray(shards, None, EngineSpec(model=str(default_model_dir())),
                            WorkerOptions(model="x"), PoolOptions(replicas=1,
                                                                  gpus_per_replica=1))
        assert time.monotonic() - started < 60
    finally:
        ray.shutdown()
    assert all(read_commit(storage.join(run_url, "generated", f"shard-{i:05d}")) is None
               for i in range(SHARDS))


def test_replica_cores_are_disjoint():
    cores = sorted(os.sched_getaffinity(0))
    split = replica_cores(len(cores))
    assert sorted(c for part in split for c in part) == cores
    assert all(len(part) == 1 for part in split)


def test_placement_pins_k_replicas_a_node_on_alive_nodes_with_room():
    def node(node_id, address, cpus, gpus, alive=True):
        return {"NodeID": node_id, "NodeManagerAddress": address, "Alive": alive,
                "Resources": {"CPU": cpus, "GPU": gpus}}

    nodes = [node("b", "10.0.0.2", 8, 2), node("head", "10.0.0.9", 8, 0),
             node("a", "10.0.0.1", 8, 2), node("dead", "10.0.0.0", 8, 2, alive=False)]
    assert placement_nodes(nodes, 4, 2, 1, 1) == ["a", "a", "b", "b"]
    assert placement_nodes(nodes, 3, 1, 1, 0) == ["a", "b", "head"]
    with pytest.raises(SynthfactoryError, match="needs 3 alive node"):
        placement_nodes(nodes, 5, 2, 1, 1)  # the head has no GPU, the dead one is dead


def test_one_replica_without_an_address_never_imports_ray(run_url, shards, tmp_path):
    code = ("import sys; from synthfactory.cli import main; "
            f"code = main(['rephrase', '--shard', {shards[0]!r}, '--engine', 'echo', "
            "'--replicas', '1', '--checkpoint-rows', '4']); "
            "print(json.dumps({'code': code, 'ray': 'ray' in sys.modules}))")
    proc = subprocess.run([sys.executable, "-c", "import json; " + code],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "SYNTHFACTORY_RESULT_FILE": str(tmp_path / "r")})
    last = json.loads(proc.stdout.strip().splitlines()[-1])
    assert last == {"code": 0, "ray": False}, proc.stderr[-2000:]
    assert _committed_rows(run_url, 0) == list(range(ROWS))


def test_cli_runs_two_replicas(run_url, shards, tmp_path):
    argv = [sys.executable, "-m", "synthfactory.cli", "rephrase", "--engine", "echo",
            "--replicas", "2", "--checkpoint-rows", "4",
            *[a for s in shards for a in ("--shard", s)]]
    result = tmp_path / "result.json"
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "SYNTHFACTORY_RESULT_FILE": str(result)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(result.read_text())
    assert summary["ray"]["replicas"] == 2
    assert summary["rows_generated"] == SHARDS * ROWS
    assert {s["replica"] for s in summary["shards"]} == {0, 1}


def test_replicas_pinned_one_per_node_survive_a_removed_node(run_url, shards, tmp_path):
    """`--replicas 2 --replicas-per-node 1` on a head and a worker node; the worker node
    is removed while its replica is paused after a shard's first part: that replica is
    given up (not restarted elsewhere), its shard resumes on the head's replica, and
    every shard is committed exactly once."""
    from ray.cluster_utils import Cluster

    script = Path(sys.executable).parent / "synthfactory"  # the real console script
    assert script.exists(), f"{script} missing: pip install -e . into this venv"
    marker = tmp_path / "paused"
    # cluster_utils, not `ray start` (it rewrites 127.0.0.1 to a non-loopback address)
    cluster = Cluster(initialize_head=True, head_node_args={
        "node_ip_address": "127.0.0.1", "num_cpus": 1, "include_dashboard": False})
    try:
        # Only the worker node's processes pause, so the replica paused is the one the
        # node removal kills (the head cannot go: the driver is attached to it).
        worker = cluster.add_node(node_ip_address="127.0.0.1", num_cpus=1, env_vars={
            "SYNTHFACTORY_PAUSE_AT": "rephrase:part-written",
            "SYNTHFACTORY_PAUSE_MARKER": str(marker)})
        head = cluster.head_node.node_id
        removed: list = []

        def remove_when_paused():
            deadline = time.monotonic() + 120
            while not marker.exists() and time.monotonic() < deadline:
                time.sleep(0.05)
            if marker.exists():
                cluster.remove_node(worker)
                removed.append(worker.node_id)

        watcher = threading.Thread(target=remove_when_paused, daemon=True)
        watcher.start()
        result = tmp_path / "result.json"
        env = {k: v for k, v in os.environ.items() if not k.startswith("SYNTHFACTORY_PAUSE")}
        # RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0: the driver keeps 127.0.0.1 instead of
        # resolving it to this machine's outward address, where no GCS listens
        env |= {"SYNTHFACTORY_RESULT_FILE": str(result), "RAY_AUTH_MODE": "disabled",
                "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
        proc = subprocess.run(
            [str(script), "rephrase", "--engine", "echo", "--echo-delay-s", "0.02",
             "--replicas", "2", "--replicas-per-node", "1", "--ray-address", cluster.address,
             "--checkpoint-rows", "4", *[a for s in shards for a in ("--shard", s)]],
            capture_output=True, text=True, timeout=300, env=env)
        watcher.join(5)
    finally:
        cluster.shutdown()
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert removed == [worker.node_id], "the worker node was removed mid-shard"

    summary = json.loads(result.read_text())
    pool = summary["ray"]
    assert pool["replicas"] == 2 and pool["replicas_per_node"] == 1
    node_of = {p["replica"]: p["node"] for p in pool["replica_processes"]}
    assert sorted(node_of.values()) == sorted([head, worker.node_id]), "one replica a node"
    (lost,) = [r for r, node in node_of.items() if node == worker.node_id]
    (survivor,) = [r for r, node in node_of.items() if node == head]
    paused_pid = int(marker.read_text().split()[0])
    assert paused_pid == next(p["pid"] for p in pool["replica_processes"]
                              if p["replica"] == lost), "paused on the removed node"
    assert pool["replicas_gone"] == [lost], "not restarted elsewhere"
    assert pool["actor_deaths"] == 1 and pool["requeued"] == 1

    results = summary["shards"]
    assert all(r["status"] == "committed" for r in results)
    assert {(r["replica"], r["node"]) for r in results} == {(survivor, head)}
    resumed = [r for r in results if r["resumed_rows"]]
    assert len(resumed) == 1 and resumed[0]["resumed_rows"] == 4  # the removed node's part
    for i in range(SHARDS):  # 0 lost, 0 duplicated, nothing orphaned
        assert _committed_rows(run_url, i) == list(range(ROWS))


def _engine_processes() -> set[int]:
    found = set()
    for proc in psutil.process_iter(["pid", "cmdline", "name"]):
        text = " ".join(proc.info["cmdline"] or []) + " " + (proc.info["name"] or "")
        if "EngineCore" in text or "VLLM::" in text:
            found.add(proc.info["pid"])
    return found


@pytest.mark.slow
@pytest.mark.skipif(not is_ready(default_model_dir()), reason="run `make setup` first")
def test_two_real_vllm_replicas_survive_a_killed_actor(run_url, tmp_path, monkeypatch):
    shard0 = write_real_prompt_shard(Path(storage.local_path(run_url)))  # the vLLM tests'
    shard1 = storage.join(run_url, "prompts", "shard-00001.parquet")
    storage.write_table(storage.read_table(shard0), shard1)
    before = _engine_processes()
    marker = tmp_path / "paused"
    monkeypatch.setenv("SYNTHFACTORY_PAUSE_AT", "rephrase:part-written")
    monkeypatch.setenv("SYNTHFACTORY_PAUSE_MARKER", str(marker))
    killed: list = []
    watcher = _kill_when_paused(marker, killed, deadline_s=600)
    model = str(default_model_dir())
    results, figures = rephrase_on_ray(
        [shard0, shard1], None,
        EngineSpec(model=model, engine_args={"max_model_len": 1024},
                   sampling={"temperature": 0.0, "max_tokens": 24}),
        WorkerOptions(model=model, checkpoint_rows=4, max_in_flight=4),
        PoolOptions(replicas=2))
    watcher.join(5)
    assert len(killed) == 1 and figures["actor_deaths"] == 1
    rows = storage.read_table(shard0).num_rows
    for i in range(2):
        assert _committed_rows(run_url, i) == list(range(rows))
    time.sleep(2)
    assert _engine_processes() - before == set(), "no engine process outlives its replica"
    assert not psutil.pid_exists(killed[0]) or psutil.Process(killed[0]).status() == "zombie"
