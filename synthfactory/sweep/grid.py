"""The sweep grid: a list of engine-argument dicts or a ``{param: [values]}`` product.

Every configuration is layered on the built-in engine defaults (``engines.py``), so ``{}``
is "the defaults", measured in every round as the reference. A configuration's key is a
hash of its canonical JSON: the same configuration has the same key in every run, which
is what lets a rerun find its earlier result. ``gpu_only`` names the entries the CPU
build cannot run (on this CPU: an fp8 KV cache needs AVX-512 or AMX) or would run without
effect; the sweep skips them there.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from pathlib import Path

from synthfactory import storage
from synthfactory.errors import SynthfactoryError
from synthfactory.hardware import cpu_flags

# Set by the sweep itself (or by --model); a grid entry must not override them.
RESERVED = ("model",)

# Speculative methods the CPU build cannot run. n-gram (and vLLM's model-based drafts)
# run there; suffix decoding needs the arctic-inference package, ngram_gpu CUDA kernels.
GPU_SPECULATIVE = {
    "suffix": "suffix decoding needs the arctic-inference package (GPU image only)",
    "ngram_gpu": "ngram_gpu is n-gram drafting in CUDA kernels",
}

# KV-cache dtypes vLLM's CPU attention stores (cpu_attn.py, supported_kv_cache_dtypes);
# the fp8 ones only on x86 with AVX-512 or AMX (_get_attn_isa raises NotImplementedError
# elsewhere), the flags torch.cpu._is_avx512_supported / _is_amx_tile_supported read.
CPU_FP8_KV_CACHE = ("fp8", "fp8_e4m3", "fp8_e5m2")
CPU_FP8_KV_FLAGS = ("avx512f", "amx_tile")


def config_key(config: dict) -> str:
    canonical = json.dumps(config, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:12]


def config_label(config: dict) -> str:
    if not config:
        return "defaults"
    return ",".join(f"{k}={json.dumps(v, sort_keys=True)}" for k, v in sorted(config.items()))


def gpu_only(config: dict, flags: frozenset[str] | None = None) -> str | None:
    """Why the CPU build cannot measure ``config`` on this CPU (``flags``: its
    /proc/cpuinfo flags, read when needed), or None when it can."""
    if "gpu_memory_utilization" in config:  # the CPU KV cache is VLLM_CPU_KVCACHE_SPACE
        return "the CPU build ignores gpu_memory_utilization"
    speculative = config.get("speculative_config")
    if isinstance(speculative, dict) and speculative.get("method") in GPU_SPECULATIVE:
        return GPU_SPECULATIVE[speculative["method"]]
    kv_cache_dtype = config.get("kv_cache_dtype", "auto")
    if kv_cache_dtype in CPU_FP8_KV_CACHE:
        flags = cpu_flags() if flags is None else flags
        if not any(flag in flags for flag in CPU_FP8_KV_FLAGS):
            return (f"kv_cache_dtype {kv_cache_dtype} needs AVX-512 or AMX on the CPU build "
                    "(this CPU has neither)")
    elif kv_cache_dtype != "auto":
        return (f"kv_cache_dtype {kv_cache_dtype}: the CPU build stores the KV cache as auto "
                f"or {'/'.join(CPU_FP8_KV_CACHE)} only")
    return None


def load_grid(source: str) -> object:
    """Inline JSON (starts with ``[`` or ``{``: what the DAG passes), else a JSON or YAML
    file path or URL."""
    text = source.strip()
    name = "--grid"
    if not text.startswith(("[", "{")):
        name = source
        url = storage.normalize(source)
        if not storage.exists(url):
            raise SynthfactoryError(f"--grid {source}: not found")
        if storage.is_dir(url):
            raise SynthfactoryError(f"--grid {source}: is a folder, not a grid file "
                                    "(JSON or YAML)")
        text = storage.read_bytes(url).decode()
        if Path(source).suffix in (".yaml", ".yml"):
            import yaml

            try:
                return yaml.safe_load(text)
            except yaml.YAMLError as exc:
                raise SynthfactoryError(f"{name}: not valid YAML ({exc})") from exc
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise SynthfactoryError(f"{name}: not valid JSON ({exc})") from exc


def expand_grid(grid: object, name: str = "--grid", baseline: bool = True) -> list[dict]:
    """The configurations to run, in order, without duplicates; ``{}`` first when
    ``baseline`` (so every sweep reports its gain over the defaults)."""
    if isinstance(grid, dict):
        configs = _product(grid, name)
    elif isinstance(grid, list):
        configs = grid
    else:
        raise SynthfactoryError(
            f"{name}: expected a list of engine-argument objects or a {{param: [values]}} "
            f"object, got {type(grid).__name__}")
    out: dict[str, dict] = {config_key({}): {}} if baseline else {}
    for i, config in enumerate(configs):
        _check(config, f"{name}[{i}]")
        out.setdefault(config_key(config), config)
    if not out:
        raise SynthfactoryError(f"{name}: no configurations")
    return list(out.values())


def _product(grid: dict, name: str) -> list[dict]:
    # A list is the values to try; anything else is one fixed value (e.g. a
    # speculative_config object). To try list-valued arguments, use the list form.
    axes = {k: (v if isinstance(v, list) else [v]) for k, v in grid.items()}
    for key, values in axes.items():
        if not values:
            raise SynthfactoryError(f"{name}: {key!r} has an empty list of values")
    keys = list(axes)
    return [dict(zip(keys, combo, strict=True))
            for combo in itertools.product(*(axes[k] for k in keys))]


def _check(config: object, where: str) -> None:
    if not isinstance(config, dict):
        raise SynthfactoryError(f"{where}: expected an object of engine arguments, "
                                f"got {type(config).__name__}")
    for key in config:
        if not isinstance(key, str) or not key:
            raise SynthfactoryError(f"{where}: argument names must be non-empty strings")
        if key in RESERVED:
            raise SynthfactoryError(f"{where}: {key!r} is set by the sweep (--model), "
                                    "not by the grid")
    try:
        json.dumps(config)
    except (TypeError, ValueError) as exc:
        raise SynthfactoryError(f"{where}: not JSON-serialisable ({exc})") from exc
