"""Grid files become the configurations the sweep runs, each with a stable key."""

from __future__ import annotations

import json

import pytest

from synthfactory.errors import SynthfactoryError
from synthfactory.sweep.grid import (
    config_key,
    config_label,
    expand_grid,
    gpu_only,
    load_grid,
)
from tests.support.paths import ROOT

SUFFIX = {"method": "suffix", "num_speculative_tokens": 32}
AVX2 = frozenset({"sse4_2", "avx2", "fma"})
AVX512 = AVX2 | {"avx512f", "avx512bw", "avx512vl", "avx512dq"}
AMX = AVX512 | {"amx_tile", "amx_bf16"}


def test_product_form_expands_to_every_combination_after_the_baseline():
    configs = expand_grid({"max_num_seqs": [8, 16], "enable_prefix_caching": [True, False],
                           "dtype": "bfloat16"})
    assert configs[0] == {}
    assert len(configs) == 1 + 4
    assert {"max_num_seqs": 16, "enable_prefix_caching": False, "dtype": "bfloat16"} in configs
    # a non-list value is one fixed value, e.g. a speculative decoding object
    spec = {"method": "ngram", "num_speculative_tokens": 3}
    assert expand_grid({"speculative_config": spec}, baseline=False) == [
        {"speculative_config": spec}]


def test_list_form_keeps_order_and_drops_duplicates_and_the_baseline_can_be_off():
    grid = [{"max_num_seqs": 4}, {}, {"max_num_seqs": 4}, {"max_num_seqs": 2}]
    assert expand_grid(grid) == [{}, {"max_num_seqs": 4}, {"max_num_seqs": 2}]
    assert expand_grid(grid[:1], baseline=False) == [{"max_num_seqs": 4}]


@pytest.mark.parametrize("grid, message", [
    ([{"max_num_seqs": 4}, "fast"], r"--grid\[1\]: expected an object"),
    ([{"model": "other"}], r"'model' is set by the sweep"),
    ({"max_num_seqs": []}, r"'max_num_seqs' has an empty list"),
    (42, "expected a list of engine-argument objects"),
    ([], "no configurations"),
])
def test_bad_grids_are_refused_with_the_entry_named(grid, message):
    with pytest.raises(SynthfactoryError, match=message):
        expand_grid(grid, baseline=False)


def test_config_key_is_stable_and_ignores_key_order():
    a = config_key({"max_num_seqs": 8, "dtype": "bfloat16"})
    assert a == config_key({"dtype": "bfloat16", "max_num_seqs": 8})
    assert a != config_key({"dtype": "bfloat16", "max_num_seqs": 9})
    assert len(a) == 12
    # pinned: a rerun in another process (or release) must find the same key
    assert config_key({}) == "44136fa355b3"
    assert config_label({}) == "defaults"
    assert config_label({"max_num_seqs": 8, "dtype": "half"}) == 'dtype="half",max_num_seqs=8'


def test_grid_comes_from_inline_json_a_json_file_or_a_yaml_file(tmp_path):
    assert load_grid('[{"max_num_seqs": 2}]') == [{"max_num_seqs": 2}]
    path = tmp_path / "grid.json"
    path.write_text(json.dumps({"max_num_seqs": [2, 4]}))
    assert load_grid(str(path)) == {"max_num_seqs": [2, 4]}
    yaml_path = tmp_path / "grid.yaml"
    yaml_path.write_text("max_num_seqs: [2, 4]\nenforce_eager: [true]\n")
    assert load_grid(f"file://{yaml_path}") == {"max_num_seqs": [2, 4], "enforce_eager": [True]}
    with pytest.raises(SynthfactoryError, match="not found"):
        load_grid(str(tmp_path / "missing.json"))
    (tmp_path / "bad.json").write_text("[{")
    with pytest.raises(SynthfactoryError, match="bad.json: not valid JSON"):
        load_grid(str(tmp_path / "bad.json"))


@pytest.mark.parametrize("config, flags, reason", [
    ({"max_num_seqs": 8}, AVX2, None),
    ({"speculative_config": {"method": "ngram", "num_speculative_tokens": 3}}, AVX2, None),
    ({"gpu_memory_utilization": 0.9}, AMX, "ignores gpu_memory_utilization"),
    ({"speculative_config": SUFFIX}, AMX, "needs the arctic-inference package"),
    ({"speculative_config": {"method": "ngram_gpu"}}, AMX, "CUDA kernels"),
    # vLLM's CPU attention stores an fp8 KV cache only with AVX-512 or AMX (cpu_attn.py)
    ({"kv_cache_dtype": "fp8"}, AVX2, "kv_cache_dtype fp8 needs AVX-512 or AMX"),
    ({"kv_cache_dtype": "fp8_e5m2"}, frozenset(), "needs AVX-512 or AMX"),
    ({"kv_cache_dtype": "fp8"}, AVX512, None),
    ({"kv_cache_dtype": "fp8_e4m3"}, AMX, None),
    ({"kv_cache_dtype": "auto"}, AVX2, None),
    ({"kv_cache_dtype": "nvfp4_ds_mla"}, AMX, "stores the KV cache as auto or fp8"),
    ({"kv_cache_dtype": "fp8", "speculative_config": SUFFIX}, AMX, "arctic-inference"),
])
def test_gpu_only_names_what_the_cpu_build_cannot_run_on_this_cpu(config, flags, reason):
    got = gpu_only(config, flags)
    assert got is None if reason is None else reason in got


def test_gpu_only_reads_this_cpus_flags_when_not_given(monkeypatch):
    monkeypatch.setenv("SYNTHFACTORY_CPU_FLAGS", "avx2")
    assert "AVX-512 or AMX" in gpu_only({"kv_cache_dtype": "fp8"})
    monkeypatch.setenv("SYNTHFACTORY_CPU_FLAGS", "avx2,amx_tile")
    assert gpu_only({"kv_cache_dtype": "fp8"}) is None


def test_the_gpu_grid_leaves_the_cpu_build_the_entries_it_can_run():
    entries = expand_grid(load_grid(str(ROOT / "examples/sweep/gpu.json")), baseline=False)
    runs = [config_label(e) for e in entries if gpu_only(e, AVX2) is None]
    assert runs == ["max_num_batched_tokens=8192,max_num_seqs=256",
                    "max_num_batched_tokens=16384,max_num_seqs=512",
                    "enable_prefix_caching=false",
                    'speculative_config={"method": "ngram", "num_speculative_tokens": 5, '
                    '"prompt_lookup_max": 4, "prompt_lookup_min": 2}']
    # with AVX-512 the fp8 KV cache alone runs too; fp8 with suffix decoding never does
    assert [config_label(e) for e in entries if gpu_only(e, AVX512) is None] == [
        *runs[:3], 'kv_cache_dtype="fp8"', runs[3]]
