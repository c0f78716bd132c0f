"""The offline engine's arguments on the hardware it runs on, and the record of why.

Precedence, lowest first: the defaults for this hardware (dtype from the CPU's flags or
the GPU's compute capability), the sweep's winner next to the model (only when it was
measured on matching hardware: a bfloat16 winner from an AVX512-BF16 host would run
emulated, 4x slower, on an AVX2 host sharing the model folder), then the user's
``--engine-args``, which always wins.

Two settings are ours, not vLLM's, and are taken out of the arguments before vLLM sees
them: ``engine_core`` (``inprocess`` or ``multiprocess``: where vLLM's engine core runs,
docs/adr/0130) is one. The CPU build's KV-cache space is sized here too: float32 takes
twice the bytes per token of bfloat16, so its space is doubled (memory allowing) to keep
the tokens, and so the concurrency, that the bfloat16 default held.

The context window: when the task knows the window its shards were cut for (rephrase's
``--max-model-len``, which plan passes from prompts/shards.json), that window replaces
the defaults' and a winner's ``max_model_len``; the user's ``--engine-args`` may set a
larger one, never a smaller one (``check_window``; docs/rephrase.md, "One window").
"""

from __future__ import annotations

import json
import logging
import math
import os
from dataclasses import dataclass, field
from pathlib import Path

from synthfactory.contract.steps import engine_window_not_smaller, param_name
from synthfactory.errors import PermanentError
from synthfactory.hardware import Hardware, default_dtype

log = logging.getLogger(__name__)

# The embedded defaults per device (docs/environment.md); the dtype is chosen per host.
CPU_ENGINE_DEFAULTS = {"max_model_len": 2048, "enforce_eager": True, "seed": 0}
GPU_ENGINE_DEFAULTS = {"max_model_len": 4096, "seed": 0}

MAX_MODEL_LEN = "max_model_len"
ENGINE_CORE = "engine_core"
ENGINE_CORE_MODES = ("inprocess", "multiprocess")
OWN_ENGINE_KEYS = (ENGINE_CORE,)  # ours: never passed to vLLM
MP_ENV = "VLLM_ENABLE_V1_MULTIPROCESSING"
KV_SPACE_ENV = "VLLM_CPU_KVCACHE_SPACE"
# The bfloat16 CPU default: 1 GiB (vLLM refuses to start without it here; docs/environment.md)
CPU_KV_SPACE_GIB = 1
DTYPE_BYTES = {"float32": 4, "float": 4, "bfloat16": 2, "float16": 2, "half": 2}

# What the environment said before this process touched it: a user's or a Ray replica's
# setting (ray_pool pins the engine in-process) wins over a default and a sweep winner.
_ENVIRONMENT = {name: os.environ.get(name) for name in (MP_ENV, KV_SPACE_ENV)}


def check_own_args(args: dict, source: str) -> None:
    """Our own keys among engine arguments have values we know."""
    core = args.get(ENGINE_CORE)
    if core is not None and core not in ENGINE_CORE_MODES:
        raise PermanentError(f"{source}: {ENGINE_CORE}={json.dumps(core)}: expected one of "
                             f"{', '.join(ENGINE_CORE_MODES)}")


def check_window(engine_args: dict, window: int | None, source: str) -> None:
    """A ``max_model_len`` in ``engine_args`` (from ``source``) at least ``window``, the
    context window the shards were cut for: stitch sized each prompt and its budget to
    fit it, so a smaller engine window would refuse or cut rows the shard promised."""
    if not window or MAX_MODEL_LEN not in engine_args:
        return
    given = engine_args[MAX_MODEL_LEN]
    if isinstance(given, bool) or not isinstance(given, int):
        raise PermanentError(f"{source}: {MAX_MODEL_LEN}={json.dumps(given)}: expected a "
                             f"whole number of tokens (the shard's window is {window})")
    # the steps table's rule, which check_params runs on the trigger's engine_args too;
    # the message here also names where the arguments came from (engine_args, winner.json)
    values = {"engine_args": engine_args, "max_model_len": window}
    if engine_window_not_smaller(values, param_name(values)):
        raise PermanentError(
            f"{source}: {MAX_MODEL_LEN} {given} is smaller than the window the shards were "
            f"cut for, {window} (--max-model-len, stitch's max_model_len): give "
            f"{MAX_MODEL_LEN} >= {window}, leave it out, or restitch for {given}")


