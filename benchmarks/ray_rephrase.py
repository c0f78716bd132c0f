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


def run_way(name: str, shards: list[str], args, tmp: Path, replicas: int,
            kill: bool) -> tuple[float, int, int, int]:
    run = tmp / name
    urls = build_shards(run, len(shards), args.rows, args.max_new_tokens)
    result = tmp / f"{name}.json"
    argv = [sys.executable, "-m", "synthfactory.cli", "rephrase",
            *[a for u in urls for a in ("--shard", u)], "--model", str(args.model),
            "--checkpoint-rows", "4", "--max-new-tokens", str(args.max_new_tokens),
            "--temperature", "0", "--replicas", str(replicas)]
    env = {**os.environ, "SYNTHFACTORY_RESULT_FILE": str(result), "RAY_AUTH_MODE": "disabled"}
    if name != "single":
        argv += ["--ray-address", "local"] if replicas == 1 else []
    killed = []
    if kill:
        marker = tmp / f"{name}.paused"
        env |= {"SYNTHFACTORY_PAUSE_AT": "rephrase:part-written",
                "SYNTHFACTORY_PAUSE_MARKER": str(marker)}

        def watch():
            while not marker.exists():
                time.sleep(0.05)
            pid = int(marker.read_text().split()[0])
            os.kill(pid, 9)
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
    return tokens / wall, lost, duplicated, len(killed)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shards", type=int, default=6)
    parser.add_argument("--rows", type=int, default=16)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--model", default=str(default_model_dir()))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ray-bench-") as tmp:
        tmp = Path(tmp)
        shards = list(range(args.shards))
        single, l0, d0, _ = run_way("single", shards, args, tmp, replicas=1, kill=False)
        ray1, l1, d1, _ = run_way("ray-1", shards, args, tmp, replicas=1, kill=False)
        ray2, l2, d2, killed = run_way("ray-2-kill", shards, args, tmp, replicas=2, kill=True)
    best = max(ray1, ray2)
    print(f"RESULT ray replicas=2 single_tokens_per_s={single:.1f} ray_tokens_per_s={best:.1f} "
          f"ratio={best / single:.2f} lost={l0 + l1 + l2} duplicated={d0 + d1 + d2} "
          f"killed_actors={killed}")


if __name__ == "__main__":
    main()
