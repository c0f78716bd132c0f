"""``synthfactory sweep``: measure engine configurations on a sample of a prompt shard,
write the results to ``--out`` and the backed-off winner next to the model.

    synthfactory sweep --shard URL --model DIR --grid FILE|JSON --out URL \\
        [--gpu-hour-cost C] [--sample-rows N] [--max-new-tokens T] [--safety-margin F]

Every configuration runs in its own process, one after another (each needs the whole
device); a rerun with the same ``--out`` skips configurations already measured there.
"""

from __future__ import annotations

import argparse
import logging
import tempfile
from pathlib import Path

from synthfactory import storage
from synthfactory.cli_types import positive_float
from synthfactory.errors import SynthfactoryError
from synthfactory.model import default_model_dir
from synthfactory.rephrase.vllm_checks import check_engine_args
from synthfactory.sweep import report
from synthfactory.sweep.grid import config_key, config_label, expand_grid, load_grid
from synthfactory.sweep.rematch import check_rounds, describe, rematch
from synthfactory.sweep.results import SweepFolder
from synthfactory.sweep.runner import run_trial
from synthfactory.sweep.winner import (
    back_off,
    check_margin,
    cost_per_billion,
    devices,
    pick_best,
    write_tuned,
)

log = logging.getLogger(__name__)
BASELINE_KEY = config_key({})


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--shard", required=True, help="prompt shard URL (stitch output)")
    parser.add_argument("--model", default=None, help="model folder (default: the embedded one)")
    parser.add_argument("--grid", required=True,
                        help="JSON/YAML file or URL, or inline JSON: a list of engine-argument "
                             "objects or a {param: [values]} product")
    parser.add_argument("--out", required=True, help="sweep folder URL (results, PNG, winner)")
    parser.add_argument("--gpu-hour-cost", type=float, default=None,
                        help="price of one device-hour, for cost per billion output tokens")
    parser.add_argument("--sample-rows", type=int, default=32,
                        help="prompt rows measured per configuration (spread over the shard)")
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--warmup-rows", type=int, default=4,
                        help="short requests run before the timed sample")
    parser.add_argument("--safety-margin", type=float, default=0.1,
                        help="fraction the winner's batch and memory knobs are scaled down by")
    parser.add_argument("--temperature", type=float, default=0.7)
    parser.add_argument("--top-p", type=float, default=0.95)
    parser.add_argument("--ignore-eos", action=argparse.BooleanOptionalAction, default=True,
                        help="generate exactly --max-new-tokens per row, so every "
                             "configuration does the same work (default: on)")
    parser.add_argument("--baseline", action=argparse.BooleanOptionalAction, default=True,
                        help="also measure the built-in defaults ({}) as the baseline")
    parser.add_argument("--measure-backoff", action=argparse.BooleanOptionalAction,
                        default=True, help="measure the backed-off winner before writing it")
    parser.add_argument("--apply", action=argparse.BooleanOptionalAction, default=True,
                        help="write the winner to {model}/synthfactory-engine.json")
    parser.add_argument("--retry-failed", action="store_true",
                        help="rerun configurations that failed in an earlier run")
    parser.add_argument("--trial-timeout", type=positive_float, default=1800,
                        help="seconds one configuration may take")
    parser.add_argument("--rematch-rounds", type=int, default=3,
                        help="after the search, measure the defaults and the winner again "
                             "in this many alternating rounds each; gain = ratio of the "
                             "medians (0: off, gain not reported; needs the baseline)")