def hardware_defaults(hardware: Hardware) -> tuple[dict, str]:
    """The engine defaults on ``hardware`` and the dtype's reason, in one line."""
    dtype, reason = default_dtype(hardware)
    base = GPU_ENGINE_DEFAULTS if hardware.device == "cuda" else CPU_ENGINE_DEFAULTS
    return {**base, "dtype": dtype}, reason


@dataclass
class EngineChoice:
    """What the engine is given (``args``: for vLLM; ``environment``: set before it
    starts) and the record of why, for each commit, the summary and the report."""

    args: dict
    environment: dict = field(default_factory=dict)
    record: dict = field(default_factory=dict)


def tuned_applies(tuned: dict | None, hardware: Hardware) -> tuple[dict, str]:
    """The winner's engine arguments when it was measured on this hardware, else {};
    with one line saying what was done with it."""
    if not tuned or not tuned.get("engine_args"):
        return {}, "none"
    measured = Hardware.from_record(tuned.get("hardware"))
    where = tuned.get("path", "the sweep's winner")
    if measured is None:
        return {}, (f"ignored {where}: it does not say what hardware it was measured on "
                    f"(rerun the sweep here); this is {hardware.describe()}")
    if measured != hardware:
        return {}, (f"ignored {where}: measured on {measured.describe()}, this is "
                    f"{hardware.describe()}")
    return dict(tuned["engine_args"]), f"applied {where} (measured on {measured.describe()})"


def choose(hardware: Hardware, given: dict, tuned: dict | None = None,
           model: str | None = None, window: int | None = None) -> EngineChoice:
    """The engine's arguments: hardware defaults < a matching winner < ``window`` (the
    shards' context window, as ``max_model_len``) < ``given``."""
    check_window(given, window, "--engine-args")
    defaults, reason = hardware_defaults(hardware)
    tuned_args, tuned_note = tuned_applies(tuned, hardware)
    merged = with_window({**defaults, **tuned_args}, window) | given
    if "dtype" in given:
        reason = f"{merged['dtype']}: set by --engine-args"
    elif "dtype" in tuned_args:
        reason = f"{merged['dtype']}: the sweep's winner, measured on this hardware"
    core, core_reason = _engine_core(merged.pop(ENGINE_CORE, None), hardware)
    environment = {MP_ENV: "1" if core == "multiprocess" else "0"}
    record = {"hardware": hardware.record(), "dtype": merged.get("dtype"),
              "dtype_reason": reason, "tuned": tuned_note, "engine_core": core,
              "engine_core_reason": core_reason, MAX_MODEL_LEN: merged.get(MAX_MODEL_LEN),
              "max_model_len_reason": _window_reason(merged.get(MAX_MODEL_LEN), given,
                                                     tuned_args, window, hardware)}
    if hardware.device == "cpu":
        space, tokens, note = cpu_kv_space(str(merged.get("dtype")), model,
                                           int(merged.get("max_model_len", 0) or 0))
        if space is not None:
            environment[KV_SPACE_ENV] = str(space)
        record.update({"kv_cache_space_gib": space or _ENVIRONMENT[KV_SPACE_ENV],
                       "kv_cache_tokens": tokens, "kv_cache_reason": note})
    return EngineChoice(args=merged, environment=environment, record=record)


def with_window(args: dict, window: int | None) -> dict:
    """``args`` with ``max_model_len`` = ``window`` (unchanged without a window)."""
    return {**args, MAX_MODEL_LEN: window} if window else dict(args)


