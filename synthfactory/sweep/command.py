"""``synthfactory sweep``: measure engine configurations on a sample of a prompt shard
by successive halving in rounds that alternate with the defaults, decide whether the
finalist beats the defaults by more than the rounds' spread, and write the decision
next to the model.

    synthfactory sweep --shard URL --model DIR --grid FILE|JSON --out URL \\
        [--gpu-hour-usd C] [--sample-rows N] [--max-new-tokens T] [--safety-margin F] \\
        [--rounds R] [--engine endpoint --endpoint URL [--served-model NAME]]

With ``--engine endpoint`` the configurations are the client's knobs (``max_in_flight``)
against a server someone else started; the decision is written to winner.json only
(the server's model folder is not ours to write into).

Every trial is its own process, one after another (each needs the whole device); a
rerun with the same ``--out`` reuses every round already measured there.
"""

from __future__ import annotations

import argparse
import logging
import tempfile
from pathlib import Path

from synthfactory import storage
from synthfactory.errors import RetryableError, SynthfactoryError
from synthfactory.model import default_model_dir
from synthfactory.rephrase.engine_registry import add_engine_arguments, engine_kind
from synthfactory.rephrase.engines import has_cuda
from synthfactory.sweep import report
from synthfactory.sweep.decision import check_rounds, decide
from synthfactory.sweep.grid import (
    config_key,
    config_label,
    expand_grid,
    gpu_only,
    load_grid,
)
from synthfactory.sweep.halving import halve
from synthfactory.sweep.results import SweepFolder
from synthfactory.sweep.runner import run_trial
from synthfactory.sweep.winner import back_off, check_margin, cost_per_billion, devices, write_tuned

log = logging.getLogger(__name__)
DEFAULTS = {"key": config_key({}), "label": "defaults", "config": {}, "grid_config": {},
            "role": "baseline"}


def add_more_arguments(parser: argparse.ArgumentParser) -> None:
    """--engine and each engine's own flags: the engine registry's entries (the steps
    table declares the rest of sweep's flags, synthfactory/contract/steps.py)."""
    add_engine_arguments(parser, "sweep")