def sample_rows(total: int, wanted: int) -> list[int]:
    """``wanted`` row indices spread evenly over the shard (not just its head)."""
    if wanted >= total:
        return list(range(total))
    return [i * total // wanted for i in range(wanted)]


def _check(args: argparse.Namespace) -> None:
    for name in ("sample_rows", "max_new_tokens"):
        if getattr(args, name) < 1:
            raise SynthfactoryError(f"--{name.replace('_', '-')} must be at least 1")
    if args.warmup_rows < 0:
        raise SynthfactoryError("--warmup-rows must not be negative")
    if args.gpu_hour_cost is not None and args.gpu_hour_cost < 0:
        raise SynthfactoryError("--gpu-hour-cost must not be negative")
    check_margin(args.safety_margin)
    check_rounds(args.rematch_rounds)


def _shard_rows(shard: str) -> int:
    table = storage.read_table(shard)
    missing = [c for c in ("system", "user") if c not in table.column_names]
    if missing:
        raise SynthfactoryError(f"--shard {shard}: missing column(s) {missing} "
                                "(expected a prompt shard, docs/contracts.md)")
    if table.num_rows == 0:
        raise SynthfactoryError(f"--shard {shard}: no rows to measure")
    return table.num_rows


def run(args: argparse.Namespace) -> dict:
    _check(args)
    model = args.model or str(default_model_dir())
    if args.apply and not Path(model).is_dir():  # say so before hours of measuring
        raise SynthfactoryError(f"--model {model}: not a local folder, so the winner cannot "
                                "be written next to it (use --no-apply)")
    configs = expand_grid(load_grid(args.grid), baseline=args.baseline)
    for config in configs:  # a misspelt key fails now, not as a failed trial an hour later
        check_engine_args(config, f"--grid configuration {config_label(config)}")
    shard = storage.normalize(args.shard)
    rows = sample_rows(_shard_rows(shard), args.sample_rows)
    sampling = {"temperature": args.temperature, "top_p": args.top_p,
                "max_tokens": args.max_new_tokens, "ignore_eos": args.ignore_eos}
    folder = SweepFolder(args.out)
    folder.claim({"shard": shard, "model": model, "rows": rows, "sampling": sampling,
                  "warmup_rows": args.warmup_rows})
    spec = {"model": model, "shard": shard, "rows": rows, "sampling": sampling,
            "warmup_rows": min(args.warmup_rows, len(rows)),
            "warmup_tokens": min(16, args.max_new_tokens)}
    measure = _Measure(folder, spec, args)
    records = [measure(c, "baseline" if not c else "grid") for c in configs]
    best = pick_best(records)
    backed = back_off(best["config"], args.safety_margin) if best else None
    if best and args.measure_backoff and config_key(backed) != best["key"]:
        records.append(measure(backed, "backoff"))
    for r in records:
        r["cost_per_billion_output_tokens"] = cost_per_billion(
            r.get("output_tokens_per_s"), args.gpu_hour_cost,
            devices(r["config"], r.get("device", "cpu")))
    _report(records, folder, best["key"] if best else None, model)
    baseline = next((r for r in records if r["key"] == BASELINE_KEY and r["status"] == "ok"),
                    None)
    matched = _rematch(measure, folder, records, backed) if best and baseline else None
    winner = _winner(records, best, backed, args, model, folder, matched)
    _print_winner(winner)
    failed = [r for r in records if r["status"] != "ok"]
    if best is None:
        raise SynthfactoryError(f"all {len(records)} configurations failed; see the table "
                                f"above and {folder.table_url}")
    base_tps = baseline["output_tokens_per_s"] if baseline else None
    return {
        "out": folder.url, "results": folder.table_url, "png": folder.png_url,
        "configs": len(records), "measured": measure.ran, "skipped": measure.skipped,
        "failed": len(failed), "failures": {r["label"]: r.get("error_kind") for r in failed},
        "baseline_tokens_per_s": base_tps,
        "best": {"key": best["key"], "label": best["label"], "config": best["config"],
                 "output_tokens_per_s": best["output_tokens_per_s"]},
        # the rematch's ratio of medians, not best / baseline of the search (which can
        # never fall below 1 when the defaults are among the candidates)
        "gain": matched.get("gain") if matched else None,
        "rematch": matched,
        "winner": winner,
    }


class _Measure:
    """Run (or find in ``--out``) the record of one configuration."""

    def __init__(self, folder: SweepFolder, spec: dict, args: argparse.Namespace):
        self.folder, self.spec, self.args = folder, spec, args
        self.ran = self.skipped = 0

    def __call__(self, config: dict, role: str) -> dict:
        key, label = config_key(config), config_label(config)
        earlier = self.folder.load(key)
        if earlier is not None and (earlier["status"] == "ok" or not self.args.retry_failed):
            log.info("%s (%s): already measured in %s, skipped", label, key, self.folder.url)
            self.skipped += 1
            return {**earlier, "role": role, "resumed": True}
        log.info("%s (%s): measuring", label, key)
        with tempfile.TemporaryDirectory(prefix=f"sweep-{key}-") as tmp:
            result = run_trial({**self.spec, "config": config}, Path(tmp),
                               self.args.trial_timeout)
            trial_log = (Path(tmp) / "trial.log").read_bytes()
        record = {"key": key, "label": label, "role": role, "config": config, **result}
        self.folder.save(record, trial_log)
        self.ran += 1
        log.info("%s: %s", label, f"{record['output_tokens_per_s']} output tokens/s"
                 if record["status"] == "ok" else f"failed ({record.get('error')})")
        return {**record, "resumed": False}

    def tokens_per_s(self, config: dict) -> float:
        """One rematch round: a fresh trial process, not kept as a configuration record."""
        with tempfile.TemporaryDirectory(prefix="sweep-rematch-") as tmp:
            result = run_trial({**self.spec, "config": config}, Path(tmp),
                               self.args.trial_timeout)
        if result["status"] != "ok":
            raise SynthfactoryError(f"rematch round of {config_label(config)} failed: "
                                    f"{result.get('error')}")
        return result["output_tokens_per_s"]


def _rematch(measure: _Measure, folder: SweepFolder, records: list[dict],
             backed: dict) -> dict | None:
    """The defaults against the configuration that would be written (the backed-off
    winner), in alternating rounds; a rerun reuses an earlier rematch of the same pair."""
    rounds = measure.args.rematch_rounds
    backoff = next((r for r in records if r["role"] == "backoff"), None)
    if rounds == 0 or (backoff is not None and backoff["status"] != "ok"):
        return None
    pair = {"default_key": BASELINE_KEY, "winner_key": config_key(backed), "rounds": rounds}
    earlier = folder.load_rematch()
    if earlier is not None and all(earlier.get(k) == v for k, v in pair.items()):
        result = earlier
    else:
        log.info("rematch: defaults against %s, %d rounds each", config_label(backed), rounds)
        try:
            result = {**pair, **rematch(measure.tokens_per_s, {}, backed, rounds)}
        except SynthfactoryError as exc:
            print(f"rematch failed: {exc}", flush=True)
            return {**pair, "gain": None, "error": str(exc)}
        folder.save_rematch(result)
    print(describe(result, config_label(backed)), flush=True)
    return result


def _winner(records, best, backed, args, model: str, folder: SweepFolder,
            matched: dict | None) -> dict | None:
    if best is None:
        return None
    measured = next((r for r in records if r["role"] == "backoff"), None)
    if measured is not None and measured["status"] != "ok":
        return {"engine_args": backed, "applied_to": None,
                "not_applied": f"the backed-off configuration failed: {measured.get('error')}"}
    refused = _rematch_refusal(matched, backed)
    if refused:
        storage.write_json(folder.winner_url, {"engine_args": backed, "rematch": matched,
                                               "applied_to": None, "not_applied": refused})
        return {"engine_args": backed, "applied_to": None, "not_applied": refused}
    figures = measured or best
    provenance = {
        "sweep": folder.url, "config_key": best["key"], "fastest_config": best["config"],
        "safety_margin": args.safety_margin, "device": best.get("device"),
        "measured": {k: best.get(k) for k in ("output_tokens_per_s", "prompt_tokens_per_s",
                                               "startup_s", "peak_rss_mb")},
        "backed_off_measured": None if measured is None else {
            k: measured.get(k) for k in ("output_tokens_per_s", "prompt_tokens_per_s",
                                         "startup_s", "peak_rss_mb")},
        "gpu_hour_cost": args.gpu_hour_cost,
        "rematch": matched,
        "cost_per_billion_output_tokens": figures.get("cost_per_billion_output_tokens"),
        "sample": {"shard": storage.normalize(args.shard), "rows": best.get("requests"),
                   "max_new_tokens": args.max_new_tokens},
    }
    document = {"engine_args": backed, "provenance": provenance}
    applied_to = write_tuned(model, backed, provenance) if args.apply else None
    storage.write_json(folder.winner_url, {**document, "applied_to": applied_to})
    return {"engine_args": backed, "applied_to": applied_to,
            "cost_per_billion_output_tokens": provenance["cost_per_billion_output_tokens"],
            "output_tokens_per_s": figures.get("output_tokens_per_s")}


def _rematch_refusal(matched: dict | None, backed: dict) -> str | None:
    """Why the winner must not replace the defaults, if the rematch says so. A winner
    that is the defaults themselves ({}) is always fine to write."""
    if matched is None or not backed:
        return None
    if matched.get("error"):
        return f"the rematch against the defaults failed: {matched['error']}"
    if matched["gain"] < 1:
        return (f"re-measured slower than the defaults (gain {matched['gain']:.2f} over "
                f"{matched['rounds']} alternating rounds)")
    return None


def _report(records: list[dict], folder: SweepFolder, best_key: str | None,
             model: str) -> None:
    folder.write_table(records)
    title = f"engine sweep of {Path(model).name} on {folder.url}"
    storage.write_bytes(folder.png_url, report.png(records, title, best_key))
    print(report.table(records, best_key), flush=True)


def _print_winner(winner: dict | None) -> None:
    if winner and winner.get("applied_to"):
        print(f"winner written to {winner['applied_to']}", flush=True)
    elif winner:
        print(f"winner (not applied): {winner['engine_args']}"
              + (f" - {winner['not_applied']}" if winner.get("not_applied") else ""), flush=True)
