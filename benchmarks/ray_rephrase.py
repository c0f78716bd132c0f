"""Ray's cost and its recovery: the same prompts on the same cores, three ways.

1. one process: today's worker (`synthfactory rephrase`, one engine on every core);
2. Ray, one replica on every core;
3. Ray, two replicas each pinned to its own core(s), one of them SIGKILLed mid-shard
   (the shard goes back to the queue and resumes on the restarted replica).

Each way runs the real console script on fresh copies of the same prompt shards, with
the real vLLM engine (CPU build here), and is timed end to end (engine start, Ray
start, generation, commits): tokens/s = committed output tokens / wall seconds. Then
the committed rows of every shard are counted: lost and duplicated must be 0.

    .venv-worker/bin/python benchmarks/ray_rephrase.py [--shards 6 --rows 16 --max-new-tokens 64]

Last line: RESULT ray replicas=2 single_tokens_per_s=X ray_tokens_per_s=Y ratio=Y/X
lost=L duplicated=D killed_actors=K isa=FLAGS  (ratio: the best Ray configuration / one
process; isa: the CPU's vector extensions, synthfactory.hardware.isa())

With ``--nodes N`` (2 or more; defaults then 16 shards x 8 rows, 32 new tokens): the
node-loss way only, the same work twice on a Ray cluster of N nodes on 127.0.0.1
(``ray.cluster_utils``, one CPU each; ``ray start`` would rewrite the address to a
non-loopback one), ``--replicas N --replicas-per-node 1``, each run on a cluster of its
own: first with the last worker node killed (SIGKILL, a machine lost, not drained) while
its replica is paused after a shard's first part, a fresh node joining in its place (as
KubeRay's worker group brings one back), then without the loss. A cluster's start is
not timed (it stands for a running cluster); the command is. It prints the loss's
timeline from the pool's events (removal, detection, the replacement's start and engine
start, the re-queued shard's resumption) and the budget the fix is held to.
``SYNTHFACTORY_RAY_REPLACE_LOST=0`` in the environment measures the old behaviour (the
lost replica given up; docs/rephrase.md, "What a lost node costs").

Last line: RESULT ray_nodes nodes=N killed_nodes=K lost=L duplicated=D tokens_per_s=T
lost_s=S detect_s=D engine_start_s=E uncommitted_s=U isa=FLAGS
(tokens_per_s: the run with the loss; lost_s: its wall time minus the run's without;
detect_s: from the kill to the pool learning its replica is gone; engine_start_s: from
the replacement's start to its engine being up, or without one, one engine start of the
run; uncommitted_s: the time the resumed shard took to generate again the rows its lost
replica had not checkpointed. Budget: lost_s <= 1.2 x (D + E + U) + 5.)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from machine import print_machine, result_line

from synthfactory import storage
from synthfactory.contract import paths
from synthfactory.corpus import iter_docstrings
from synthfactory.model import default_model_dir
from synthfactory.rephrase.ray_pool import REPLACE_LOST_ENV
from synthfactory.stitch.prompt_table import prompt_table
from synthfactory.stitch.templates import load_template


def build_shards(run: Path, shards: int, rows: int, max_new_tokens: int) -> list[str]:
    template = load_template("summary")
    docs = []
    for _, text in iter_docstrings(Path(sysconfig.get_paths()["stdlib"]), 300, 1200, 1):
        docs.append(text)
        if len(docs) == shards * rows:
            break
    urls = []
    for s in range(shards):
        chunk = docs[s * rows:(s + 1) * rows]
        table = prompt_table(template, [f"doc-{s}-{i:03d}" for i in range(rows)], chunk,
                             max_new_tokens)
        url = f"file://{run}/{paths.prompt_shard(s)}"
        storage.write_table(table, url)
        urls.append(url)
    return urls


def count_rows(run: Path, shards: int, rows: int) -> tuple[int, int]:
    """(lost, duplicated) over every shard's committed parts and quarantine."""
    lost = duplicated = 0
    folder = storage.run_folder(f"file://{run}")
    for s in range(shards):
        name = paths.shard_name(s)
        commit = folder.commit(name)
        if commit is None:
            sys.exit(f"{folder.url(paths.commit(name))}: not written")
        out = folder.url(paths.generated_shard(name))
        seen: list[int] = []
        for part in commit["parts"]:
            seen += storage.read_table(f"{out}/{part['name']}").column("row").to_pylist()
            q = folder.url(f"{paths.rephrase_quarantine(name)}/{part['name']}")
            if storage.exists(q):
                seen += storage.read_table(q).column("row").to_pylist()
        lost += len(set(range(rows)) - set(seen))
        duplicated += len(seen) - len(set(seen))
    return lost, duplicated


