"""Back a grid entry off by a safety margin (before it is measured: what is measured is
what would be written), price a configuration, and write the sweep's decision where the
rephrase worker reads its default engine arguments (``{model}/synthfactory-engine.json``,
read by ``tuned_engine_args``)."""

from __future__ import annotations

import datetime as dt
import math
from pathlib import Path

from synthfactory import storage
from synthfactory.errors import SynthfactoryError
from synthfactory.rephrase.engine_args import TUNED_FILE

# Arguments that size the batch or the memory pool: the ones that run out of memory
# when production prompts are longer than the sample's. Everything else is kept as is.
# max_in_flight is the endpoint's analogue of max_num_seqs: the load given to the server.
SCALED_INTS = ("max_num_seqs", "max_num_batched_tokens", "max_in_flight")
SCALED_FRACTIONS = ("gpu_memory_utilization",)


def check_margin(margin: float) -> None:
    if not 0 <= margin < 1:
        raise SynthfactoryError(f"--safety-margin {margin}: expected a fraction in [0, 1)")


def back_off(config: dict, margin: float) -> dict:
    """Scale the batch and memory knobs the sweep set down by ``margin`` (0.1: 10 %).
    Knobs the configuration left to the defaults stay unset: the sweep did not push
    them to an edge."""
    check_margin(margin)
    out = dict(config)
    for name in SCALED_INTS:
        if isinstance(out.get(name), int) and not isinstance(out[name], bool):
            out[name] = max(1, math.floor(out[name] * (1 - margin)))
    for name in SCALED_FRACTIONS:
        if isinstance(out.get(name), int | float) and not isinstance(out[name], bool):
            out[name] = round(out[name] * (1 - margin), 3)
    # vLLM refuses a token budget below the sequence budget: keep the pair valid.
    if isinstance(out.get("max_num_batched_tokens"), int) and isinstance(
            out.get("max_num_seqs"), int):
        out["max_num_batched_tokens"] = max(out["max_num_batched_tokens"], out["max_num_seqs"])
    return out


def devices(config: dict, device: str) -> int:
    if device != "cuda":
        return 1
    return int(config.get("tensor_parallel_size", 1)) * int(config.get("pipeline_parallel_size", 1))


def cost_per_billion(tokens_per_s: float | None, hour_cost: float | None,
                     device_count: int = 1) -> float | None:
    """What a billion output tokens cost at ``hour_cost`` per device-hour."""
    if not hour_cost or not tokens_per_s:
        return None
    return round(hour_cost * device_count / (tokens_per_s * 3600) * 1e9, 2)


def tuned_file(model: str) -> Path:
    return Path(model) / TUNED_FILE


def write_tuned(model: str, engine_args: dict, provenance: dict,
                hardware: dict | None = None) -> str:
    """Write the winner next to the model; the model must be a local folder. ``hardware``
    (``Hardware.record()``) is what it was measured on: the worker applies the winner
    only on matching hardware (engine_choice.tuned_applies)."""
    folder = Path(model)
    if not folder.is_dir():
        raise SynthfactoryError(f"--model {model}: not a local folder, so the winner cannot be "
                                "written next to it (use --no-apply and copy winner.json)")
    document = {"engine_args": engine_args, "hardware": hardware,
                "provenance": {**provenance, "written_at": _now()}}
    url = storage.normalize(str(tuned_file(model)))
    storage.write_json(url, document)
    return url


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
