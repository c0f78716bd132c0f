"""Every entry of the shipped sweep grids (examples/sweep/*.json), as written and as the
sweep measures it (backed off), goes through vLLM's own argument parser and config
validation: its CLI flags (EngineArgs.add_cli_args), then EngineArgs.from_cli_args and
create_engine_config() against the embedded model's config, which loads no weights. A
misspelt key or a bad speculative method fails here, not as a failed trial on a GPU."""

from __future__ import annotations

import json
import os

import pytest

from synthfactory.model import default_model_dir, is_ready
from synthfactory.rephrase.engine_choice import (
    CPU_ENGINE_DEFAULTS,
    OWN_ENGINE_KEYS,
    check_own_args,
)
from synthfactory.sweep.grid import config_label, expand_grid, load_grid
from synthfactory.sweep.winner import back_off
from tests.support.paths import ROOT

pytestmark = pytest.mark.skipif(
    not is_ready(default_model_dir()),
    reason=f"no model at {default_model_dir()}: run `synthfactory model prepare` (make setup)")

GRIDS = sorted((ROOT / "examples/sweep").glob("*.json"))
ENTRIES = {f"{path.name}: {config_label(entry)}": entry for path in GRIDS
           for entry in expand_grid(load_grid(str(path)), baseline=False)}


def _cli(config: dict) -> list[str]:
    """The engine arguments as `vllm serve` flags."""
    argv = []
    for key, value in config.items():
        flag = "--" + key.replace("_", "-")
        if isinstance(value, bool):
            argv.append(flag if value else f"--no-{key.replace('_', '-')}")
        else:
            argv += [flag, json.dumps(value) if isinstance(value, dict) else str(value)]
    return argv


# engine argument -> (section, field) where vLLM keeps it under another name
RENAMED = {"kv_cache_dtype": ("cache_config", "cache_dtype")}


def _effective(vllm_config, key: str):
    """Where vLLM keeps the value of an engine argument once validated."""
    if key == "speculative_config":
        return vllm_config.speculative_config.method
    if key in RENAMED:
        part, field = RENAMED[key]
        return getattr(getattr(vllm_config, part), field)
    for part in ("scheduler_config", "cache_config"):
        section = getattr(vllm_config, part)
        if hasattr(section, key):
            return getattr(section, key)
    return None


@pytest.fixture(scope="module")
def vllm_check():
    from vllm.engine.arg_utils import EngineArgs
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    # no abbreviations: argparse would otherwise take --max-num-seq for --max-num-seqs
    parser = EngineArgs.add_cli_args(FlexibleArgumentParser(allow_abbrev=False))

    def check(config: dict):
        # engine_core is ours (engine_choice.py), taken out before vLLM sees the arguments
        check_own_args(config, "grid entry")
        config = {k: v for k, v in config.items() if k not in OWN_ENGINE_KEYS}
        argv = ["--model", str(default_model_dir()), *_cli({**CPU_ENGINE_DEFAULTS, **config})]
        namespace = parser.parse_args(argv)
        for key, value in config.items():
            assert getattr(namespace, key) == value, key
        saved = dict(os.environ)  # the CPU platform sets LD_PRELOAD and more for its engine
        try:
            vllm_config = EngineArgs.from_cli_args(namespace).create_engine_config()
        finally:
            os.environ.clear()
            os.environ.update(saved)
        for key, value in config.items():
            effective = _effective(vllm_config, key)
            expected = value["method"] if key == "speculative_config" else value
            assert effective is None or effective == expected, (key, effective)

    return check


@pytest.fixture
def suffix_installable(monkeypatch):
    # Suffix decoding needs the arctic-inference package, which only the GPU image gets;
    # its absence here is not what this test checks: vLLM's validation of the entry is.
    import vllm.config.speculative

    monkeypatch.setattr(vllm.config.speculative, "has_arctic_inference", lambda: True)


def test_the_grids_hold_the_entries_the_docs_name():
    gpu = [e for name, e in ENTRIES.items() if name.startswith("gpu.json")]
    keys = {k for e in gpu for k in e}
    assert {"max_num_seqs", "max_num_batched_tokens", "gpu_memory_utilization",
            "enable_prefix_caching", "kv_cache_dtype", "speculative_config"} <= keys
    assert {e["kv_cache_dtype"] for e in gpu if "kv_cache_dtype" in e} == {"fp8"}
    assert any("kv_cache_dtype" in e and e.get("speculative_config", {}).get("method")
               == "suffix" for e in gpu)  # fp8 KV cache with suffix decoding
    methods = {e["speculative_config"]["method"] for e in gpu if "speculative_config" in e}
    assert methods == {"ngram", "suffix"}


@pytest.mark.parametrize("name", list(ENTRIES))
def test_every_grid_entry_and_its_backed_off_form_pass_vllms_own_validation(
        name, vllm_check, suffix_installable):
    entry = ENTRIES[name]
    vllm_check(entry)
    vllm_check(back_off(entry, 0.1))  # what the sweep measures and writes


@pytest.mark.parametrize("bad, error, message", [
    ({"max_num_seq": 8}, SystemExit, None),
    ({"kv_cache_dtype": "fp9"}, SystemExit, None),
    ({"speculative_config": {"method": "sufix", "num_speculative_tokens": 8}}, ValueError,
     "method"),
    ({"speculative_config": {"method": "ngram", "prompt_lookup_maxx": 4}}, ValueError,
     "prompt_lookup_maxx"),
    ({"max_num_seqs": 512, "max_num_batched_tokens": 64}, ValueError,
     "max_num_batched_tokens"),
    ({"gpu_memory_utilization": 1.5}, ValueError, "gpu_memory_utilization"),
])
def test_the_check_refuses_what_vllm_refuses(bad, error, message, vllm_check,
                                             suffix_installable):
    with pytest.raises(error, match=message):
        vllm_check(bad)
