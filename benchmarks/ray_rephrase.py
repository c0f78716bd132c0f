"""Issue 14 benchmark: the same prompts on the same cores, three ways.

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
lost=L duplicated=D killed_actors=K  (ratio: the best Ray configuration / one process)

With ``--nodes N`` (2 or more), one way only: a Ray cluster of N nodes on 127.0.0.1
(``ray.cluster_utils``, one CPU each; ``ray start`` would rewrite the address to a
non-loopback one), ``--replicas N --replicas-per-node 1``, and the last worker node
removed while its replica is paused mid-shard; the rest finish on the surviving nodes.
The cluster's start is not timed (it stands for a running cluster); the command is.

Last line: RESULT ray_nodes nodes=N killed_nodes=K lost=L duplicated=D tokens_per_s=T
(nodes: those the replicas ran on; killed_nodes: nodes removed mid-shard)
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

from synthfactory import storage
from synthfactory.contract import paths
from synthfactory.corpus import iter_docstrings
from synthfactory.model import default_model_dir
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


def run_nodes(shards: list[str], args, tmp: Path) -> None:
    """The ``--nodes`` way, on a cluster this process starts and stops."""
    from ray.cluster_utils import Cluster

    os.environ.setdefault("RAY_AUTH_MODE", "disabled")  # the nodes', like the driver's
    marker = tmp / "nodes.paused"
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
        workers = [cluster.add_node(node_ip_address="127.0.0.1", num_cpus=1,
                                    env_vars={**node_env(i + 1), **(
                                        pause_env(marker) if i == args.nodes - 2 else {})})
                   for i in range(args.nodes - 1)]
        removed = []

        def remove_node(_pid: int) -> None:
            cluster.remove_node(workers[-1])
            removed.append(workers[-1].node_id)

        # RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0: the driver keeps 127.0.0.1 instead of
        # resolving it to this machine's outward address, where no GCS listens
        way = run_way(f"ray-{args.nodes}-nodes", shards, args, tmp, replicas=args.nodes,
                      kill=(marker, remove_node),
                      extra_argv=("--ray-address", cluster.address, "--replicas-per-node", "1"),
                      extra_env={"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"})
    finally:
        cluster.shutdown()
    nodes = {p["node"] for p in way["summary"]["ray"]["replica_processes"]}
    print(f"RESULT ray_nodes nodes={len(nodes)} killed_nodes={len(removed)} "
          f"lost={way['lost']} duplicated={way['duplicated']} "
          f"tokens_per_s={way['tokens_per_s']:.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shards", type=int, default=6)
    parser.add_argument("--rows", type=int, default=16)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--model", default=str(default_model_dir()))
    parser.add_argument("--nodes", type=int, default=1,
                        help="2 or more: the two-node way only (see above)")
    args = parser.parse_args()
    if args.nodes < 1:
        parser.error("--nodes: 1 (one machine's Ray) or more")
    with tempfile.TemporaryDirectory(prefix="ray-bench-") as tmp:
        tmp = Path(tmp)
        shards = list(range(args.shards))
        if args.nodes > 1:
            run_nodes(shards, args, tmp)
            return
        marker = tmp / "ray-2-kill.paused"
        single = run_way("single", shards, args, tmp, replicas=1)
        ray1 = run_way("ray-1", shards, args, tmp, replicas=1)
        ray2 = run_way("ray-2-kill", shards, args, tmp, replicas=2,
                       kill=(marker, lambda pid: os.kill(pid, 9)), extra_env=pause_env(marker))
    ways = (single, ray1, ray2)
    best = max(ray1["tokens_per_s"], ray2["tokens_per_s"])
    print(f"RESULT ray replicas=2 single_tokens_per_s={single['tokens_per_s']:.1f} "
          f"ray_tokens_per_s={best:.1f} ratio={best / single['tokens_per_s']:.2f} "
          f"lost={sum(w['lost'] for w in ways)} "
          f"duplicated={sum(w['duplicated'] for w in ways)} killed_actors={ray2['killed']}")


if __name__ == "__main__":
    main()
