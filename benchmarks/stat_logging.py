"""What vLLM's stat logging costs the offline engine: the rephrase step with it off (LLM's
default, and ours where no metrics are exported) against on (ours where a Pushgateway or
a metrics port is set, for engine_stats(): docs/metrics.md).

The real ``synthfactory rephrase`` on the same shard with ``--engine-args
'{"disable_log_stats": true|false}'`` in alternating sittings (off, on, off, on, ...),
each into a fresh run folder; each sitting's summary gives its tokens/s while generating
(start-up excluded: stat logging costs per engine step, not at start). No Pushgateway is
set, so only the engine's logging differs, not our pushes (benchmarks/metrics_overhead.py
measures those). The prompts are distinct stdlib docstrings: no prefix-cache hit.

    .venv-worker/bin/python benchmarks/stat_logging.py [--rows 160] [--max-new-tokens 128] \
        [--sittings 2]

Last line: ``RESULT stat_logging rows=N off_tokens_per_s=X on_tokens_per_s=Y ratio=Y/X
isa=I`` (medians over the sittings; a ratio under 1 is what logging costs; it can come
out above 1 by noise).
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

MODES = {"off": True, "on": False}  # mode -> disable_log_stats


def sitting(mode: str, rows: int, max_new_tokens: int, tmp: Path, index: int) -> float:
    run = tmp / f"{mode}-{index}"
    shard = write_shard(run, rows, per_module=100)
    written = storage.read_table(shard).num_rows
    if written < rows:
        sys.exit(f"--rows {rows}: the stdlib's docstrings gave only {written} prompts")
    result = run / "summary.json"
    argv = [sys.executable, "-m", "synthfactory.cli", "rephrase", "--shard", shard,
            "--model", str(default_model_dir()), "--temperature", "0",
            "--max-new-tokens", str(max_new_tokens), "--checkpoint-rows", "16",
            "--engine-args", json.dumps({"disable_log_stats": MODES[mode]})]
    env = {k: v for k, v in os.environ.items()
           if k not in ("SYNTHFACTORY_PUSHGATEWAY", "SYNTHFACTORY_METRICS_PORT")}
    env["SYNTHFACTORY_RESULT_FILE"] = str(result)
    proc = subprocess.run(argv, env=env, cwd=ROOT, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"{mode} sitting {index} failed ({proc.returncode}): {proc.stderr[-2000:]}")
    summary = json.loads(result.read_text())
    print(f"sitting {index} stat logging {mode:3s} {summary['tokens_per_s']:7.1f} tokens/s "
          f"generating ({summary['output_tokens']} tokens in {summary['generation_s']:.1f} s; "
          f"start-up {summary['startup_s']:.1f} s)", flush=True)
    return float(summary["tokens_per_s"])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=160)
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--sittings", type=int, default=2)
    args = parser.parse_args()
    rates: dict[str, list[float]] = {mode: [] for mode in MODES}
    with tempfile.TemporaryDirectory(prefix="stat-logging-bench-") as name:
        print_machine()
        for index in range(args.sittings):
            for mode in MODES:
                rates[mode].append(sitting(mode, args.rows, args.max_new_tokens, Path(name),
                                           index))
        print_machine()
    off, on = (statistics.median(rates[mode]) for mode in MODES)
    print(result_line("stat_logging", rows=args.rows, off_tokens_per_s=f"{off:.1f}",
                      on_tokens_per_s=f"{on:.1f}", ratio=f"{on / off:.3f}"))


if __name__ == "__main__":
    main()
