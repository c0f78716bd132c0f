"""`make screenshot` (scripts/screenshot_run_report.py) takes the README's picture from a
demo run; the browser test drives its Playwright steps, this checks the rest without a
browser: it imports, finds the latest successful run through the REST API, and the
Makefile, the README and the script agree on the picture.

The API stand-in applies the query the script sends (state filter, order_by, limit) as
Airflow's /dagRuns does, over runs listed in no useful order: which run is "latest" is
decided by the script's query, not by the stand-in."""

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
    the DAG's runs (what the test puts in ``runs``) for that token only, filtered by
    ``state``, sorted by ``order_by`` ("-" descending) and cut at ``limit`` (Airflow's
    default 50), as the real endpoint does."""
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
            query = parse_qs(url.query)
            state["queries"].append((url.path, query))
            runs = [r for r in state["runs"]
                    if "state" not in query or r["state"] in query["state"]]
            # no order_by: Airflow's own (creation) order, here the order of ``runs``
            for key in reversed(query.get("order_by", [])):  # the last key sorts first
                field = key.lstrip("-")
                if any(field not in r for r in runs):
                    return self._answer(400, {"detail": f"cannot order by {key}"})
                runs.sort(key=lambda r, f=field: r[f], reverse=key.startswith("-"))
            limit = int(query.get("limit", ["50"])[0])
            self._answer(200, {"dag_runs": runs[:limit], "total_entries": len(runs)})

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}", state
    server.shutdown()
    server.server_close()


def _run(run_id: str, state: str, run_after: str, start: str) -> dict:
    return {"dag_run_id": run_id, "state": state, "run_after": run_after,
            "logical_date": run_after, "start_date": start}


def test_the_latest_successful_run_is_the_one_shown(script, api):
    """Of several runs the script picks the successful one that ran after all the others
    that succeeded: not a newer failed or running one, not the first listed, not the one
    started last (a rerun of an old interval) nor the last id in sort order. Seen failing:
    ``order_by=run_after`` (no "-") in latest_success picks the oldest success instead."""
    base, state = api
    latest = "manual__2026-12-01T09:00:00+00:00"
    state["runs"] = [
        _run("scheduled__2026-11-29T00:00:00+00:00", "success",  # a rerun, started last
             "2026-11-29T00:00:00+00:00", "2026-12-03T08:00:00+00:00"),
        _run("manual__2026-12-02T09:00:00+00:00", "failed",
             "2026-12-02T09:00:00+00:00", "2026-12-02T09:00:01+00:00"),
        _run(latest, "success", "2026-12-01T09:00:00+00:00", "2026-12-01T09:00:01+00:00"),
        _run("manual__2026-12-03T09:00:00+00:00", "running",
             "2026-12-03T09:00:00+00:00", "2026-12-03T09:00:01+00:00"),
        _run("manual__2026-11-30T09:00:00+00:00", "success",
             "2026-11-30T09:00:00+00:00", "2026-11-30T09:00:01+00:00"),
    ]
    assert script.latest_success(base, "pw") == latest
    ((path, _),) = state["queries"]
    assert path == "/api/v2/dags/synthetic_rephrase/dagRuns"


def test_only_failed_runs_are_not_shown(script, api):
    """A DAG whose runs all failed has nothing to show: the script asks for successes."""
    base, state = api
    state["runs"] = [_run("manual__2026-12-02T09:00:00+00:00", "failed",
                          "2026-12-02T09:00:00+00:00", "2026-12-02T09:00:01+00:00")]
    with pytest.raises(SystemExit, match="run `make demo` first"):
        script.latest_success(base, "pw")


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
