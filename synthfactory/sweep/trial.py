"""One sweep configuration in its own process: ``python -m synthfactory.sweep.trial
--spec SPEC.json --result RESULT.json``.

A process per configuration because vLLM does not give its memory back, an
out-of-memory error can leave CUDA unusable, and an invalid combination can fail
anywhere between argument parsing and the first step. The child builds the worker's own
engine (``VllmEngine``: built-in defaults under the configuration, the chat template
through ``enqueue_chat``; or, against an endpoint, the endpoint engine with the
configuration's client knobs: the engine's registry entry, ``trial_engine``), warms it
up, then times the sample. It writes its result file
and exits 0, or writes the error and exits 1; a child killed outright (the kernel's
OOM killer) writes nothing, and the parent records that.
"""

from __future__ import annotations

import argparse
import json
import re
import resource
import sys
import time
import traceback
from pathlib import Path

from synthfactory import storage
from synthfactory.rephrase.engine_registry import DEFAULT_ENGINE, engine_kind
from synthfactory.rephrase.engine_registry.base import describe

OOM = re.compile(r"out of memory|OutOfMemory|No available memory|insufficient memory|"
                 r"not enough (?:KV cache|memory)|Cannot allocate memory", re.IGNORECASE)


def error_kind(message: str) -> str:
    return "out_of_memory" if OOM.search(message) else "error"


def read_conversations(shard: str, rows: list[int]) -> list[list[dict]]:
    table = storage.read_table(shard, columns=["system", "user"]).take(rows)
    return [[{"role": "system", "content": s}, {"role": "user", "content": u}]
            for s, u in zip(table.column("system").to_pylist(),
                            table.column("user").to_pylist(), strict=True)]


def drain(engine, conversations: list[list[dict]]) -> dict:
    """Submit every conversation at once (the scheduler's max_num_seqs decides the
    batch, as in the worker) and step the engine until all have finished."""
    started, cpu_started = time.monotonic(), time.process_time()
    rejected = engine.submit(list(range(len(conversations))), conversations)
    prompt_tokens = output_tokens = finished = 0
    while engine.in_flight():
        for completion in engine.poll():
            finished += 1
            prompt_tokens += completion.prompt_tokens
            output_tokens += completion.output_tokens
    return {"seconds": time.monotonic() - started, "requests": finished,
            "cpu_seconds": time.process_time() - cpu_started,
            "rejected": len(rejected), "prompt_tokens": prompt_tokens,
            "output_tokens": output_tokens,
            "rejection": next(iter(engine.rejections.values()), None)}


def _peak_rss_mb() -> float:
    # ru_maxrss is KiB on Linux; children covers engine-core processes on GPU builds.
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return round(max(own, children) / 1024, 1)


def _warm_up(kind, engine, spec: dict, conversations: list[list[dict]]) -> float:
    """A few short requests pay the first-step costs outside the timed run."""
    if not spec["warmup_rows"]:
        return 0.0
    with kind.warm_up_budget(engine, spec["warmup_tokens"]):
        return drain(engine, conversations[: spec["warmup_rows"]])["seconds"]


def measure(spec: dict) -> dict:
    conversations = read_conversations(spec["shard"], spec["rows"])
    kind = engine_kind(spec.get("engine", DEFAULT_ENGINE))  # the sweep's --engine
    started = time.monotonic()
    engine = kind.trial_engine(spec)
    startup_s = time.monotonic() - started
    warmup_s = _warm_up(kind, engine, spec, conversations)
    run = drain(engine, conversations)
    if run["rejected"] or engine.rejections:
        raise RuntimeError(f"{max(run['rejected'], len(engine.rejections))} of "
                           f"{len(conversations)} requests rejected by the engine: "
                           f"{run['rejection']}")
    seconds = run["seconds"]
    effective = kind.effective(engine)  # what the engine actually used, for the report
    choice = getattr(engine, "choice", None)  # the offline engine's: what it ran on, and why
    return {
        "status": "ok", "device": engine.device, "engine_args": engine.engine_args,
        **({"hardware": choice.record["hardware"], "engine_choice": choice.record}
           if choice else {}),
        "effective": effective, "startup_s": round(startup_s, 3),
        "warmup_s": round(warmup_s, 3), "generation_s": round(seconds, 3),
        "requests": run["requests"], "prompt_tokens": run["prompt_tokens"],
        "output_tokens": run["output_tokens"],
        "output_tokens_per_s": round(run["output_tokens"] / seconds, 2),
        "prompt_tokens_per_s": round(run["prompt_tokens"] / seconds, 2),
        # CPU seconds per wall second of the timed run: on a shared machine, a figure
        # well below the cores given to vLLM means the trial was starved, not slow.
        # (Against an endpoint it is the client's share: the server's is not ours.)
        "cpu_share": round(run["cpu_seconds"] / seconds, 2),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m synthfactory.sweep.trial")
    parser.add_argument("--spec", required=True, help="JSON file: model, config, shard, rows, ...")
    parser.add_argument("--result", required=True, help="where to write the result JSON")
    args = parser.parse_args(argv)
    spec = json.loads(Path(args.spec).read_text())
    try:
        result = measure(spec)
    except Exception as exc:  # any engine failure is a result, not a crash
        traceback.print_exc()
        message = describe(exc)
        result = {"status": "failed", "error_kind": error_kind(message), "error": message}
    result["child_peak_rss_mb"] = _peak_rss_mb()
    Path(args.result).write_text(json.dumps(result, sort_keys=True, default=str))
    return 0 if result["status"] == "ok" else 1


if __name__ == "__main__":
    sys.exit(main())
