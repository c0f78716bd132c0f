"""``synthfactory preview-lengths``: what a length spec will feed the training job.

Prints percentiles, a 20-bin text histogram and a data-parallel balance simulation;
``--png`` draws the histogram; ``--json`` prints only the summary JSON (for scripts).
"""

from __future__ import annotations

import argparse

from synthfactory.contract.flag_types import positive_int, seed


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--spec", required=True, help="length spec JSON file (URL or path)")
    parser.add_argument("--seq-len", type=positive_int, default=2048)
    parser.add_argument("--dp", type=positive_int, default=8,
                        help="data-parallel ranks to simulate")
    parser.add_argument("--per-rank-batch", type=positive_int, default=4)
    parser.add_argument("--steps", type=positive_int, default=50)
    parser.add_argument("--samples", type=positive_int, default=10000,
                        help="draws for the percentiles")
    parser.add_argument("--seed", type=seed, default=0)
    parser.add_argument("--overlong", choices=("drop", "truncate"), default="drop")
    parser.add_argument("--packing", choices=("first_fit", "best_fit", "concat_then_split"),
                        default="first_fit")
    parser.add_argument("--png", help="write a histogram PNG here (URL or path)")
    parser.add_argument("--json", action="store_true", help="print only the JSON summary")


def run(args) -> dict:
    from synthfactory.training.lengths import load_spec
    from synthfactory.training.preview import (
        BalanceConfig,
        dp_balance,
        draw_lengths,
        histogram,
        length_stats,
        write_png,
    )

    spec = load_spec(args.spec)
    lengths = draw_lengths(spec, args.samples, seed=args.seed)
    stats = length_stats(lengths)
    hist = histogram(lengths)
    balance = dp_balance(spec, BalanceConfig(
        seq_len=args.seq_len, dp=args.dp, per_rank_batch=args.per_rank_batch,
        steps=args.steps, seed=args.seed, overlong=args.overlong, packing=args.packing,
    ))
    summary = {
        "spec": args.spec,
        **stats,
        "over_seq_len_fraction": round(float((lengths > args.seq_len).mean()), 4),
        "overlong": args.overlong,
        **balance,
        "histogram": hist,
    }
    if args.png:
        write_png(lengths, args.seq_len, f"{args.spec} ({stats['count']} draws)", args.png)
        summary["png"] = args.png
    if not args.json:
        print(_report(summary))
    return summary


def _report(s: dict) -> str:
    from synthfactory.training.preview import text_histogram

    return "\n".join([
        f"length spec {s['spec']}: {s['count']} draws, {s['total_tokens']} tokens",
        f"  min {s['min']}  p50 {s['p50']:.0f}  p90 {s['p90']:.0f}  p99 {s['p99']:.0f}  "
        f"max {s['max']}  mean {s['mean']:.1f}",
        f"  over seq_len {s['seq_len']}: {s['over_seq_len_fraction']:.2%} "
        f"(policy {s['overlong']}: dropped {s['dropped']}, truncated {s['truncated']})",
        "histogram:",
        text_histogram(s["histogram"]),
        f"DP balance: dp={s['dp']} per_rank_batch={s['per_rank_batch']} steps={s['steps']}",
        f"  max_over_mean {s['max_over_mean']}  worst_step_max_over_mean "
        f"{s['worst_step_max_over_mean']}  attention_worst_step_max_over_mean "
        f"{s['attention_worst_step_max_over_mean']}",
        f"  padding_waste_fraction {s['padding_waste_fraction']}",
    ])
