"""``synthfactory estimate``: GPU-hours, wall-clock, dollars, shards, shard groups,
daily runs, crawl list requests and stitch core-hours for a number of output tokens.

Prints a table (``--json``: only the summary, the JSON object every command prints
last). The throughput is given, or taken from a sweep or a run (docs/scale.md).
"""

from __future__ import annotations

import argparse

from synthfactory.cli_alias import deprecated_flag
from synthfactory.contract.flag_types import non_negative_float, positive_float, positive_int, price
from synthfactory.errors import PermanentError
from synthfactory.estimate import arithmetic as a
from synthfactory.estimate.measured import Measured, from_run, from_sweep
from synthfactory.report.price import gpu_hour_price


def add_arguments(parser: argparse.ArgumentParser) -> None:
    size = parser.add_mutually_exclusive_group(required=True)
    size.add_argument("--tokens", type=positive_float, help="output tokens wanted, e.g. 12e12")
    size.add_argument("--docs", type=positive_float,
                      help="seed documents (with --tokens-per-output): tokens = docs x "
                           "styles per doc x tokens per output")
    parser.add_argument("--styles-per-doc", type=positive_int, default=1)
    parser.add_argument("--tokens-per-output", type=positive_float, default=None,
                        help="output tokens of one rephrasing, on average")
    parser.add_argument("--tokens-per-doc", type=positive_float, default=None,
                        help="tokens of one seed document, for stitch (default: as long as "
                             "its rephrasing)")
    rate = parser.add_mutually_exclusive_group(required=True)
    rate.add_argument("--tokens-per-s-per-gpu", type=positive_float,
                      help="output tokens/s of one GPU")
    rate.add_argument("--from-sweep", metavar="URL",
                      help="an engine sweep's folder: its winner's measured tokens/s")
    run_flag = rate.add_argument(
        "--run", metavar="URL",
        help="a run folder with report/report.json: its tokens per device-second and "
             "engine start-up, and its token yield: --tokens then counts usable tokens, "
             "generated at the run's usable share from seed tokens at its yield")
    deprecated_flag(rate, "--from-run", run_flag)
    parser.add_argument("--startup-s", type=non_negative_float, default=None,
                        help="engine start-up per task, s (default: measured, else 0)")
    parser.add_argument("--gpus", type=positive_int, required=True)
    parser.add_argument("--gpu-hour-usd", type=price, default=None,
                        help="USD per GPU-hour (default as `synthfactory report`: "
                             "$SYNTHFACTORY_GPU_HOUR_USD or 2.50)")
    parser.add_argument("--shard-minutes", type=positive_float, default=a.SHARD_MINUTES,
                        help="GPU minutes of one shard: what a lost shard costs")
    parser.add_argument("--max-map-length", type=positive_int, default=a.MAX_MAP_LENGTH,
                        help="Airflow's [core] max_map_length: shard groups a run maps")
    parser.add_argument("--run-hours", type=positive_float, default=a.RUN_HOURS,
                        help="a daily run's longest group must end within this")
    parser.add_argument("--partitions", type=positive_int, default=None,
                        help="partitions crawled (default: one a daily run)")
    parser.add_argument("--files-per-partition", type=positive_int, default=None,
                        help="seed files a partition holds (default: at most 1,000)")
    parser.add_argument("--stitch-tokens-per-core-s", type=positive_float,
                        default=a.STITCH_TOKENS_PER_CORE_S,
                        help="stitch's source tokens per core-second (default: measured, "
                             "docs/stitch.md)")
    parser.add_argument("--json", action="store_true", help="print only the JSON summary")


def _size(args: argparse.Namespace) -> tuple[int, int | None, float]:
    """(output tokens, documents or None, source tokens stitch reads)."""
    per_output, per_doc, styles = args.tokens_per_output, args.tokens_per_doc, args.styles_per_doc
    if args.docs is not None:
        if per_output is None:
            raise PermanentError("--docs: give --tokens-per-output too (output tokens of one "
                                 "rephrasing), or --tokens instead")
        docs = round(args.docs)
        tokens = round(docs * styles * per_output)
    else:
        tokens = round(args.tokens)
        docs = round(tokens / (styles * per_output)) if per_output else None
    if per_doc is not None and docs is None:
        raise PermanentError("--tokens-per-doc: needs the document count (--docs, or "
                             "--tokens-per-output beside --tokens)")
    # without a document length, a source as long as its rephrasing
    source = docs * per_doc if per_doc is not None else tokens / styles
    return tokens, docs, source


def _measured(args: argparse.Namespace) -> Measured | None:
    if args.run:
        return from_run(args.run)
    if args.from_sweep:
        return from_sweep(args.from_sweep)
    return None


def _with_yield(tokens: int, source: float, args: argparse.Namespace,
                measured: Measured | None) -> tuple[int, float, dict]:
    """A run's measured yield turns usable tokens wanted into the output tokens to
    generate (rejected rows cost GPU time too) and the seed tokens stitch must read."""
    if not (measured and measured.token_yield and measured.usable_share):
        return tokens, source, {"usable_tokens": None, "measured_token_yield": None,
                                "measured_usable_share": None, "seed_tokens_needed": None}
    seed = tokens / measured.token_yield
    generated = round(tokens / measured.usable_share)
    return generated, (source if args.tokens_per_doc is not None else seed), {
        "usable_tokens": tokens, "measured_token_yield": measured.token_yield,
        "measured_usable_share": measured.usable_share, "seed_tokens_needed": round(seed)}