def _window_reason(used: int | None, given: dict, tuned_args: dict, window: int | None,
                   hardware: Hardware) -> str:
    """Where the engine's window came from, in one line."""
    cut = f"the shards were cut for {window}" if window else "no shard window given"
    if MAX_MODEL_LEN in given:
        return f"{used}: set by --engine-args ({cut})"
    if window:
        return f"{used}: the window the shards were cut for (--max-model-len)"
    if MAX_MODEL_LEN in tuned_args:
        return f"{used}: the sweep's winner ({cut})"
    return f"{used}: the {'GPU' if hardware.device == 'cuda' else 'CPU'} default ({cut})"


def _engine_core(asked: str | None, hardware: Hardware) -> tuple[str, str]:
    """The environment's setting wins: a Ray replica pins the engine in-process there
    (ray_pool.py), so that a lost replica can leave no engine-core process behind."""
    env = _ENVIRONMENT[MP_ENV]
    if env is not None:
        core = "inprocess" if env.strip() in ("0", "false", "False") else "multiprocess"
        return core, f"{core}: {MP_ENV}={env} in the environment"
    if asked:
        return asked, f"{asked}: engine arguments"
    if hardware.device == "cuda":
        return "multiprocess", "multiprocess: vLLM's default on a GPU"
    return "inprocess", ("inprocess: the CPU default (starts in 14 s instead of 30; "
                         "docs/adr/0130)")


def kv_bytes_per_token(model: str | None, dtype: str) -> int | None:
    """Bytes of K and V cache one token takes, from the model's config.json."""
    if not model:
        return None
    try:
        config = json.loads((Path(model) / "config.json").read_text())
        layers = int(config["num_hidden_layers"])
        heads = int(config["num_attention_heads"])
        kv_heads = int(config.get("num_key_value_heads") or heads)
        head_dim = int(config.get("head_dim") or config["hidden_size"] // heads)
    except (OSError, ValueError, KeyError, TypeError, ZeroDivisionError):
        return None
    return 2 * layers * kv_heads * head_dim * DTYPE_BYTES.get(dtype, 2)


def _available_gib() -> float | None:
    try:
        with open("/proc/meminfo", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) / 2**20
    except (OSError, ValueError, IndexError):
        pass
    return None


def cpu_kv_space(dtype: str, model: str | None,
                 max_model_len: int) -> tuple[int | None, int | None, str]:
    """(GiB to set, or None to leave the environment's; tokens it holds; why).

    The bfloat16 default held ``CPU_KV_SPACE_GIB`` worth of bfloat16 tokens; a wider
    dtype gets proportionally more space, so the scheduler can keep as many sequences
    in flight, but never more than a quarter of the memory available now."""
    user = _ENVIRONMENT[KV_SPACE_ENV]
    per_token = kv_bytes_per_token(model, dtype)
    if user is not None:
        try:
            space = float(user)
        except ValueError:
            space = None
        tokens = int(space * 2**30 // per_token) if per_token and space else None
        return None, tokens, f"{KV_SPACE_ENV}={user} in the environment"
    width = DTYPE_BYTES.get(dtype, 2)
    wanted = max(CPU_KV_SPACE_GIB, math.ceil(CPU_KV_SPACE_GIB * width / 2))
    available = _available_gib()
    space, note = wanted, (f"{wanted} GiB: {dtype} takes {width} bytes a value, so the "
                           f"cache holds as many tokens as {CPU_KV_SPACE_GIB} GiB of bfloat16")
    if available is not None and wanted > max(CPU_KV_SPACE_GIB, available / 4):
        space = max(CPU_KV_SPACE_GIB, math.floor(available / 4))
        note = (f"{space} GiB: {wanted} GiB would keep bfloat16's tokens, but only "
                f"{available:.1f} GiB of memory is available (a quarter of it at most)")
    tokens = int(space * 2**30 // per_token) if per_token else None
    if tokens is not None and max_model_len and tokens < max_model_len:
        raise PermanentError(
            f"{KV_SPACE_ENV}: {space} GiB holds {tokens} {dtype} tokens of this model, "
            f"fewer than one sequence of max_model_len {max_model_len}: set "
            f"{KV_SPACE_ENV} higher or lower max_model_len")
    return space, tokens, note
