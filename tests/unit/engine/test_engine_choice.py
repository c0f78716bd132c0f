"""The engine's defaults follow the hardware, a sweep winner applies only on the hardware
it was measured on, and the user's engine arguments always win (engine_choice.py).
No vLLM here: the choice is made before the engine starts, from facts given to it."""

from __future__ import annotations

import json

import pytest

from synthfactory import hardware
from synthfactory.errors import PermanentError
from synthfactory.hardware import Hardware
from synthfactory.rephrase import engine_choice
from synthfactory.rephrase.engine_args import read_tuned
from synthfactory.rephrase.engine_choice import choose, cpu_kv_space
from synthfactory.sweep.winner import write_tuned

AVX2 = Hardware("cpu", isa="avx2")
AVX512 = Hardware("cpu", isa="avx2,avx512f")
SAPPHIRE = Hardware("cpu", isa="avx2,avx512f,avx512_bf16,amx_bf16")
H100 = Hardware("cuda", gpu_name="NVIDIA H100 80GB HBM3", capability="9.0")
T4 = Hardware("cuda", gpu_name="Tesla T4", capability="7.5")


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch):
    """As if neither VLLM_ENABLE_V1_MULTIPROCESSING nor VLLM_CPU_KVCACHE_SPACE were set."""
    monkeypatch.setattr(engine_choice, "_ENVIRONMENT",
                        {engine_choice.MP_ENV: None, engine_choice.KV_SPACE_ENV: None})


@pytest.fixture
def model(tmp_path):
    """A model folder with SmolLM2-135M's shape (30 layers, 3 KV heads of 64)."""
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({
        "num_hidden_layers": 30, "num_attention_heads": 9, "num_key_value_heads": 3,
        "hidden_size": 576}))
    return folder


@pytest.mark.parametrize("hw, dtype, because", [
    (AVX2, "float32", "float32: this CPU has no native bfloat16 (avx2)"),
    (AVX512, "float32", "float32: this CPU has no native bfloat16 (avx2,avx512f)"),
    (SAPPHIRE, "bfloat16", "bfloat16: this CPU has native bfloat16 (avx512_bf16,amx_bf16)"),
    (H100, "bfloat16", "compute capability 9.0"),
    (T4, "float16", "no native bfloat16 (compute capability 7.5 < 8.0)"),
])
def test_the_dtype_follows_the_hardware_and_says_why(hw, dtype, because, model):
    choice = choose(hw, {}, None, str(model))
    assert choice.args["dtype"] == dtype
    assert because in choice.record["dtype_reason"]
    assert choice.record["hardware"] == hw.record()


def test_the_users_engine_args_always_win(model):
    tuned = {"engine_args": {"dtype": "float32", "max_num_seqs": 8},
             "hardware": SAPPHIRE.record(), "path": "winner"}
    choice = choose(SAPPHIRE, {"dtype": "bfloat16", "max_num_seqs": 4}, tuned, str(model))
    assert choice.args["dtype"] == "bfloat16" and choice.args["max_num_seqs"] == 4
    assert choice.record["dtype_reason"] == "bfloat16: set by --engine-args"


def test_a_winner_applies_on_the_hardware_it_was_measured_on(model):
    write_tuned(str(model), {"max_num_seqs": 6, "dtype": "bfloat16"}, {"sweep": "s"},
                SAPPHIRE.record())
    tuned = read_tuned(str(model))
    same = choose(SAPPHIRE, {}, tuned, str(model))
    assert same.args["max_num_seqs"] == 6
    assert same.record["tuned"].startswith("applied")


def test_a_winner_from_other_hardware_is_ignored_with_one_line(model):
    write_tuned(str(model), {"max_num_seqs": 6, "dtype": "bfloat16"}, {"sweep": "s"},
                SAPPHIRE.record())
    choice = choose(AVX2, {}, read_tuned(str(model)), str(model))
    assert "max_num_seqs" not in choice.args and choice.args["dtype"] == "float32"
    assert choice.record["tuned"] == (
        f"ignored {model / 'synthfactory-engine.json'}: measured on a CPU with "
        "avx2,avx512f,avx512_bf16,amx_bf16, this is a CPU with avx2")
    # a GPU's winner on another GPU model
    h100_winner = {"engine_args": {"max_num_seqs": 512}, "hardware": H100.record()}
    assert "max_num_seqs" not in choose(T4, {}, h100_winner).args
    assert "max_num_seqs" in choose(H100, {}, h100_winner).args