def sample_rows(total: int, wanted: int) -> list[int]:
    """``wanted`` row indices spread evenly over the shard (not just its head)."""
    if wanted >= total:
        return list(range(total))
    return [i * total // wanted for i in range(wanted)]


def _check(args: argparse.Namespace) -> None:
    """What the flags' types (the steps table) cannot say alone."""
    check_margin(args.safety_margin)
    check_rounds(args.rounds)
    engine_kind(args.engine).check(args)


def _shard_rows(shard: str) -> int:
    table = storage.read_table(shard)
    missing = [c for c in ("system", "user") if c not in table.column_names]
    if missing:
        raise SynthfactoryError(f"--shard {shard}: missing column(s) {missing} "
                                "(expected a prompt shard, docs/contracts.md)")
    if table.num_rows == 0:
        raise SynthfactoryError(f"--shard {shard}: no rows to measure")
    return table.num_rows


def candidates(entries: list[dict], margin: float, cuda: bool,
               endpoint: bool = False) -> tuple[list[dict], dict]:
    """Each grid entry backed off by ``margin``: what is measured is what would be
    written. Entries the CPU build cannot run are left out on the CPU, with why (an
    endpoint's device is the server's: nothing is skipped there)."""
    out: dict[str, dict] = {}
    skipped: dict[str, str] = {}
    for entry in entries:
        reason = None if cuda or endpoint else gpu_only(entry)
        if reason:
            skipped[config_label(entry)] = reason
            continue
        backed = back_off(entry, margin)
        key = config_key(backed)
        if key != DEFAULTS["key"]:  # {} is the defaults, measured every round anyway
            out.setdefault(key, {"key": key, "label": config_label(backed), "config": backed,
                                 "grid_config": entry, "role": "candidate"})
    return list(out.values()), skipped


def run(args: argparse.Namespace) -> dict:
    _check(args)
    kind = engine_kind(args.engine)
    local = kind.local_devices  # else a server's: its devices and its model are not ours
    model = args.model or str(default_model_dir())
    if args.apply and local and not Path(model).is_dir():  # say so before hours
        raise SynthfactoryError(f"--model {model}: not a local folder, so the winner cannot "
                                "be written next to it (use --no-apply)")
    entries = expand_grid(load_grid(args.grid), baseline=False)
    for config in entries:  # a misspelt key fails now, not as a failed trial an hour later
        kind.check_grid_entry(config, f"--grid configuration {config_label(config)}")
    pool, skipped = candidates(entries, args.safety_margin, local and has_cuda(), not local)
    for label, reason in skipped.items():
        print(f"skipped on the CPU build, GPU-only: {label} ({reason})", flush=True)
    if not pool:
        raise SynthfactoryError("--grid: no configuration other than the defaults to measure"
                                + (f" on the CPU build ({len(skipped)} GPU-only skipped)"
                                   if skipped else ""))
    shard = storage.normalize(args.shard)
    rows = sample_rows(_shard_rows(shard), args.sample_rows)
    sampling = {"temperature": args.temperature, "top_p": args.top_p,
                "max_tokens": args.max_new_tokens, "ignore_eos": args.ignore_eos}
    folder = SweepFolder(args.out)
    # Same sample and same candidates, or a resumed round would not be the round it
    # pretends to be; more --rounds extend a sweep.
    folder.claim({"shard": shard, "model": model, "rows": rows, "sampling": sampling,
                  "warmup_rows": args.warmup_rows, "candidates": [c["key"] for c in pool],
                  **kind.sweep_claim(args)})
    # A plain dict per trial: whatever the trial process needs travels in it (never the
    # endpoint's key: the trial reads it from the environment it inherits).
    spec = {"model": model, "shard": shard, "rows": rows, "sampling": sampling,
            "warmup_rows": min(args.warmup_rows, len(rows)),
            "warmup_tokens": min(16, args.max_new_tokens), "engine": kind.name,
            **kind.trial_spec(args)}
    measure = _Measure(folder, spec, args)
    halving = halve(measure, DEFAULTS, pool, args.rounds)
    finalist = halving["finalist"]
    decision = None if halving["error"] else decide(
        halving["defaults"], halving["finalist_figures"],
        finalist and finalist["label"], finalist and finalist["config"])
    table = report.per_config(halving, decision, args.gpu_hour_usd)
    _report(halving["records"], table, folder, model, args.gpu_hour_usd)
    print(decision["line"] if decision else f"no decision: {halving['error']}", flush=True)
    winner = _winner(decision, halving, table, args, model, folder)
    if winner.get("applied_to"):
        print(f"written to {winner['applied_to']}", flush=True)
    if decision is None:  # the defaults' trial timed out, ran out of memory or died
        raise RetryableError(f"{halving['error']}; see the table above and "
                             f"{folder.table_url}")
    failed = {c["label"]: _kind(halving["records"], c["key"]) for c in pool
              if c["key"] in halving["failed"]}
    return {
        "out": folder.url, "results": folder.table_url, "png": folder.png_url,
        "configs": 1 + len(pool), "trials": len(halving["records"]),
        "measured": measure.ran, "skipped": measure.skipped,
        "failed": len(failed), "failures": failed, "gpu_only_skipped": skipped,
        "rounds": decision["rounds"], "decision": decision, "gain": decision["gain"],
        "winner": winner,
    }


def _kind(records: list[dict], key: str) -> str | None:
    return next((r.get("error_kind") for r in reversed(records)
                 if r["key"] == key and r["status"] != "ok"), None)


class _Measure:
    """Run (or find in ``--out``) one round of one configuration."""

    def __init__(self, folder: SweepFolder, spec: dict, args: argparse.Namespace):
        self.folder, self.spec, self.args = folder, spec, args
        self.ran = self.skipped = 0

    def __call__(self, entry: dict, round_: int) -> dict:
        key, label = entry["key"], entry["label"]
        earlier = self.folder.load(key, round_)
        if earlier is not None and (earlier["status"] == "ok" or not self.args.retry_failed):
            log.info("round %d, %s: already measured in %s", round_, label, self.folder.url)
            self.skipped += 1
            return {**earlier, "resumed": True}
        log.info("round %d, %s (%s): measuring", round_, label, key)
        with tempfile.TemporaryDirectory(prefix=f"sweep-{key}-") as tmp:
            result = run_trial({**self.spec, "config": entry["config"]}, Path(tmp),
                               self.args.trial_timeout)
            trial_log = (Path(tmp) / "trial.log").read_bytes()
        record = {"key": key, "label": label, "role": entry["role"], "round": round_,
                  "config": entry["config"], "grid_config": entry["grid_config"], **result}
        self.folder.save(record, trial_log)
        self.ran += 1
        log.info("round %d, %s: %s", round_, label,
                 f"{record['output_tokens_per_s']} output tokens/s"
                 if record["status"] == "ok" else f"failed ({record.get('error')})")
        return {**record, "resumed": False}


def _winner(decision: dict | None, halving: dict, rows: list[dict],
            args: argparse.Namespace, model: str, folder: SweepFolder) -> dict:
    """The decision as the worker reads it: the finalist's engine arguments when it won,
    {} (the built-in defaults) when the defaults stay; with the figures behind it."""
    if decision is None:
        document = {"engine_args": None, "applied_to": None, "not_applied": halving["error"]}
        storage.write_json(folder.winner_url, document)
        return document
    won = decision["winner"] == "finalist"
    applied = halving["finalist"] if won else DEFAULTS
    row = next(r for r in rows if r["key"] == applied["key"])
    # the hardware the winner was measured on: the worker applies it only on the same
    hardware = next((r["hardware"] for r in halving["records"]
                     if r["key"] == applied["key"] and r.get("hardware")), None)
    provenance = {
        "sweep": folder.url, "config_key": applied["key"], "label": applied["label"],
        "grid_config": applied["grid_config"], "safety_margin": args.safety_margin,
        "device": row.get("device"), "decision": decision,
        "measured": {k: row.get(k) for k in ("output_tokens_per_s", "prompt_tokens_per_s",
                                              "startup_s", "peak_rss_mb", "rounds")},
        "gpu_hour_cost": args.gpu_hour_usd,
        "cost_per_billion_output_tokens": row.get("cost_per_billion_output_tokens"),
        "sample": {"shard": storage.normalize(args.shard), "rows": row.get("requests"),
                   "max_new_tokens": args.max_new_tokens},
    }
    engine_args = applied["config"]
    kind = engine_kind(args.engine)
    kind.note_winner(args, engine_args, provenance)  # a server's: how to use it instead
    applied_to = (write_tuned(model, engine_args, provenance, hardware)
                  if args.apply and kind.local_devices else None)
    storage.write_json(folder.winner_url, {"engine_args": engine_args, "hardware": hardware,
                                           "provenance": provenance, "applied_to": applied_to})
    return {"engine_args": engine_args, "label": applied["label"], "applied_to": applied_to,
            "output_tokens_per_s": row.get("output_tokens_per_s"),
            "cost_per_billion_output_tokens": row.get("cost_per_billion_output_tokens")}


def _report(records: list[dict], rows: list[dict], folder: SweepFolder, model: str,
            hour_cost: float | None) -> None:
    for r in records:
        r["cost_per_billion_output_tokens"] = cost_per_billion(
            r.get("output_tokens_per_s"), hour_cost, devices(r["config"], r.get("device", "cpu")))
    folder.write_table(records)
    title = f"engine sweep of {Path(model).name} on {folder.url}"
    storage.write_bytes(folder.png_url, report.png(rows, title))
    print(report.table(rows), flush=True)
