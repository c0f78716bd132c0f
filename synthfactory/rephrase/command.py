"""``synthfactory rephrase``: one or more prompt shards (a shard group) through vLLM."""

from __future__ import annotations

import argparse
import dataclasses
import functools
import logging
import time

import pyarrow.compute as pc

from synthfactory import storage, storage_retries
from synthfactory.contract import paths
from synthfactory.contract.flag_types import AUTO
from synthfactory.contract.steps import VALIDATE
from synthfactory.errors import PermanentError
from synthfactory.metrics import RephraseMetrics, exported, step_labels
from synthfactory.model import default_model_dir
from synthfactory.rephrase.engine_args import parse_engine_args
from synthfactory.rephrase.engine_registry import add_engine_arguments, engine_kind
from synthfactory.rephrase.engine_spec import EngineSpec
from synthfactory.rephrase.replay.index import index_url
from synthfactory.rephrase.replay.replayer import ReplayOptions, index_home
from synthfactory.rephrase.worker import WorkerOptions, rephrase_shard

log = logging.getLogger(__name__)


def add_more_arguments(parser: argparse.ArgumentParser) -> None:
    """--engine and each engine's own flags: the engine registry's entries (the steps
    table declares the rest of rephrase's flags, synthfactory/contract/steps.py)."""
    add_engine_arguments(parser, "rephrase")


def _max_new_tokens(shard_urls: list[str], given: int | str) -> int:
    """The sampling's max_tokens: ``given``, or (auto) the largest row budget of the
    group, each row then capped by its own (WorkerOptions.per_row_budgets)."""
    if given != AUTO:
        return int(given)
    largest = 0
    for url in shard_urls:
        column = storage.read_table(url, columns=["max_new_tokens"]).column(0)
        if column.null_count or (len(column) and pc.min(column).as_py() < 1):
            # vLLM would refuse it only after loading the model
            raise PermanentError(f"{url}: max_new_tokens has values below 1 or missing "
                                 "(rerun stitch, or pass --max-new-tokens N)")
        largest = max(largest, pc.max(column).as_py() or 0)
    return largest or 256


def run(args: argparse.Namespace) -> dict:
    started = time.monotonic()  # the task's wall time, for the share spent generating
    for url in args.shard:  # all of them, before any engine is loaded
        if not storage.exists(url):
            raise PermanentError(f"--shard {url}: not found")
    kind = engine_kind(args.engine)
    kind.check(args)  # the engine's flags together, before any shard is read
    if _pooled(args):
        kind.check_pool()
    model = args.model or str(default_model_dir())
    given = parse_engine_args(args.engine_args)
    tuned = kind.check_engine_args(given, model, args.max_model_len)
    sources = _replay_sources(args.replay_from)
    sampling = {"temperature": args.temperature, "top_p": args.top_p,
                "max_tokens": _max_new_tokens(args.shard, args.max_new_tokens)}
    options = WorkerOptions(model=model, checkpoint_rows=args.checkpoint_rows,
                            max_in_flight=args.max_in_flight, sampling=sampling,
                            per_row_budgets=args.max_new_tokens == AUTO,
                            max_attempts=args.max_attempts, repairs=args.repair == "trim",
                            # the gate's bound as validate applies it by default
                            max_repetition=VALIDATE.flag("--max-repetition").default)
    spec = EngineSpec(model=model, engine=kind.name, engine_args=given, tuned=tuned,
                      sampling=sampling, max_in_flight=args.max_in_flight,
                      window=args.max_model_len, settings=kind.settings(args))
    options = dataclasses.replace(options, replay=ReplayOptions(
        kind.replay_basis(spec), lookup=args.replay == "on", sources=sources))
    shards = [storage.normalize(url) for url in args.shard]
    pool = engine = None
    if _pooled(args):
        from synthfactory.rephrase.ray_pool import PoolOptions, rephrase_on_ray

        gpus = args.gpus_per_replica
        if gpus is None:
            gpus = kind.default_gpus_per_replica()
        # the driver pushes the task's figures as each shard comes back: per shard, and
        # without the replicas' engine statistics (docs/metrics.md)
        metrics = RephraseMetrics(step_labels(model))
        if exported():  # the shards' rows are read only when the figures go somewhere
            metrics.planned(sum(storage.read_table(url, columns=["id"]).num_rows
                                for url in shards), 0)
        metrics.start_pushing()
        try:
            results, pool = rephrase_on_ray(
                shards, args.run, spec, options,
                PoolOptions(replicas=args.replicas, gpus_per_replica=gpus,
                            address=args.ray_address, max_shard_attempts=args.max_shard_attempts,
                            replicas_per_node=args.replicas_per_node),
                on_result=lambda result: metrics.shard_done(
                    result, time.monotonic() - started))
        finally:
            metrics.close()
    else:
        def shared_engine():  # loaded once per group, and only if some shard needs it
            nonlocal engine
            if engine is None:
                engine = spec.build()
            return engine

        metrics = RephraseMetrics(step_labels(model))
        metrics.start_pushing()  # when SYNTHFACTORY_PUSHGATEWAY names one
        try:
            local = dataclasses.replace(options, metrics=metrics)
            results = [rephrase_shard(url, args.run, shared_engine, local) for url in shards]
        finally:
            metrics.close()
    ran = [r for r in results if r["status"] == "committed"]  # not an earlier try's commits
    generation_s = sum(r["generation_s"] for r in ran)
    output_tokens = sum(r["output_tokens"] for r in ran)
    return {
        "shards": results,
        "rows_generated": sum(r["rows_generated"] for r in results),
        "rows_quarantined": sum(r["rows_quarantined"] for r in results),
        "output_tokens": sum(r["output_tokens"] for r in results),
        "generation_s": round(generation_s, 3),
        "tokens_per_s": round(output_tokens / generation_s, 1) if generation_s else None,
        **_task_timings(ran, time.monotonic() - started, pool["replicas"] if pool else 1),
        **({"ray": pool} if pool else {}),
        # the replicas' (each shard's, from its process); cli.py adds this process's own
        **({"storage_retries": functools.reduce(
            storage_retries.add, (r.get("storage_retries") for r in results), {})}
           if pool else {}),
        **({} if pool else kind.summary(engine)),  # the engine's own figures, if any
    }


def _replay_sources(given: str | None) -> tuple[tuple[str, str | None], ...]:
    """--replay-from: a pipeline's folder (it has replay_index/) or one run folder (it
    has generated/); () for the run's own pipeline folder. Checked before any shard is
    read."""
    if not given:
        return ()
    url = storage.normalize(given).rstrip("/")
    if storage.is_dir(index_url(url)):
        return ((url, None),)
    if storage.is_dir(storage.join(url, paths.GENERATED)):
        return ((index_home(url), url),)
    raise PermanentError(f"--replay-from {given}: neither a folder with a replay "
                         "index (replay_index/) nor a run folder (generated/)")


def _pooled(args: argparse.Namespace) -> bool:
    """The shards go to Ray replicas, not to one engine in this process."""
    return bool(args.replicas > 1 or args.ray_address or args.replicas_per_node)


def _task_timings(ran: list[dict], wall_s: float, engines: int) -> dict:
    """The task's wall time, its engines' start-up and the share of the wall time its
    engines spent generating (Ray replicas start and generate side by side: per engine)."""
    generation_s, wall_s = sum(r["generation_s"] for r in ran), round(wall_s, 3)
    return {"wall_s": wall_s, "startup_s": round(sum(r["startup_s"] for r in ran), 3),
            "generating_fraction": round(generation_s / (wall_s * engines), 4) if wall_s
            else None}
