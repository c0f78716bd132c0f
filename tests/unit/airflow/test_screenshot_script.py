"""`make screenshot` (scripts/screenshot_run_report.py) takes the README's picture from a
demo run; the browser test drives its Playwright steps, this checks the rest without a
browser: it imports, finds the latest successful run through the REST API, and the
Makefile, the README and the script agree on the picture."""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import pytest

from tests.support.http import send_json
from tests.support.paths import ROOT
from tests.support.scripts import load_script

PICTURE = "docs/img/run-report.png"


@pytest.fixture(scope="module")
def script():
    return load_script("screenshot_run_report")


@pytest.fixture
def api():
    """An Airflow REST API stand-in on 127.0.0.1: a token for admin's password, then
    the DAG's runs (what the test puts in ``runs``) for that token only."""
    state = {"runs": [], "queries": []}

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

        def _answer(self, status, body):
            send_json(self, status, body)

        def do_POST(self) -> None:
            login = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            ok = login == {"username": "admin", "password": "pw"}
            self._answer(201 if ok else 401, {"access_token": "tok"} if ok else {})

        def do_GET(self) -> None:
            if self.headers.get("Authorization") != "Bearer tok":
                return self._answer(401, {})
            url = urlsplit(self.path)
            state["queries"].append((url.path, parse_qs(url.query)))
            self._answer(200, {"dag_runs": state["runs"][:1]})

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}", state
    server.shutdown()
    server.server_close()


def test_the_latest_successful_run_is_the_one_shown(script, api):
    base, state = api
    state["runs"] = [{"dag_run_id": "manual__2026-12-01T09:00:00+00:00"},
                     {"dag_run_id": "manual__2026-11-30T09:00:00+00:00"}]
    assert script.latest_success(base, "pw") == "manual__2026-12-01T09:00:00+00:00"
    ((path, query),) = state["queries"]
    assert path == "/api/v2/dags/synthetic_rephrase/dagRuns"
    assert query["state"] == ["success"] and query["order_by"] == ["-run_after"]


def test_without_a_successful_run_it_says_to_run_the_demo(script, api):
    base, _ = api
    with pytest.raises(SystemExit, match="run `make demo` first"):
        script.latest_success(base, "pw")


def test_make_screenshot_writes_the_readme_picture_with_the_airflow_python():
    makefile = (ROOT / "Makefile").read_text()
    recipe = re.search(r"^screenshot:.*\n\t(.+)$", makefile, re.M)
    assert recipe, "a `screenshot` target in the Makefile"
    assert recipe[1].startswith(".venv/bin/python scripts/screenshot_run_report.py")
    assert f"--out {PICTURE}" in recipe[1]
    readme = (ROOT / "README.md").read_text()
    assert f"]({PICTURE})" in readme and "`make screenshot`" in readme
