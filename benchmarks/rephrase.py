"""What checkpointing costs: the checkpointed worker against bare ``LLM.chat``, then
kill-and-resume trials.

Part 1 loads one vLLM engine (CPU build here, CUDA on a GPU) and generates the same
prompts with the same sampling twice each, alternating: bare ``LLM.chat`` over all
prompts, and the worker (``rephrase_shard``: enqueue, step, checkpoint parts, commit).
Part 2 starts ``synthfactory rephrase`` as a subprocess, SIGKILLs it at a random row
count, reruns it to completion, and counts lost, duplicated and recomputed rows
(recomputed = rows the killed attempt had finished, by its per-row progress log,
minus rows saved in parts).

    .venv-worker/bin/python benchmarks/rephrase.py [--prompts 48 --max-new-tokens 64]

Last line: RESULT rephrase prompts=N bare_tokens_per_s=X worker_tokens_per_s=Y
ratio=Y/X max_recomputed_rows=R lost=L duplicated=D isa=I (I: the CPU's vector
extensions, benchmarks/machine.py; ``machine: isa=I load ...`` lines, uptime's load, come
before and after the measurement). Each round prints the engine's own arguments (the
defaults for this hardware merged with any given), as the built engine holds them.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import signal
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

from machine import print_machine, result_line  # this folder is on sys.path

from synthfactory import storage
from synthfactory.corpus import iter_docstrings
from synthfactory.model import default_model_dir
from synthfactory.stitch.prompt_table import prompt_table
from synthfactory.stitch.templates import load_template

PROGRESS = re.compile(r"shard-\d+: (\d+)/(\d+) rows")


def build_shard(run: Path, prompts: int, max_new_tokens: int) -> str:
    template = load_template("summary")
    docs = []
    for _, text in iter_docstrings(Path(sysconfig.get_paths()["stdlib"]), 300, 1200, 1):
        docs.append(text)
        if len(docs) == prompts:
            break
    table = prompt_table(template, [f"doc-{i:04d}" for i in range(prompts)], docs,
                         max_new_tokens)
    url = f"file://{run}/prompts/shard-00000.parquet"
    storage.write_table(table, url)
    return url


def throughput(args, shard: str, tmp: Path) -> tuple[float, float]:
    from synthfactory.rephrase.engines import VllmEngine
    from synthfactory.rephrase.worker import WorkerOptions, rephrase_shard

    sampling = {"temperature": 0.0, "max_tokens": args.max_new_tokens}
    first = VllmEngine(str(args.model), {}, sampling)  # loads the engine once
    print(f"engine args {first.engine_args}", flush=True)
    llm, params = first.llm, first.params
    table = storage.read_table(shard)
    conversations = [[{"role": "system", "content": s}, {"role": "user", "content": u}]
                     for s, u in zip(table.column("system").to_pylist(),
                                     table.column("user").to_pylist(), strict=True)]
    # Warm-up on the full batch: the first pass at a new batch size is slow on the CPU
    # build, and whichever side ran first would pay for it.
    llm.chat(conversations, params, use_tqdm=False)
    bare, worker = [], []
    for round_ in range(args.rounds):
        start = time.perf_counter()
        outputs = llm.chat(conversations, params, use_tqdm=False)
        tokens = sum(len(o.outputs[0].token_ids) for o in outputs)
        bare.append(tokens / (time.perf_counter() - start))

        engine = VllmEngine(str(args.model), {}, sampling, llm=llm)
        run = tmp / f"worker-{round_}"
        storage.write_table(table, f"file://{run}/prompts/shard-00000.parquet")
        start = time.perf_counter()
        result = rephrase_shard(f"file://{run}/prompts/shard-00000.parquet", None,
                                lambda engine=engine: engine,
                                WorkerOptions(model=str(args.model),
                                              checkpoint_rows=args.checkpoint_rows,
                                              sampling=sampling))
        worker.append(result["output_tokens"] / (time.perf_counter() - start))
        print(f"round {round_}: bare {bare[-1]:.1f} tok/s, worker {worker[-1]:.1f} tok/s "
              f"(engine args {engine.engine_args})",
              flush=True)
    return sum(bare) / len(bare), sum(worker) / len(worker)


def _keys(run: Path) -> list[tuple[str, str]]:
    out = []
    for url in storage.list_files(f"file://{run}/generated/shard-00000", suffix=".parquet"):
        t = storage.read_table(url)
        out += list(zip(t.column("id").to_pylist(), t.column("template_id").to_pylist(),
                        strict=True))
    for url in storage.list_files(f"file://{run}/quarantine/rephrase/shard-00000",
                                  suffix=".parquet"):
        t = storage.read_table(url)
        out += list(zip(t.column("id").to_pylist(), t.column("template_id").to_pylist(),
                        strict=True))
    return out


def kill_trial(args, trial: int, tmp: Path, rng: random.Random) -> tuple[int, int, int]:
    run = tmp / f"kill-{trial}"
    shard = build_shard(run, args.prompts, args.max_new_tokens)
    argv = [sys.executable, "-m", "synthfactory.cli", "rephrase", "--shard", shard,
            "--model", str(args.model), "--checkpoint-rows", str(args.checkpoint_rows),
            "--temperature", "0", "--max-in-flight", str(args.trial_max_in_flight)]
    env = {**os.environ, "SYNTHFACTORY_PROGRESS_SECONDS": "0"}
    target = rng.randint(args.checkpoint_rows, args.prompts - args.checkpoint_rows)
    log_path = tmp / f"kill-{trial}.log"
    with open(log_path, "w") as log:
        victim = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT)
        finished = 0
        while victim.poll() is None and finished < target:
            time.sleep(0.05)
            found = PROGRESS.findall(log_path.read_text())
            finished = int(found[-1][0]) if found else 0
        victim.send_signal(signal.SIGKILL)
        victim.wait()
    found = PROGRESS.findall(log_path.read_text())
    finished = int(found[-1][0]) if found else 0
    saved = len(_keys(run))
    subprocess.run(argv, env={**os.environ}, check=True, capture_output=True)
    keys = _keys(run)
    expected = {(f"doc-{i:04d}", "summary") for i in range(args.prompts)}
    lost = len(expected - set(keys))
    duplicated = len(keys) - len(set(keys))
    recomputed = max(0, finished - saved)
    print(f"trial {trial}: killed at {finished} finished rows (target {target}), "
          f"{saved} saved in parts, recomputed {recomputed}, lost {lost}, "
          f"duplicated {duplicated}", flush=True)
    return recomputed, lost, duplicated


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prompts", type=int, default=48)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--checkpoint-rows", type=int, default=8)
    parser.add_argument("--trial-max-in-flight", type=int, default=6,
                        help="kill trials: few requests in flight, so rows finish one by one "
                             "and the kill lands between checkpoints")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--model", type=Path, default=default_model_dir())
    args = parser.parse_args()
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory(prefix="bench-rephrase-") as tmp_name:
        tmp = Path(tmp_name)
        shard = build_shard(tmp / "bare", args.prompts, args.max_new_tokens)
        print_machine()
        bare, worker = throughput(args, shard, tmp)
        trials = [kill_trial(args, t, tmp, rng) for t in range(args.trials)]
        print_machine()
    print(result_line("rephrase", prompts=args.prompts, bare_tokens_per_s=f"{bare:.1f}",
                      worker_tokens_per_s=f"{worker:.1f}", ratio=f"{worker / bare:.3f}",
                      max_recomputed_rows=max(t[0] for t in trials),
                      lost=sum(t[1] for t in trials), duplicated=sum(t[2] for t in trials)))


if __name__ == "__main__":
    main()