def test_a_winner_that_names_no_hardware_is_not_applied(model):
    (model / "synthfactory-engine.json").write_text(json.dumps(
        {"engine_args": {"max_num_seqs": 6}, "provenance": {}}))
    choice = choose(AVX2, {}, read_tuned(str(model)), str(model))
    assert "max_num_seqs" not in choice.args
    assert "does not say what hardware" in choice.record["tuned"]


def test_float32_gets_the_kv_cache_space_that_keeps_bfloat16s_tokens(model):
    f32 = choose(AVX2, {}, None, str(model))
    bf16 = choose(SAPPHIRE, {}, None, str(model))
    assert bf16.environment[engine_choice.KV_SPACE_ENV] == "1"
    assert f32.environment[engine_choice.KV_SPACE_ENV] == "2"
    # 30 layers x 3 KV heads x 64 x (K and V): 11,520 values a token
    assert bf16.record["kv_cache_tokens"] == 2**30 // (11520 * 2)
    assert f32.record["kv_cache_tokens"] == bf16.record["kv_cache_tokens"]


def test_the_kv_space_is_capped_by_the_memory_available(model, monkeypatch):
    monkeypatch.setattr(engine_choice, "_available_gib", lambda: 4.0)
    space, _, note = cpu_kv_space("float32", str(model), 2048)
    assert space == 1 and "only 4.0 GiB" in note


def test_a_cache_too_small_for_one_sequence_fails_before_the_engine_starts(model, monkeypatch):
    monkeypatch.setattr(engine_choice, "_available_gib", lambda: 4.0)
    with pytest.raises(PermanentError, match="fewer than one sequence of max_model_len"):
        choose(AVX2, {"max_model_len": 40000}, None, str(model))


def test_the_users_kv_space_is_left_alone(model, monkeypatch):
    monkeypatch.setitem(engine_choice._ENVIRONMENT, engine_choice.KV_SPACE_ENV, "3")
    choice = choose(AVX2, {}, None, str(model))
    assert engine_choice.KV_SPACE_ENV not in choice.environment
    assert choice.record["kv_cache_space_gib"] == "3"


@pytest.mark.parametrize("given, env, core", [
    ({}, None, "inprocess"),
    ({"engine_core": "multiprocess"}, None, "multiprocess"),
    ({"engine_core": "multiprocess"}, "0", "inprocess"),  # a Ray replica's pin wins
])
def test_the_engine_core_mode_is_ours_and_never_reaches_vllm(given, env, core, model,
                                                             monkeypatch):
    monkeypatch.setitem(engine_choice._ENVIRONMENT, engine_choice.MP_ENV, env)
    choice = choose(AVX2, given, None, str(model))
    assert "engine_core" not in choice.args
    assert choice.record["engine_core"] == core
    assert choice.environment[engine_choice.MP_ENV] == ("1" if core == "multiprocess" else "0")


def test_an_unknown_engine_core_mode_is_refused_in_one_line():
    with pytest.raises(PermanentError, match=r"--engine-args: engine_core=\"threads\": "
                                             "expected one of inprocess, multiprocess"):
        engine_choice.check_own_args({"engine_core": "threads"}, "--engine-args")


def test_the_cpu_flags_come_from_the_environment_override(monkeypatch):
    monkeypatch.setenv(hardware.CPU_FLAGS_ENV, "avx2,avx512f,avx512_bf16")
    assert hardware.isa() == "avx2,avx512f,avx512_bf16"
    assert hardware.default_dtype(hardware.cpu_hardware())[0] == "bfloat16"
    monkeypatch.setenv(hardware.CPU_FLAGS_ENV, "none")
    assert hardware.isa() == "none"


def test_the_report_counts_each_distinct_engine_choice_once():
    """Two groups on unlike hosts show as two choices, each with its shards; an engine
    without a choice (echo, an endpoint) adds none."""
    from types import SimpleNamespace

    from synthfactory.report_figures import engine_choices

    avx2 = choose(AVX2, {}, None).record
    amx = choose(SAPPHIRE, {}, None).record
    shards = [SimpleNamespace(commit={"engine_choice": c}) for c in (avx2, amx, avx2)]
    shards += [SimpleNamespace(commit={"engine_choice": {}}), SimpleNamespace(commit=None)]
    got = engine_choices(SimpleNamespace(shards=shards))
    assert [(e["dtype"], e["shards"]) for e in got] == [("float32", 2), ("bfloat16", 1)]
    assert got[0]["dtype_reason"] == "float32: this CPU has no native bfloat16 (avx2)"