def pause_env(marker: Path) -> dict[str, str]:
    """A replica started with these pauses after its first part and writes ``marker``."""
    return {"SYNTHFACTORY_PAUSE_AT": "rephrase:part-written",
            "SYNTHFACTORY_PAUSE_MARKER": str(marker)}


def run_way(name: str, shards: list[str], args, tmp: Path, replicas: int,
            kill: tuple[Path, Callable[[int], None]] | None = None,
            extra_argv: tuple[str, ...] = (), extra_env: dict | None = None) -> dict:
    """``kill``: (marker, action): once a replica has paused, ``action(its pid)``."""
    run = tmp / name
    urls = build_shards(run, len(shards), args.rows, args.max_new_tokens)
    result = tmp / f"{name}.json"
    argv = [sys.executable, "-m", "synthfactory.cli", "rephrase",
            *[a for u in urls for a in ("--shard", u)], "--model", str(args.model),
            "--checkpoint-rows", "4", "--max-new-tokens", str(args.max_new_tokens),
            "--temperature", "0", "--replicas", str(replicas)]
    env = {**os.environ, "SYNTHFACTORY_RESULT_FILE": str(result), "RAY_AUTH_MODE": "disabled",
           **(extra_env or {})}
    if name != "single":
        argv += ["--ray-address", "local"] if replicas == 1 and not extra_argv else []
    argv += extra_argv
    killed = []
    if kill:
        marker, action = kill

        def watch():
            while not marker.exists():
                time.sleep(0.05)
            pid = int(marker.read_text().split()[0])
            action(pid)
            killed.append(pid)

        threading.Thread(target=watch, daemon=True).start()
    started = time.monotonic()
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=3600)
    wall = time.monotonic() - started
    if proc.returncode != 0:
        sys.exit(f"{name} failed:\n{proc.stderr[-3000:]}")
    summary = json.loads(result.read_text())
    lost, duplicated = count_rows(run, len(urls), args.rows)
    tokens = summary["output_tokens"]
    print(f"{name:<12} replicas={replicas} wall={wall:.1f}s output_tokens={tokens} "
          f"tokens/s={tokens / wall:.1f} lost={lost} duplicated={duplicated} "
          f"killed={len(killed)} ray={summary.get('ray', {}).get('actor_deaths', '-')}",
          flush=True)
    return {"tokens_per_s": tokens / wall, "lost": lost, "duplicated": duplicated,
            "killed": len(killed), "summary": summary}


def run_nodes(shards: list[str], args, tmp: Path) -> dict:
    """The ``--nodes`` way: the same work on a cluster of ``args.nodes`` nodes twice, each
    on a cluster of its own started and stopped here: first with the last worker node
    killed while its replica is paused after a shard's first part (and a fresh node
    joining in its place, as KubeRay's worker group brings one back), then without."""
    lost_run = _cluster_run("ray-nodes-lost", shards, args, tmp, remove=True)
    steady = _cluster_run("ray-nodes", shards, args, tmp, remove=False)
    return {**_where_the_time_went(lost_run, steady), "runs": (lost_run, steady)}


