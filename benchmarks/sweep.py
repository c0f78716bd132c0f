"""The engine sweep's own output on this machine: the built-in CPU defaults against a
few variants, measured by ``synthfactory sweep`` on real rephrase prompts.

Prompts: the Python standard library's docstrings (400-1200 characters) under the
shipped ``encyclopedic`` template, i.e. what ``make demo`` rephrases. The grid is
``examples/sweep/cpu-benchmark.json``; each entry is backed off by the safety margin and
measured by successive halving in rounds that alternate with the defaults (ADR 0115).
The RESULT line's figures are medians over those rounds: ``best_*`` is the configuration
the sweep applies (the defaults' own figures when the defaults stay) and ``gain`` its
median over the defaults'.

With the defaults (16 rows x 64 tokens, 3 rounds, 3 grid entries) the sweep runs 11
trials, each a fresh process that loads vLLM: about 25 s each on the 2 free cores here,
so about 5 minutes, and about twice that while another job holds a core.

    .venv-worker/bin/python benchmarks/sweep.py [--sample-rows 16] [--max-new-tokens 64] \
        [--rounds 3]

Last line: ``RESULT sweep configs=C failed=F default_tokens_per_s=X best_tokens_per_s=Y
gain=G rounds=R default_spread=a..b best_spread=c..d isa=I`` (I: the CPU's vector
extensions, benchmarks/machine.py).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from machine import print_machine, result_line  # noqa: E402  (this folder is on sys.path)

from synthfactory import storage  # noqa: E402
from synthfactory.corpus import iter_docstrings  # noqa: E402
from synthfactory.model import default_model_dir  # noqa: E402
from synthfactory.stitch.prompt_table import prompt_table  # noqa: E402
from synthfactory.stitch.templates import load_template  # noqa: E402
from synthfactory.sweep.decision import spread  # noqa: E402

GRID = ROOT / "examples/sweep/cpu-benchmark.json"


def write_shard(run: Path, rows: int, per_module: int = 1) -> str:
    """At most ``rows`` docstrings, ``per_module`` from each stdlib file (1: about 320)."""
    template = load_template("encyclopedic")
    docs = iter_docstrings(Path(sysconfig.get_paths()["stdlib"]), 400, 1200,
                           per_module=per_module)
    texts = [doc for _, (_, doc) in zip(range(rows), docs, strict=False)]
    table = prompt_table(template, [f"doc-{i:04d}" for i in range(len(texts))], texts, 128,
                         prompt_tokens=[len(t) // 4 for t in texts])
    url = f"file://{run}/prompts/shard-00000.parquet"
    storage.write_table(table, url)
    return url


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sample-rows", type=int, default=16)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--grid", default=str(GRID))
    parser.add_argument("--out", default=None, help="sweep folder (default: a temp folder)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="sweep-bench-") as tmp:
        shard = write_shard(Path(tmp), rows=args.sample_rows * 4)
        out = args.out or f"file://{tmp}/sweep"
        result = Path(tmp) / "result.json"
        argv = [sys.executable, "-m", "synthfactory.cli", "sweep", "--shard", shard,
                "--model", str(default_model_dir()), "--grid", args.grid, "--out", out,
                "--sample-rows", str(args.sample_rows),
                "--max-new-tokens", str(args.max_new_tokens), "--rounds", str(args.rounds),
                "--no-apply"]  # never touch var/models from here
        env = {**os.environ, "SYNTHFACTORY_RESULT_FILE": str(result)}
        print_machine()
        proc = subprocess.run(argv, env=env, cwd=ROOT, stdout=subprocess.PIPE, text=True)
        print_machine()
        print("\n".join(proc.stdout.splitlines()[:-1]))  # the sweep's table
        if proc.returncode != 0:
            sys.exit(f"sweep failed with code {proc.returncode}")
        summary = json.loads(result.read_text())
    for label, kind in summary["failures"].items():
        print(f"failed: {label} ({kind})")
    decision = summary["decision"]
    defaults, applied = decision["defaults"], decision["applied"]
    # best_*: the applied configuration (the defaults' own when they stay); gain: its
    # median over the defaults' in the same alternating rounds
    print(result_line("sweep", configs=summary["configs"], failed=summary["failed"],
                      default_tokens_per_s=f"{defaults['median']:.1f}",
                      best_tokens_per_s=f"{applied['median']:.1f}",
                      gain=f"{decision['gain']:.2f}", rounds=decision["rounds"],
                      default_spread=spread(defaults), best_spread=spread(applied)))


if __name__ == "__main__":
    main()
