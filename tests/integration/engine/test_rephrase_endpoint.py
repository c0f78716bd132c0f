"""``rephrase --engine endpoint`` against vLLM's own OpenAI-compatible server (from
.venv-worker, serving the embedded model on 127.0.0.1, with an API key): commits
exactly once through 429/503 answers, a server killed mid-shard and restarted, and a
server that never comes back; a refused request is quarantined with the server's
message; a wrong model or key, or a served window smaller than the shards', gets one line
naming the endpoint; the key never shows.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pytest

from synthfactory import storage
from synthfactory.model import default_model_dir, is_ready
from synthfactory.rephrase.worker import read_commit
from synthfactory.stitch.prompt_table import prompt_table
from synthfactory.stitch.templates import load_template
from tests.support.endpoint_proxy import FaultProxy
from tests.support.openai_server import SERVED_NAME, VllmServer
from tests.support.shards import write_real_prompt_shard
from tests.support.wire_faults import WireFaults

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not is_ready(default_model_dir()),
                       reason="run `synthfactory model prepare` (make setup) first"),
]

ROWS = 12
CHECKPOINT = 3
API_KEY = "sk-test-endpoint-canary-7f3a"
MAX_MODEL_LEN = 1024


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    log = tmp_path_factory.mktemp("vllm-server") / "server.log"
    server = VllmServer(log, max_model_len=MAX_MODEL_LEN, api_key=API_KEY).start()
    yield server
    server.stop()


def _argv(shard: str, endpoint: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "synthfactory.cli", "rephrase", "--shard", shard,
            "--engine", "endpoint", "--endpoint", endpoint,
            "--checkpoint-rows", str(CHECKPOINT), "--max-in-flight", "4",
            "--temperature", "0", *extra]


def _env(result: Path, key: str | None = API_KEY) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SYNTHFACTORY_ENDPOINT")}
    env["SYNTHFACTORY_RESULT_FILE"] = str(result)
    if key:
        env["SYNTHFACTORY_ENDPOINT_API_KEY"] = key
    return env


def _run(argv: list[str], result: Path, key: str | None = API_KEY,
         timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run(argv, env=_env(result, key), capture_output=True, text=True,
                          timeout=timeout)


def _ok(proc: subprocess.CompletedProcess, result: Path) -> dict:
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert API_KEY not in proc.stdout + proc.stderr + result.read_text()
    return json.loads(result.read_text())


def _attempts(run: Path) -> int:
    """Attempts in the parts written so far (attempts/)."""
    return sum(storage.read_table(url, columns=["row"]).num_rows for url in
               storage.list_files(f"file://{run}/attempts/shard-00000", suffix=".parquet"))


def _keys(run: Path) -> list[tuple[str, str]]:
    """(id, template) of every row in every part, generated and quarantined."""
    keys = []
    for folder in ("generated/shard-00000", "quarantine/rephrase/shard-00000"):
        for url in storage.list_files(f"file://{run}/{folder}", suffix=".parquet"):
            table = storage.read_table(url)
            keys += zip(table.column("id").to_pylist(), table.column("template_id").to_pylist(),
                        strict=True)
    return keys


def _exactly_once(run: Path, rows: int = ROWS) -> dict:
    keys = _keys(run)
    assert len(keys) == len(set(keys)) == rows  # 0 lost, 0 duplicated
    commit = read_commit(f"file://{run}/generated/shard-00000")
    assert commit["rows_generated"] + commit["rows_quarantined"] == rows
    return commit


def test_commits_through_429_and_503_answers_exactly_once_with_the_served_model(server,
                                                                                tmp_path):
    run = tmp_path / "run"
    shard = write_real_prompt_shard(run, ROWS)
    proxy = FaultProxy(server.port, inject_429=3, inject_503=3, every=2, retry_after="1")
    try:
        started = time.monotonic()
        summary = _ok(_run(_argv(shard, proxy.url), tmp_path / "r.json"), tmp_path / "r.json")
    finally:
        proxy.close()
    assert summary["shards"][0]["status"] == "committed"
    assert proxy.injected == {"429": 3, "503": 3}
    assert summary["endpoint"]["retries"] == {"429": 3, "503": 3}
    assert summary["endpoint"]["served_model"] == SERVED_NAME
    assert time.monotonic() - started >= 1  # Retry-After: 1 was waited for
    commit = _exactly_once(run)
    assert commit["rows_quarantined"] == 0
    assert commit["model"] == SERVED_NAME
    assert commit["engine_args"]["engine"] == "endpoint"
    assert commit["engine_args"]["server"].startswith("vllm 0.")
    assert commit["engine_args"]["endpoint"] == proxy.url + "/v1"
    assert commit["engine_args"]["max_model_len"] == MAX_MODEL_LEN  # the server says it
    assert commit["device"] == "endpoint" and commit["output_tokens"] > 0
    texts = pa.concat_tables([storage.read_table(f"file://{run}/generated/shard-00000/"
                                                 f"{p['name']}") for p in commit["parts"]])
    assert set(texts.column("model").to_pylist()) == {SERVED_NAME}
    assert sum(len(t.split()) >= 3 for t in texts.column("output_text").to_pylist()) >= ROWS // 2


def test_answers_reset_mid_body_are_retried_and_commit_exactly_once(server, tmp_path):
    """The connection reset after the server did the work: a fifth of the chat completion
    answers are cut 64 bytes in with a TCP RST (support/wire_faults.py), as a gateway or
    a load balancer that drops connections does. Each is retried (counted under
    ``connection``, one for each reset) and the shard commits every row once. Break: the
    endpoint engine not retrying a TransportError fails the step."""
    run = tmp_path / "run"
    shard = write_real_prompt_shard(run, ROWS)
    with WireFaults(server.port, reset="response", reset_rate=0.2, reset_after=64,
                    methods=("POST",), seed=5) as proxy:
        summary = _ok(_run(_argv(shard, proxy.endpoint), tmp_path / "r.json"),
                      tmp_path / "r.json")
    assert proxy.resets > 0
    assert summary["endpoint"]["retries"] == {"connection": proxy.resets}
    assert summary["shards"][0]["status"] == "committed"
    _exactly_once(run)


def test_sweep_over_the_endpoint_measures_max_in_flight_against_the_defaults(server,
                                                                          tmp_path):
    shard = write_real_prompt_shard(tmp_path / "run", ROWS)
    out = f"file://{tmp_path}/sweep"
    argv = [sys.executable, "-m", "synthfactory.cli", "sweep", "--engine", "endpoint",
            "--endpoint", server.url, "--shard", shard, "--out", out,
            "--grid", json.dumps({"max_in_flight": [1]}), "--sample-rows", "4",
            "--max-new-tokens", "8", "--warmup-rows", "1", "--safety-margin", "0"]
    result = tmp_path / "sweep.json"
    summary = _ok(_run(argv, result), result)
    # the defaults (256 in flight) and one request at a time, three alternating rounds each
    rows = storage.read_table(f"{out}/results.parquet").to_pylist()
    assert sorted(r["label"] for r in rows) == ["defaults"] * 3 + ["max_in_flight=1"] * 3
    assert {r["status"] for r in rows} == {"ok"} and {r["device"] for r in rows} == {"endpoint"}
    assert all(r["output_tokens"] == 4 * 8 for r in rows)  # ignore_eos reaches the server
    assert summary["decision"]["rounds"] == 3
    winner = storage.read_json(f"{out}/winner.json")
    assert winner["applied_to"] is None  # the server's model folder is not ours
    assert winner["provenance"]["endpoint"]["url"] == server.url
    assert winner["provenance"]["decision"]["line"] == summary["decision"]["line"]


def test_server_killed_mid_shard_and_restarted_loses_and_duplicates_nothing(server, tmp_path):
    run = tmp_path / "run"
    shard = write_real_prompt_shard(run, ROWS)
    parts = run / "generated" / "shard-00000"
    result = tmp_path / "r.json"
    worker = subprocess.Popen(_argv(shard, server.url, "--endpoint-retry-s", "600"),
                              env=_env(result), stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and not (parts / "part-00000.parquet").exists():
        assert worker.poll() is None, worker.stdout.read()[-3000:]
        time.sleep(0.2)
    server.kill()  # mid-shard: requests in flight, rows left to generate
    saved = len(_keys(run))
    assert saved < ROWS
    time.sleep(3)
    assert worker.poll() is None, "the worker gave up instead of waiting for the server"
    server.start()
    output, _ = worker.communicate(timeout=900)
    assert worker.returncode == 0, output[-3000:]
    summary = json.loads(result.read_text())
    assert summary["endpoint"]["retries"].get("connection", 0) > 0
    assert summary["shards"][0]["status"] == "committed"
    _exactly_once(run)
    assert API_KEY not in output


def test_server_that_never_comes_back_fails_retryably_and_the_retry_resumes(server, tmp_path):
    run = tmp_path / "run"
    shard = write_real_prompt_shard(run, ROWS)
    parts = run / "generated" / "shard-00000"
    proxy = FaultProxy(server.port)
    try:
        worker = subprocess.Popen(_argv(shard, proxy.url, "--endpoint-retry-s", "4"),
                                  env=_env(tmp_path / "a.json"), stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and not (parts / "part-00000.parquet").exists():
            assert worker.poll() is None
            time.sleep(0.1)
        proxy.down = True  # every answer from now on is a 503
        _, stderr = worker.communicate(timeout=300)
        assert worker.returncode == 1  # retryable: Airflow spends a retry on it
        assert f"endpoint {proxy.url}/v1: a request kept failing for 4 s" in stderr
        assert "Traceback" not in stderr
        # what finished before the outage was kept: rows, and the attempts of rows the
        # gate sent back for another (--max-attempts 3, docs/adr/0141) that a part holds
        saved, tried = len(_keys(run)), _attempts(run)
        assert saved < ROWS and CHECKPOINT <= tried
        assert read_commit(f"file://{parts}") is None

        proxy.down = False  # the retry, once the server is back
        summary = _ok(_run(_argv(shard, proxy.url), tmp_path / "b.json"), tmp_path / "b.json")
    finally:
        proxy.close()
    assert summary["shards"][0]["resumed_rows"] == saved
    assert summary["shards"][0]["resumed_attempts"] == tried
    _exactly_once(run)


def test_request_over_the_context_is_quarantined_with_the_servers_message(server, tmp_path):
    run = tmp_path / "run"
    texts = ["The json module reads and writes JSON data."] * 3
    texts[1] = "word " * (MAX_MODEL_LEN * 2)  # longer than the server's context
    table = prompt_table(load_template("summary"), ["a", "b", "c"], texts, 16)
    shard = f"file://{run}/prompts/shard-00000.parquet"
    storage.write_table(table, shard)
    summary = _ok(_run(_argv(shard, server.url, "--max-new-tokens", "16"), tmp_path / "r.json"),
                  tmp_path / "r.json")
    assert summary["rows_quarantined"] == 1 and summary["rows_generated"] == 2
    quarantined = storage.read_table(
        f"file://{run}/quarantine/rephrase/shard-00000/part-00000.parquet").to_pylist()
    assert [q["id"] for q in quarantined] == ["b"]
    assert quarantined[0]["reason"].startswith("engine rejected the request: HTTP 400: ")
    assert "context" in quarantined[0]["reason"]  # vLLM's own words about the length


@pytest.mark.parametrize("extra, key, expected", [
    (["--served-model", "no-such-model"], API_KEY,
     f"does not serve model 'no-such-model' (it serves: {SERVED_NAME})"),
    ([], None, ": 401 ("),
    # one window: vLLM's model list says the served window, smaller than the shards'
    (["--max-model-len", str(2 * MAX_MODEL_LEN)], API_KEY,
     f"model '{SERVED_NAME}' is served with max_model_len {MAX_MODEL_LEN}, smaller than the "
     f"window the shards were cut for, {2 * MAX_MODEL_LEN}"),
])
def test_wrong_model_or_missing_key_is_one_line_naming_the_endpoint(server, tmp_path, extra,
                                                                     key, expected):
    shard = write_real_prompt_shard(tmp_path / "run", 6)
    proc = _run(_argv(shard, server.url, *extra), tmp_path / "r.json", key=key, timeout=120)
    assert proc.returncode == 3, proc.stderr[-2000:]  # permanent: no retry cures it
    lines = proc.stderr.strip().splitlines()
    assert lines[-1].startswith(f"synthfactory rephrase: error: endpoint {server.url}/v1")
    assert expected in lines[-1]
    assert "Traceback" not in proc.stderr