def _cluster_run(name: str, shards: list[str], args, tmp: Path, remove: bool) -> dict:
    from ray.cluster_utils import Cluster

    os.environ.setdefault("RAY_AUTH_MODE", "disabled")  # the nodes', like the driver's
    marker = tmp / f"{name}.paused"
    # Each node stands for a machine of its own: one core, its vLLM's OpenMP threads bound
    # to it. Without that, every replica binds both cores of this machine and they fight
    # (a replica joined to a cluster address gets no cores of its own from the pool).
    cores = os.cpu_count() or 1

    def node_env(index: int) -> dict[str, str]:
        return {"VLLM_CPU_OMP_THREADS_BIND": str(index % cores), "OMP_NUM_THREADS": "1"}

    cluster = Cluster(initialize_head=True, head_node_args={
        "node_ip_address": "127.0.0.1", "num_cpus": 1, "include_dashboard": False,
        "env_vars": node_env(0)})
    try:
        # only the last node's processes pause: the head cannot go (the driver is on it)
        last = args.nodes - 2
        workers = [cluster.add_node(node_ip_address="127.0.0.1", num_cpus=1,
                                    env_vars={**node_env(i + 1), **(
                                        pause_env(marker) if remove and i == last else {})})
                   for i in range(args.nodes - 1)]
        run = tmp / name
        urls = build_shards(run, len(shards), args.rows, args.max_new_tokens)
        result = tmp / f"{name}.json"
        argv = [sys.executable, "-m", "synthfactory.cli", "rephrase",
                *[a for u in urls for a in ("--shard", u)], "--model", str(args.model),
                "--checkpoint-rows", "4", "--max-new-tokens", str(args.max_new_tokens),
                "--temperature", "0", "--replicas", str(args.nodes),
                "--ray-address", cluster.address, "--replicas-per-node", "1"]
        # RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0: the driver keeps 127.0.0.1 instead of
        # resolving it to this machine's outward address, where no GCS listens
        env = {**os.environ, "SYNTHFACTORY_RESULT_FILE": str(result),
               "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
        started = time.monotonic()
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        removed_at = None
        # cluster.add_node installs signal handlers: main thread only, so the watch is here
        while remove and removed_at is None and proc.poll() is None:
            if marker.exists():
                removed_at = time.time()
                # a machine lost, not a node drained: its processes are SIGKILLed, Ray
                # learns it from its own health checks
                cluster.remove_node(workers[last], allow_graceful=False)
                cluster.add_node(node_ip_address="127.0.0.1", num_cpus=1,
                                 env_vars=node_env(last + 1))
                print(f"{name}: node removed; a fresh one joined "
                      f"{time.time() - removed_at:.1f}s later", flush=True)
            time.sleep(0.05)
        _, stderr = proc.communicate(timeout=3600)
        wall = time.monotonic() - started
    finally:
        cluster.shutdown()
    if proc.returncode != 0:
        sys.exit(f"{name} failed:\n{stderr[-3000:]}")
    if remove and removed_at is None:
        sys.exit(f"{name}: no replica paused, no node was removed")
    summary = json.loads(result.read_text())
    lost, duplicated = count_rows(run, len(urls), args.rows)
    tokens = summary["output_tokens"]
    print(f"{name:<15} nodes={args.nodes} wall={wall:.1f}s output_tokens={tokens} "
          f"tokens/s={tokens / wall:.1f} lost={lost} duplicated={duplicated} "
          f"replicas_gone={summary['ray']['replicas_gone']} "
          f"replaced={summary['ray'].get('replaced', [])}", flush=True)
    return {"wall": wall, "tokens_per_s": tokens / wall, "lost": lost,
            "duplicated": duplicated, "summary": summary, "removed_at": removed_at,
            "killed_nodes": int(removed_at is not None)}


def _where_the_time_went(lost_run: dict, steady: dict) -> dict:
    """The with-removal run's timeline from the pool's events and the shards' timings:
    detection (the pool learns the replica is gone), the replacement's start and engine
    start, the re-queued shard's resumption, and the work it did again."""
    pool, removed = lost_run["summary"]["ray"], lost_run["removed_at"]
    events = pool["events"]
    shards = lost_run["summary"]["shards"]

    def first(kind, **match):
        return next((e for e in events if e["event"] == kind
                     and all(e.get(k) == v for k, v in match.items())), None)

    lost = first("lost")
    detect = lost["t"] - removed
    print(f"  +{0:6.1f}s  node removed (replica {lost['replica']} paused after "
          f"{lost['shard'].rsplit('/', 1)[-1]}'s first part)")
    print(f"  +{detect:6.1f}s  the pool learns its replica is gone ({lost['error']})")
    verdict = first("gone", replica=lost["replica"])
    if verdict:
        print(f"  +{verdict['t'] - removed:6.1f}s  replica {lost['replica']} given up "
              f"({verdict['error']})")
    resumed = first("handed", shard=lost["shard"], attempt=2)
    if resumed:
        print(f"  +{resumed['t'] - removed:6.1f}s  its shard resumes on replica "
              f"{resumed['replica']}")
    (redo,) = [r for r in shards if r["resumed_rows"]]
    uncommitted = redo["generation_s"]
    print(f"  {'':8}  the shard kept {redo['resumed_rows']} rows from its part(s); the "
          f"rest generated again in {uncommitted:.1f}s (uncommitted work)")
    replacing = first("replacing")
    if replacing:
        new = replacing["replica"]
        ready = first("ready", replica=new)
        engine_start = ready["t"] - replacing["t"]
        print(f"  +{replacing['t'] - removed:6.1f}s  replica {new} starts on the fresh node")
        print(f"  +{ready['t'] - removed:6.1f}s  its engine is up (process "
              f"{engine_start - ready['engine_start_s']:.1f}s, engine "
              f"{ready['engine_start_s']:.1f}s); it takes shards from now on")
    else:  # none started: one engine start of this run stands for the budget's
        engine_start = max(r["startup_s"] for r in shards)
        print(f"  {'':8}  no replica replaced the lost one (the run ends on the "
              f"survivors); one engine start here took {engine_start:.1f}s")
    lost_s = lost_run["wall"] - steady["wall"]
    budget = 1.2 * (detect + engine_start + uncommitted) + 5
    print(f"lost {lost_s:.1f}s of wall time against the run without the removal; budget "
          f"1.2 x (detect {detect:.1f} + engine start {engine_start:.1f} + uncommitted "
          f"{uncommitted:.1f}) + 5 = {budget:.1f}s: {'within' if lost_s <= budget else 'OVER'}",
          flush=True)
    return {"lost_s": lost_s, "detect_s": detect, "engine_start_s": engine_start,
            "uncommitted_s": uncommitted}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shards", type=int, default=None,
                        help="default 6, 16 with --nodes")
    parser.add_argument("--rows", type=int, default=None, help="default 16, 8 with --nodes")
    parser.add_argument("--max-new-tokens", type=int, default=None,
                        help="default 64, 32 with --nodes")
    parser.add_argument("--model", default=str(default_model_dir()))
    parser.add_argument("--nodes", type=int, default=1,
                        help="2 or more: the node-loss way only (see above)")
    args = parser.parse_args()
    if args.nodes < 1:
        parser.error("--nodes: 1 (one machine's Ray) or more")
    for key, one, more in (("shards", 6, 16), ("rows", 16, 8), ("max_new_tokens", 64, 32)):
        if getattr(args, key) is None:
            setattr(args, key, more if args.nodes > 1 else one)
    print_machine()
    with tempfile.TemporaryDirectory(prefix="ray-bench-") as tmp:
        tmp = Path(tmp)
        shards = list(range(args.shards))
        if args.nodes > 1:
            old = os.environ.get(REPLACE_LOST_ENV) == "0"
            print(f"{REPLACE_LOST_ENV}={'0' if old else '1'}: "
                  f"{'given up, the run ends on the survivors' if old else 'replaced'}; "
                  f"{args.shards} shards x {args.rows} rows, {args.max_new_tokens} new tokens",
                  flush=True)
            times = run_nodes(shards, args, tmp)
            print_machine()
            lost_run, steady = times.pop("runs")
            print(result_line(
                "ray_nodes", nodes=args.nodes, killed_nodes=lost_run["killed_nodes"],
                lost=lost_run["lost"] + steady["lost"],
                duplicated=lost_run["duplicated"] + steady["duplicated"],
                tokens_per_s=f"{lost_run['tokens_per_s']:.1f}",
                lost_s=f"{times['lost_s']:.1f}", detect_s=f"{times['detect_s']:.1f}",
                engine_start_s=f"{times['engine_start_s']:.1f}",
                uncommitted_s=f"{times['uncommitted_s']:.1f}"))
            return
        marker = tmp / "ray-2-kill.paused"
        single = run_way("single", shards, args, tmp, replicas=1)
        ray1 = run_way("ray-1", shards, args, tmp, replicas=1)
        ray2 = run_way("ray-2-kill", shards, args, tmp, replicas=2,
                       kill=(marker, lambda pid: os.kill(pid, 9)), extra_env=pause_env(marker))
    print_machine()
    ways = (single, ray1, ray2)
    best = max(ray1["tokens_per_s"], ray2["tokens_per_s"])
    print(result_line(
        "ray", replicas=2, single_tokens_per_s=f"{single['tokens_per_s']:.1f}",
        ray_tokens_per_s=f"{best:.1f}", ratio=f"{best / single['tokens_per_s']:.2f}",
        lost=sum(w["lost"] for w in ways), duplicated=sum(w["duplicated"] for w in ways),
        killed_actors=ray2["killed"]))


if __name__ == "__main__":
    main()