def run(args: argparse.Namespace) -> dict:
    tokens, docs, source = _size(args)
    measured = _measured(args)
    tokens, source, produced = _with_yield(tokens, source, args, measured)
    warnings = []
    if args.startup_s is not None:
        startup, startup_source = args.startup_s, "--startup-s"
    elif measured and measured.startup_s is not None:
        startup, startup_source = measured.startup_s, measured.source
    else:
        startup, startup_source = 0.0, "not measured: 0 (give --startup-s)"
        if measured:
            warnings.append(f"{measured.source} recorded no engine start-up: counted as 0")
    price = gpu_hour_price(args.gpu_hour_usd)
    figures = a.estimate(a.Inputs(
        tokens=tokens,
        tokens_per_s_per_gpu=(measured.tokens_per_s_per_gpu if measured
                              else args.tokens_per_s_per_gpu),
        gpus=args.gpus, gpu_hour_usd=price, source_tokens=source, startup_s=startup,
        shard_minutes=args.shard_minutes, max_map_length=args.max_map_length,
        run_hours=args.run_hours, partitions=args.partitions,
        files_per_partition=args.files_per_partition,
        stitch_tokens_per_core_s=args.stitch_tokens_per_core_s))
    summary = {
        **figures,
        "docs": docs, "styles_per_doc": args.styles_per_doc,
        "tokens_per_output": args.tokens_per_output, "tokens_per_doc": args.tokens_per_doc,
        "rate_source": measured.source if measured else "--tokens-per-s-per-gpu",
        "startup_source": startup_source,
        "measured_generating_fraction": measured.generating_fraction if measured else None,
        **produced,
        "warnings": figures["warnings"] + warnings,
    }
    if not args.json:
        try:
            print(table(summary), flush=True)
        except BrokenPipeError:  # `| head` had enough; the CLI ends quietly at the summary
            pass
    return summary


def _n(value: float, digits: int = 1) -> str:
    """12,000,000 / 9,200 / 1,234.5: whole numbers without decimals."""
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.{digits}f}"


def table(s: dict) -> str:
    gpus = f"{s['gpus_busy']:,} GPUs busy" + (
        f" of {s['gpus']:,}" if s["gpus_busy"] < s["gpus"] else "")
    files = s["files_per_partition"]
    per_partition = s["crawl_list_requests"] // s["partitions"]
    size = f"{s['docs']:,} documents x {s['styles_per_doc']} styles" if s["docs"] else "--tokens"
    rows = [
        ("output tokens", _n(s["tokens"]), size),
        ("output tokens/s per GPU", _n(s["tokens_per_s_per_gpu"], 2), s["rate_source"]),
        ("engine start-up per task", f"{_n(s['startup_s_per_task'])} s", s["startup_source"]),
        ("GPU-hours", _n(s["gpu_hours"]),
         f"generating {_n(s['generating_gpu_hours'])} + start-up {_n(s['startup_gpu_hours'])}"),
        ("wall-clock", f"{_n(s['wall_clock_hours'])} h",
         f"{s['wall_clock_hours'] / 24:,.1f} days: {s['runs']:,} runs back to back, {gpus}"),
        ("cost", f"${s['usd']:,.2f}", f"at ${s['gpu_hour_usd']:,.2f} per GPU-hour"),
        ("shards", f"{s['shards']:,}",
         f"{_n(s['shard_minutes'])} min of one GPU each "
         f"({s['shard_output_tokens']:,} output tokens)"),
        ("shard groups", f"{s['shard_groups']:,}",
         f"<= {s['max_shard_groups']:,} a run (max_map_length {s['max_map_length']:,}): "
         f"Param max_shard_groups {s['max_shard_groups']:,}"),
        ("daily runs", f"{s['runs']:,}",
         f"one partition each, <= {_n(s['run_hours'])} h: a group holds "
         f"<= {s['shards_per_group_max']:,} shards"),
        ("crawl list requests", f"{s['crawl_list_requests']:,}",
         f"{s['partitions']:,} partitions x {per_partition:,} "
         f"({'<= 1,000' if files is None else f'{files:,}'} files each; 1,000 keys a "
         f"request), ${s['crawl_list_usd']:,.4f}"),
        ("stitch core-hours", _n(s["stitch_core_hours"]),
         f"{s['stitch_source_tokens']:.3g} source tokens at "
         f"{_n(s['stitch_tokens_per_core_s'])} a core-second"
         + (" (measured, docs/stitch.md)"
            if s["stitch_tokens_per_core_s"] == a.STITCH_TOKENS_PER_CORE_S else "")),
    ]
    if s.get("usable_tokens") is not None:
        rows[1:1] = [
            ("usable tokens", _n(s["usable_tokens"]),
             f"--tokens; generated at the run's usable share {s['measured_usable_share']:.1%} "
             f"({1 / s['measured_usable_share']:.2f} generated tokens per usable token, "
             "every attempt counted)"),
            ("seed tokens needed", _n(s["seed_tokens_needed"]),
             f"at the run's token yield {s['measured_token_yield']:.4f} usable per seed "
             "token"),
        ]
    if s["measured_generating_fraction"] is not None:
        rows.append(("generating fraction", f"{s['measured_generating_fraction']:.1%}",
                     "of the measured run's shard wall time"))
    width = max(len(r[0]) for r in rows)
    value_width = max(len(r[1]) for r in rows)
    lines = [f"synthfactory estimate: {_n(s['tokens'])} output tokens on {s['gpus']:,} GPUs"]
    lines += [f"  {name:<{width}}  {value:>{value_width}}  {how}" for name, value, how in rows]
    lines += [f"warning: {w}" for w in s["warnings"]]
    return "\n".join(lines)
