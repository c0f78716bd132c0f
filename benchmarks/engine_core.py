"""vLLM's engine core in the worker's process against in a process of its own, on a
shard long enough that the engine's start-up is a small share of the task (ADR 0130).

The offline worker runs the engine core in-process (``engine_core`` ``inprocess``: a
lost Ray replica takes its engine with it, a 14 s start instead of 30 s); vLLM's own
server runs it in a process of its own and overlaps detokenisation and scheduling with
the model's steps. This runs the real ``synthfactory rephrase`` on the same shard with
``--engine-args '{"engine_core": MODE}'`` in alternating sittings (inprocess,
multiprocess, ...), each into a fresh run folder, and reads each sitting's summary:
tokens/s over the task's wall time (start-up included: what the mode costs a task) and
over generation alone, and the start-up's share of the wall time. The prompts are the
stdlib's docstrings of 400-1200 characters, all of a file's (826 on Python 3.11), so
each row is a distinct prompt: no prefix-cache hit flatters either mode.

    .venv-worker/bin/python benchmarks/engine_core.py [--rows 800] [--max-new-tokens 256] \
        [--sittings 1]

Last line: ``RESULT engine_core rows=N inprocess_tokens_per_s=X
multiprocess_tokens_per_s=Y ratio=Y/X startup_share=S isa=I`` (medians of wall-time
tokens/s; ``startup_share``: the largest start-up / wall of any sitting, to be under
0.1 for the comparison to be about a long shard).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from machine import print_machine, result_line  # noqa: E402  (this folder is on sys.path)
from sweep import write_shard  # noqa: E402

from synthfactory import storage  # noqa: E402
from synthfactory.model import default_model_dir  # noqa: E402

MODES = ("inprocess", "multiprocess")


def sitting(mode: str, rows: int, max_new_tokens: int, tmp: Path, index: int) -> dict:
    run = tmp / f"{mode}-{index}"
    shard = write_shard(run, rows, per_module=100)  # one per stdlib file gives ~320
    written = storage.read_table(shard).num_rows
    if written < rows:
        sys.exit(f"--rows {rows}: the stdlib's docstrings gave only {written} prompts")
    result = run / "summary.json"
    argv = [sys.executable, "-m", "synthfactory.cli", "rephrase", "--shard", shard,
            "--model", str(default_model_dir()), "--temperature", "0",
            "--max-new-tokens", str(max_new_tokens), "--checkpoint-rows", "16",
            "--engine-args", json.dumps({"engine_core": mode})]
    env = {**os.environ, "SYNTHFACTORY_RESULT_FILE": str(result)}
    env.pop("VLLM_ENABLE_V1_MULTIPROCESSING", None)  # the mode under test decides
    proc = subprocess.run(argv, env=env, cwd=ROOT, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"{mode} sitting {index} failed ({proc.returncode}): {proc.stderr[-2000:]}")
    summary = json.loads(result.read_text())
    figures = {"tokens_per_s": summary["output_tokens"] / summary["wall_s"],
               "generation_tokens_per_s": summary["tokens_per_s"],
               "startup_share": summary["startup_s"] / summary["wall_s"]}
    print(f"sitting {index} {mode:12s} {figures['tokens_per_s']:7.1f} tokens/s over the "
          f"task ({summary['output_tokens']} tokens in {summary['wall_s']:.1f} s, start-up "
          f"{summary['startup_s']:.1f} s = {figures['startup_share']:.1%}); "
          f"{figures['generation_tokens_per_s']:.1f} tokens/s generating", flush=True)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=800)
    parser.add_argument("--max-new-tokens", type=int, default=256)
    parser.add_argument("--sittings", type=int, default=1)
    args = parser.parse_args()
    runs: dict[str, list[dict]] = {mode: [] for mode in MODES}
    with tempfile.TemporaryDirectory(prefix="engine-core-bench-") as name:
        print_machine()
        for index in range(args.sittings):
            for mode in MODES:
                runs[mode].append(sitting(mode, args.rows, args.max_new_tokens, Path(name),
                                          index))
        print_machine()
    inprocess, multiprocess = (statistics.median(r["tokens_per_s"] for r in runs[m])
                               for m in MODES)
    share = max(r["startup_share"] for rs in runs.values() for r in rs)
    print(result_line("engine_core", rows=args.rows,
                      inprocess_tokens_per_s=f"{inprocess:.1f}",
                      multiprocess_tokens_per_s=f"{multiprocess:.1f}",
                      ratio=f"{multiprocess / inprocess:.2f}", startup_share=f"{share:.3f}"))


if __name__ == "__main__":
    main()
