"""One window from stitch to the engine (docs/adr/0133; docs/rephrase.md, "One
window"): plan passes the window shards.json records to every rephrase, the offline
engine runs with it unless ``--engine-args`` sets a larger one, and an engine window
smaller than the shards' (the user's, or an endpoint's) fails the task with one line
before any model is loaded or any request sent. No vLLM here: the engine's arguments are
chosen before it starts, and a server is a few lines of http.server."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from synthfactory import cli, plan, storage
from synthfactory.errors import PermanentError
from synthfactory.hardware import Hardware
from synthfactory.rephrase import engine_choice
from synthfactory.rephrase.endpoint import EndpointOptions, OpenAIEndpointEngine
from synthfactory.rephrase.engine_choice import check_window, choose
from synthfactory.rephrase.engines import EchoEngine
from tests.support.ports import free_port
from tests.support.shards import write_prompt_shard

AVX2 = Hardware("cpu", isa="avx2")
H100 = Hardware("cuda", gpu_name="NVIDIA H100 80GB HBM3", capability="9.0")


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch):
    """As if neither VLLM_ENABLE_V1_MULTIPROCESSING nor VLLM_CPU_KVCACHE_SPACE were set."""
    monkeypatch.setattr(engine_choice, "_ENVIRONMENT",
                        {engine_choice.MP_ENV: None, engine_choice.KV_SPACE_ENV: None})


# -- plan: the window shards.json records goes into every rephrase argv -----------------

def _planned(tmp_path, shards_json: dict, *options: str) -> list[dict]:
    run = f"file://{tmp_path}/run"
    entries = [{"name": f"shard-0000{i}", "url": f"{run}/prompts/shard-0000{i}.parquet",
                "rows": 4, "tokens": 1000} for i in range(3)]
    storage.write_json(f"{run}/prompts/shards.json", {"shards": entries, **shards_json})
    args = cli.build_parser("plan").parse_args(["--run", run, "--max-shard-groups", "2", "--",
                                                "--engine", "echo", *options])
    return plan.run(args)


def test_plan_passes_the_shards_window_to_every_rephrase(tmp_path):
    groups = _planned(tmp_path, {"max_model_len": 3072})
    assert len(groups) == 2
    for group in groups:
        argv = group["rephrase"]
        assert argv.count("--max-model-len") == 1
        assert argv[argv.index("--max-model-len") + 1] == "3072"
        assert "--max-model-len" not in group["validate"]


def test_a_shards_json_from_an_older_stitch_passes_no_window(tmp_path):
    for group in _planned(tmp_path, {}):
        assert "--max-model-len" not in group["rephrase"]


@pytest.mark.parametrize("options", [["--max-model-len", "1024"], ["--max-model-len=1024"]])
def test_a_window_after_the_dashes_is_refused(tmp_path, options):
    with pytest.raises(PermanentError, match="--max-model-len after --: the window comes "
                                             "from .*shards.json"):
        _planned(tmp_path, {"max_model_len": 2048}, *options)


def test_a_window_that_is_not_a_number_is_refused(tmp_path):
    with pytest.raises(PermanentError, match="'max_model_len' must be a whole number >= 1, "
                                             "got '2k'"):
        _planned(tmp_path, {"max_model_len": "2k"})


# -- the offline engine's arguments: the shards' window, unless a larger one is given ----

@pytest.mark.parametrize("hw, default", [(AVX2, 2048), (H100, 4096)])
def test_without_engine_args_the_engine_gets_the_shards_window(hw, default):
    assert choose(hw, {}).args["max_model_len"] == default  # no window: as before
    for window in (1024, 3072, 8192):  # smaller or larger than the hardware's default
        choice = choose(hw, {}, None, None, window)
        assert choice.args["max_model_len"] == window
        assert choice.record["max_model_len"] == window
        assert choice.record["max_model_len_reason"] == (
            f"{window}: the window the shards were cut for (--max-model-len)")


def test_the_shards_window_replaces_a_winners():
    tuned = {"engine_args": {"max_model_len": 1024, "max_num_seqs": 8},
             "hardware": AVX2.record(), "path": "winner"}
    choice = choose(AVX2, {}, tuned, None, 2048)
    assert choice.args["max_model_len"] == 2048 and choice.args["max_num_seqs"] == 8
    without = choose(AVX2, {}, tuned)
    assert without.args["max_model_len"] == 1024
    assert without.record["max_model_len_reason"] == (
        "1024: the sweep's winner (no shard window given)")


def test_a_larger_engine_window_from_the_user_is_kept():
    choice = choose(AVX2, {"max_model_len": 4096}, None, None, 2048)
    assert choice.args["max_model_len"] == 4096
    assert choice.record["max_model_len_reason"] == (
        "4096: set by --engine-args (the shards were cut for 2048)")


def test_a_smaller_engine_window_is_refused_naming_both():
    line = ("--engine-args: max_model_len 1024 is smaller than the window the shards were "
            "cut for, 2048 (--max-model-len, stitch's max_model_len): give max_model_len "
            ">= 2048, leave it out, or restitch for 1024")
    with pytest.raises(PermanentError) as caught:
        choose(AVX2, {"max_model_len": 1024}, None, None, 2048)
    assert str(caught.value) == line
    check_window({"max_model_len": 1024}, None, "--engine-args")  # no window: no rule
    with pytest.raises(PermanentError, match="expected a whole number of tokens"):
        check_window({"max_model_len": "1k"}, 2048, "--engine-args")


# -- rephrase: the check comes before any engine; the window reaches the engine ---------

class _NoEngine:
    """Stands in for vllm: building it fails the test (the check must come first)."""

    def __init__(self, *args, **kwargs):
        raise AssertionError("the engine was built: the window check did not come first")


def test_rephrase_with_a_smaller_engine_window_exits_3_before_any_engine(
        tmp_path, monkeypatch, capsys):
    from synthfactory.rephrase import engines

    monkeypatch.setattr(engines, "VllmEngine", _NoEngine)
    shard = write_prompt_shard(f"file://{tmp_path}/run", 0, rows=3)
    code = cli.main(["rephrase", "--shard", shard, "--model", str(tmp_path),
                     "--max-model-len", "2048", "--engine-args", '{"max_model_len": 1024}'])
    err = capsys.readouterr().err
    assert code == 3
    (line,) = err.strip().splitlines()  # one line, nothing generated
    assert line.startswith("synthfactory rephrase: error: --engine-args: max_model_len 1024 "
                           "is smaller than the window the shards were cut for, 2048")
    assert not storage.exists(f"file://{tmp_path}/run/generated")


def test_rephrase_hands_the_window_to_the_engine_it_builds(tmp_path, monkeypatch):
    from synthfactory.rephrase import engines

    built = []

    def fake_vllm(model, engine_args, sampling, llm=None, tuned=None, window=None):
        built.append({"engine_args": engine_args, "window": window})
        return EchoEngine()

    monkeypatch.setattr(engines, "VllmEngine", fake_vllm)
    shard = write_prompt_shard(f"file://{tmp_path}/run", 0, rows=3)
    assert cli.main(["rephrase", "--shard", shard, "--model", str(tmp_path),
                     "--max-model-len", "3072"]) == 0
    assert built == [{"engine_args": {}, "window": 3072}]


# -- an endpoint: refused when it reports a smaller window; trusted when it says none ----

def _models_server(card: dict):
    body = json.dumps({"object": "list", "data": [card]}).encode()

    class Models(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's spelling
            found = self.path == "/v1/models"
            self.send_response(200 if found else 404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body) if found else 2))
            self.end_headers()
            self.wfile.write(body if found else b"{}")

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", free_port()), Models)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.mark.parametrize("card, window, reported", [
    ({"id": "m", "owned_by": "vllm", "max_model_len": 4096}, 2048, 4096),
    ({"id": "m", "owned_by": "vllm", "max_model_len": 2048}, 2048, 2048),
    ({"id": "m", "owned_by": "sglang"}, 2048, None),  # says nothing: trusted
    ({"id": "m", "owned_by": "vllm", "max_model_len": 1024}, None, 1024),  # no window
])
def test_an_endpoint_at_least_the_shards_window_is_used(card, window, reported):
    server = _models_server(card)
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        engine = OpenAIEndpointEngine(EndpointOptions(url=url, window=window), {})
        assert engine.engine_args["max_model_len"] == reported
        engine.close()
    finally:
        server.shutdown()
        server.server_close()


def test_an_endpoint_serving_a_smaller_window_is_refused_in_one_line():
    server = _models_server({"id": "m", "owned_by": "vllm", "max_model_len": 1024})
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        with pytest.raises(PermanentError) as caught:
            OpenAIEndpointEngine(EndpointOptions(url=url, window=2048), {})
    finally:
        server.shutdown()
        server.server_close()
    assert str(caught.value) == (
        f"endpoint {url}/v1: model 'm' is served with max_model_len 1024, smaller than the "
        "window the shards were cut for, 2048 (--max-model-len): serve it with "
        "--max-model-len >= 2048, or restitch for 1024")
