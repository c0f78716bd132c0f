"""The README's picture, docs/img/run-report.png: the "Run report" tab of the latest
successful synthetic_rephrase run, in Debian's Chromium driven by Playwright.

    make demo          # a run to show
    make standalone    # in another terminal: the UI on http://127.0.0.1:8080
    make screenshot    # this script, with .venv's python

The browser test (tests/integration/airflow/test_ui_browser.py) drives the same
functions, so what this script clicks is what the suite checks; the test's own
screenshots go to var/test-results/, never into docs/.
"""

from __future__ import annotations

import argparse
import json
import os
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = Path("/usr/bin/chromium")  # Debian's; Playwright's own download is never used
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
VIEWPORT = {"width": 1400, "height": 1000}
DAG = "synthetic_rephrase"
PASSWORDS = "simple_auth_manager_passwords.json.generated"  # written by `airflow standalone`


def launch(playwright):
    """(browser, page): headless Chromium, patient enough for a loaded 2-core machine."""
    browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
    page = browser.new_page(viewport=VIEWPORT)
    page.set_default_timeout(180_000)
    return browser, page


def log_in(page, base: str, password: str) -> None:
    page.goto(base + "/")
    page.locator("input[name=username]").fill("admin")
    page.locator("input[name=password]").fill(password)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(lambda url: "/auth/login" not in url)


def open_run_report(page, base: str, run_id: str):
    """The run page's "Run report" tab (the plugin's external view); returns its frame
    once the view is drawn."""
    page.goto(f"{base}/dags/{DAG}/runs/{run_id}")
    page.get_by_role("tab", name="Run report").or_(
        page.get_by_role("link", name="Run report")).first.click()
    frame = page.frame_locator("iframe").first
    frame.locator("#run-report").wait_for()
    return frame


def screenshot(target, path: Path) -> Path:
    """``target`` (a page or a locator) as a PNG at ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    target.screenshot(path=str(path), timeout=120_000, animations="disabled")
    return path


def latest_success(base: str, password: str, state: str = "success") -> str:
    """The run id of the DAG's latest run in ``state`` (successful unless told), through
    the REST API."""
    def call(path: str, body: dict | None = None, token: str = "") -> dict:
        request = urllib.request.Request(
            base + path, data=json.dumps(body).encode() if body else None,
            headers={"Content-Type": "application/json",
                     **({"Authorization": f"Bearer {token}"} if token else {})})
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.loads(response.read())

    token = call("/auth/token", {"username": "admin", "password": password})["access_token"]
    runs = call(f"/api/v2/dags/{DAG}/dagRuns?state={state}&order_by=-run_after&limit=1",
                token=token)["dag_runs"]
    if not runs:
        raise SystemExit(f"no {state} {DAG} run at {base}: run `make demo` first")
    return runs[0]["dag_run_id"]


def main(argv: list[str] | None = None) -> None:
    home = Path(os.environ.get("AIRFLOW_HOME", ROOT / "var" / "airflow"))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default="http://127.0.0.1:8080",
                        help="a running `airflow standalone` (make standalone)")
    parser.add_argument("--passwords", type=Path, default=home / PASSWORDS,
                        help="its admin password file (default: in $AIRFLOW_HOME)")
    parser.add_argument("--run-id", help="the run to show (default: the latest successful)")
    parser.add_argument("--while-running", action="store_true",
                        help="the latest running run, its report as it stands (default out: "
                             "docs/img/run-report-running.png)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    out = args.out or ROOT / "docs" / "img" / (
        "run-report-running.png" if args.while_running else "run-report.png")
    password = json.loads(args.passwords.read_text())["admin"]
    run_id = args.run_id or latest_success(args.url, password,
                                           "running" if args.while_running else "success")

    from playwright.sync_api import sync_playwright  # .venv only

    with sync_playwright() as playwright:
        browser, page = launch(playwright)
        try:
            log_in(page, args.url, password)
            frame = open_run_report(page, args.url, run_id)
            complete = frame.locator("#run-report").get_attribute("data-complete") == "true"
            if not complete and not args.while_running:
                raise SystemExit(f"run {run_id} has no complete report yet")
            print(screenshot(page, out))
        finally:
            browser.close()


if __name__ == "__main__":
    main()
