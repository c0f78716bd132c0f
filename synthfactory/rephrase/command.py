"""``synthfactory rephrase``: one or more prompt shards (a shard group) through vLLM."""

from __future__ import annotations

import argparse
import logging

from synthfactory import storage
from synthfactory.errors import SynthfactoryError
from synthfactory.model import default_model_dir
from synthfactory.rephrase.engine_args import parse_engine_args, tuned_engine_args
from synthfactory.rephrase.worker import WorkerOptions, rephrase_shard

log = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--shard", action="append", required=True,
                        help="prompt shard URL; repeat for a shard group")
    parser.add_argument("--out", default=None,
                        help="run URL (default: the shard's run); gets generated/, quarantine/")
    parser.add_argument("--model", default=None, help="model folder or name")
    parser.add_argument("--engine-args", default=None, help="JSON object or @file for vllm.LLM")
    parser.add_argument("--max-new-tokens", type=int, default=None,
                        help="default: the shard's max_new_tokens column")
    parser.add_argument("--temperature", type=float, default=0.7)
    parser.add_argument("--top-p", type=float, default=0.95)
    parser.add_argument("--checkpoint-rows", type=int, default=64)
    parser.add_argument("--max-in-flight", type=int, default=256,
                        help="requests queued in the engine at once")


def _max_new_tokens(shard_url: str, given: int | None) -> int:
    if given is not None:
        return given
    column = storage.read_table(shard_url, columns=["max_new_tokens"]).column(0)
    return int(column[0].as_py()) if len(column) else 256


def run(args: argparse.Namespace) -> dict:
    if args.checkpoint_rows < 1:
        raise SynthfactoryError("--checkpoint-rows must be at least 1")
    model = args.model or str(default_model_dir())
    engine_args = {**tuned_engine_args(model), **parse_engine_args(args.engine_args)}
    sampling = {"temperature": args.temperature, "top_p": args.top_p,
                "max_tokens": _max_new_tokens(args.shard[0], args.max_new_tokens)}
    options = WorkerOptions(model=model, checkpoint_rows=args.checkpoint_rows,
                            max_in_flight=args.max_in_flight, sampling=sampling)
    engine = None

    def shared_engine():  # loaded once per group, and only if some shard needs it
        nonlocal engine
        if engine is None:
            from synthfactory.rephrase.engines import VllmEngine

            engine = VllmEngine(model, engine_args, sampling)
        return engine

    results = [rephrase_shard(storage.normalize(url), args.out, shared_engine, options)
               for url in args.shard]
    generation_s = sum(r["generation_s"] for r in results)
    output_tokens = sum(r["output_tokens"] for r in results if r["status"] == "committed")
    return {
        "shards": results,
        "rows_generated": sum(r["rows_generated"] for r in results),
        "rows_quarantined": sum(r["rows_quarantined"] for r in results),
        "output_tokens": sum(r["output_tokens"] for r in results),
        "generation_s": round(generation_s, 3),
        "tokens_per_s": round(output_tokens / generation_s, 1) if generation_s else None,
    }
