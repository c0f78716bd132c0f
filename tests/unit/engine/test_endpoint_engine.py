"""The endpoint engine's edges that need no model: what an endpoint URL means, how
Retry-After and a server's error body are read, and the one line a user gets for a URL
that answers an HTML page or nothing at all (the real server: tests/integration/engine/
test_rephrase_endpoint.py)."""

from __future__ import annotations

import email.utils
import os
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from synthfactory.errors import PermanentError
from synthfactory.rephrase.endpoint import api_base, backoff_s, retry_after_s, server_message
from tests.support.ports import free_port
from tests.support.shards import write_prompt_shard


@pytest.mark.parametrize("given", ["http://h:8000", "http://h:8000/", "http://h:8000/v1",
                                   "http://h:8000/v1/"])
def test_every_spelling_of_the_root_means_v1(given):
    assert api_base(given) == "http://h:8000/v1"


def test_a_gateway_path_is_kept():
    assert api_base("https://gw.example/team/llm") == "https://gw.example/team/llm/v1"


@pytest.mark.parametrize("bad, words", [
    ("127.0.0.1:8000", "expected an http:// or https:// URL"),
    ("ftp://h/v1", "expected an http:// or https:// URL"),
    ("http://user:sk-secret@h:8000", "credentials in the URL would be logged"),
])
def test_bad_endpoint_urls_are_refused_without_echoing_a_secret(bad, words):
    with pytest.raises(PermanentError, match=words) as caught:
        api_base(bad)
    assert "sk-secret" not in str(caught.value)


def test_retry_after_in_seconds_or_as_a_date():
    assert retry_after_s("3") == 3.0
    assert retry_after_s(None) is None and retry_after_s("soon") is None
    in_ten = email.utils.formatdate(time.time() + 10, usegmt=True)
    assert 8 <= retry_after_s(in_ten) <= 10
    assert retry_after_s(email.utils.formatdate(time.time() - 60, usegmt=True)) == 0.0


def test_backoff_grows_and_is_capped():
    assert 0.25 <= backoff_s(0) <= 0.5
    assert 2 <= backoff_s(3) <= 4
    assert all(15 <= backoff_s(n) <= 30 for n in range(10, 40))


def test_server_message_reads_openai_and_vllm_errors_else_the_body():
    assert server_message(b'{"error": {"message": "too long", "type": "x"}}') == "too long"
    assert server_message(b'{"object": "error", "message": "bad"}') == "bad"
    assert server_message(b"<html>\n<body>Bad   Gateway</body></html>") == \
        "<html> <body>Bad Gateway</body></html>"


class _Html(BaseHTTPRequestHandler):
    """A web server at the wrong address: every path answers a login page."""

    def do_GET(self):  # noqa: N802 - http.server's spelling
        body = b"<!doctype html><html><title>Sign in</title></html>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def html_server():
    server = ThreadingHTTPServer(("127.0.0.1", free_port()), _Html)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def _rephrase(tmp_path, endpoint: str, *extra: str) -> subprocess.CompletedProcess:
    shard = write_prompt_shard(f"file://{tmp_path}/run", 0, rows=3)
    env = {**os.environ, "SYNTHFACTORY_ENDPOINT_API_KEY": "sk-unit-canary",
           "SYNTHFACTORY_RESULT_FILE": str(tmp_path / "r.json")}
    return subprocess.run([sys.executable, "-m", "synthfactory.cli", "rephrase", "--shard",
                           shard, "--engine", "endpoint", "--endpoint", endpoint, *extra],
                          env=env, capture_output=True, text=True, timeout=120)


def test_an_html_page_is_one_line_naming_the_endpoint(tmp_path, html_server):
    proc = _rephrase(tmp_path, html_server)
    assert proc.returncode == 3
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == (
        f"synthfactory rephrase: error: endpoint {html_server}/v1: GET /models answered an "
        "HTML page (HTTP 200), not JSON: not an OpenAI-compatible API root (expected .../v1)")


def test_nothing_listening_is_one_line_after_the_wait_and_retryable(tmp_path):
    endpoint = f"http://127.0.0.1:{free_port()}"
    started = time.monotonic()
    proc = _rephrase(tmp_path, endpoint, "--endpoint-retry-s", "2")
    assert time.monotonic() - started < 60  # waited about 2 s, not the 30 s default
    assert proc.returncode == 1  # the server may be starting: a task retry may cure it
    assert "Traceback" not in proc.stderr
    line = proc.stderr.strip().splitlines()[-1]
    assert line.startswith(f"synthfactory rephrase: error: endpoint {endpoint}/v1: no answer "
                           "to GET /models for 2 s (ConnectError")
    assert "sk-unit-canary" not in proc.stdout + proc.stderr


@pytest.mark.parametrize("extra, words", [
    ([], "--engine endpoint: give --endpoint URL (or set SYNTHFACTORY_ENDPOINT_URL)"),
    (["--endpoint", "http://h:1", "--engine-args", '{"max_num_seqs": 4}'],
     "--engine-args: the engine's arguments belong to the server"),
    (["--endpoint", "http://h:1", "--replicas", "2"],
     "--replicas/--ray-address: engine replicas are the offline engine's"),
])
def test_endpoint_flags_that_do_not_fit_fail_before_any_request(tmp_path, extra, words):
    shard = write_prompt_shard(f"file://{tmp_path}/run", 0, rows=3)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SYNTHFACTORY_ENDPOINT")}
    proc = subprocess.run([sys.executable, "-m", "synthfactory.cli", "rephrase", "--shard",
                           shard, "--engine", "endpoint", *extra], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 3
    (line,) = proc.stderr.strip().splitlines()  # one line: refused before any work
    assert words in line
