"""The engine sweep's own output on this machine: the built-in CPU defaults against a
few variants, measured by ``synthfactory sweep`` on real rephrase prompts.

Prompts: the Python standard library's docstrings (400-1200 characters) under the
shipped ``encyclopedic`` template, i.e. what ``make demo`` rephrases. The grid is
``examples/sweep/cpu-benchmark.json``; the sweep adds the defaults (``{}``) itself, so
the baseline is measured in the same run, on the same rows, after the same warm-up.
After the search the sweep measures the defaults and its (backed-off) winner again in
alternating rounds; the RESULT line's figures are those rounds' medians and ``gain``
their ratio, which falls below 1 when the winner is not really faster (ADR 0066).

    .venv-worker/bin/python benchmarks/sweep.py [--sample-rows 16] [--max-new-tokens 64]
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


from synthfactory import storage  # noqa: E402
from synthfactory.corpus import iter_docstrings  # noqa: E402
from synthfactory.model import default_model_dir  # noqa: E402
from synthfactory.stitch.prompt_table import prompt_table  # noqa: E402
from synthfactory.stitch.templates import load_template  # noqa: E402
from synthfactory.sweep.grid import config_label  # noqa: E402
from synthfactory.sweep.rematch import spread  # noqa: E402

GRID = ROOT / "examples/sweep/cpu-benchmark.json"


def write_shard(run: Path, rows: int) -> str:
    template = load_template("encyclopedic")
    docs = iter_docstrings(Path(sysconfig.get_paths()["stdlib"]), 400, 1200, per_module=1)
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
                "--max-new-tokens", str(args.max_new_tokens),
                "--no-apply", "--no-measure-backoff"]  # never touch var/models from here
        env = {**os.environ, "SYNTHFACTORY_RESULT_FILE": str(result)}
        proc = subprocess.run(argv, env=env, cwd=ROOT, stdout=subprocess.PIPE, text=True)
        print("\n".join(proc.stdout.splitlines()[:-1]))  # the sweep's table
        if proc.returncode != 0:
            sys.exit(f"sweep failed with code {proc.returncode}")
        summary = json.loads(result.read_text())
    for label, kind in summary["failures"].items():
        print(f"failed: {label} ({kind})")
    rematch = summary["rematch"]
    if not rematch or rematch.get("gain") is None:
        sys.exit(f"no rematch against the defaults: {rematch and rematch.get('error')}")
    print(f"fastest in the search: {summary['best']['label']} "
          f"({summary['best']['output_tokens_per_s']:.1f} tokens/s, defaults "
          f"{summary['baseline_tokens_per_s']:.1f}); winner re-measured: "
          f"{config_label(rematch['winner_config'])}")
    # default/best: medians of the alternating rematch rounds, gain = their ratio
    print(f"RESULT sweep configs={summary['configs']} failed={summary['failed']} "
          f"default_tokens_per_s={rematch['default_median']:.1f} "
          f"best_tokens_per_s={rematch['winner_median']:.1f} gain={rematch['gain']:.2f} "
          f"rounds={rematch['rounds']} "
          f"default_spread={spread(rematch['default_tokens_per_s'])} "
          f"best_spread={spread(rematch['winner_tokens_per_s'])}")


if __name__ == "__main__":
    main()
