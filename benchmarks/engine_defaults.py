"""The worker's own engine defaults against every entry of the CPU grid, on this machine.

Does the worker choose well where it runs? Each configuration is measured the way the
sweep measures one (``synthfactory.sweep.trial``: a fresh process with the worker's own
``VllmEngine``, warm-up, then a timed sample of real rephrase prompts), with no back-off
and no halving: after one uncounted warm-up trial, in every round the defaults, then
each entry of ``examples/sweep/cpu-benchmark.json``, one after the other, so every round
measures the defaults again beside the entries. Figures are the medians over the rounds;
GPU-only entries are skipped. An entry equal to the defaults on this machine (``dtype``
bfloat16 where it is native) is the run's own measure of its noise.

    .venv-worker/bin/python benchmarks/engine_defaults.py [--rounds 3] [--sample-rows 16] \
        [--max-new-tokens 64]

Last line: ``RESULT engine_defaults isa=I default_tokens_per_s=X best_tokens_per_s=Y
best=NAME ratio=X/Y`` where ``best`` is the fastest entry (the defaults' own label when
none beats them) and ``ratio`` < 1 means some entry beat the defaults.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from machine import print_machine, result_line  # noqa: E402  (this folder is on sys.path)
from sweep import write_shard  # noqa: E402

from synthfactory.model import default_model_dir  # noqa: E402
from synthfactory.sweep.grid import config_label, expand_grid, gpu_only, load_grid  # noqa: E402
from synthfactory.sweep.runner import run_trial  # noqa: E402

GRID = ROOT / "examples/sweep/cpu-benchmark.json"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sample-rows", type=int, default=16)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--grid", default=str(GRID))
    parser.add_argument("--timeout-s", type=float, default=600)
    args = parser.parse_args()
    entries = [e for e in expand_grid(load_grid(args.grid)) if not gpu_only(e)]
    figures: dict[str, list[float]] = {config_label(e): [] for e in entries}
    with tempfile.TemporaryDirectory(prefix="engine-defaults-") as tmp:
        shard = write_shard(Path(tmp), rows=args.sample_rows)
        spec = {"model": str(default_model_dir()), "shard": shard,
                "rows": list(range(args.sample_rows)),
                "sampling": {"temperature": 0.0, "top_p": 1.0,
                             "max_tokens": args.max_new_tokens, "ignore_eos": True},
                "warmup_rows": 2, "warmup_tokens": 8}
        print_machine()
        # One trial first, not counted: the first process on a machine reads the weights
        # and vLLM's libraries from disk and the defaults, measured first in every round,
        # paid for it alone (119 tokens/s against 161 in the next round, here).
        warm = run_trial({**spec, "config": entries[0]}, Path(tmp) / "warm-up",
                         args.timeout_s)
        print(f"warm-up trial (not counted): {warm['status']}", flush=True)
        for round_ in range(1, args.rounds + 1):
            for i, entry in enumerate(entries):
                label = config_label(entry)
                result = run_trial({**spec, "config": entry}, Path(tmp) / f"{round_}-{i}",
                                   args.timeout_s)
                if result["status"] != "ok":
                    print(f"round {round_} {label}: failed ({result.get('error')})", flush=True)
                    continue
                figures[label].append(result["output_tokens_per_s"])
                chosen = result.get("engine_choice") or {}
                print(f"round {round_} {label}: {result['output_tokens_per_s']:.1f} tokens/s "
                      f"(dtype {chosen.get('dtype')}, engine core "
                      f"{chosen.get('engine_core')}, start-up {result['startup_s']:.1f} s)",
                      flush=True)
        print_machine()
    medians = {label: statistics.median(v) for label, v in figures.items() if v}
    for label, median in sorted(medians.items(), key=lambda kv: -kv[1]):
        print(f"{median:8.1f} tokens/s  {label}  ({json.dumps(figures[label])})")
    if "defaults" not in medians:
        sys.exit("the defaults failed in every round")
    best = max((m, label) for label, m in medians.items() if label != "defaults") \
        if len(medians) > 1 else (medians["defaults"], "defaults")
    best_tps, best_label = best if best[0] > medians["defaults"] else (
        medians["defaults"], "defaults")
    default_tps = medians["defaults"]
    print(result_line("engine_defaults", isa_first=True,
                      default_tokens_per_s=f"{default_tps:.1f}",
                      best_tokens_per_s=f"{best_tps:.1f}", best=best_label.replace(" ", ""),
                      ratio=f"{default_tps / best_tps:.2f}"))


if __name__ == "__main__":
    main()
