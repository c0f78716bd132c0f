"""The Airflow UI as a user meets it, in a real browser: Debian's Chromium driven by
Playwright against `airflow standalone` (scheduler, DAG processor, API server and UI).

Log in, open synthetic_rephrase, fill the trigger form (its sections, the templates
multi-select, a number field), trigger, wait for success, and read the run report
inside the UI against the report.json the run wrote. A Param the schema refuses never
becomes a run; a form that breaks a rule between fields becomes a run that fails at
its first task, naming the field. Screenshots land in var/test-results/browser/ (test
artifacts, ignored). The README's picture is `make screenshot`'s, from a demo run
(scripts/screenshot_run_report.py: this test drives its Playwright steps).
"""

from __future__ import annotations

import contextlib
import json
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.support.airflow_standalone import (
    Standalone,
    make_home,
    standalone,
    wait_for,
    write_corpus,
)
from tests.support.paths import MODEL, RESULTS, WORKER
from tests.support.scripts import load_script

SCREENSHOT = load_script("screenshot_run_report")  # `make screenshot`: the README's picture
CHROMIUM = SCREENSHOT.CHROMIUM
ARTIFACTS = RESULTS / "browser"
DAG = "synthetic_rephrase"
RUN_TIMEOUT_S = 1800  # a whole run on a busy 2-core machine

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.skipif(not (WORKER.exists() and (MODEL / "config.json").exists()),
                       reason="needs .venv-worker and the prepared model (make setup)"),
    pytest.mark.skipif(not CHROMIUM.exists(),
                       reason="needs Debian's chromium (make browser)"),
]


@pytest.fixture(scope="module")
def airflow_ui(tmp_path_factory):
    """A fresh standalone whose DAG defaults point at a tiny corpus ending yesterday,
    the day a run triggered now reads. No scheduled runs: only what the form triggers."""
    home = tmp_path_factory.mktemp("ui")
    make_home(home)
    yesterday = (datetime.now(UTC).date() - timedelta(days=1)).isoformat()
    write_corpus(home, yesterday, days=2, docs_per_day=2)
    with standalone(home, {"AIRFLOW__SCHEDULER__USE_JOB_SCHEDULE": "False"}) as ui:
        wait_for(lambda: ui.api.call("GET", f"/api/v2/dags/{DAG}"), 180, "the DAG to parse")
        yield ui


@pytest.fixture(scope="module")
def page(airflow_ui):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser, page = SCREENSHOT.launch(playwright)
        SCREENSHOT.log_in(page, airflow_ui.base, airflow_ui.password)
        yield page
        browser.close()


@contextlib.contextmanager
def screenshot_on_failure(page, name: str):
    try:
        yield
    except BaseException:
        with contextlib.suppress(Exception):
            shot(page, f"failed-{name}")
        raise


def shot(page, name: str, target=None) -> Path:
    return SCREENSHOT.screenshot(target or page, ARTIFACTS / f"{name}.png")


def open_trigger_form(page, ui: Standalone):
    page.goto(f"{ui.base}/dags/{DAG}")
    page.get_by_test_id("trigger-dag-button").click()
    dialog = page.get_by_role("dialog")
    dialog.get_by_text(f"Trigger Dag - {DAG}").wait_for()
    return dialog


def open_section(dialog, title: str) -> None:
    trigger = dialog.locator(f"[data-part=item-trigger][id$=':trigger:{title}']")
    if trigger.get_attribute("aria-expanded") != "true":
        trigger.click()


def set_number(dialog, name: str, value: int) -> None:
    field = dialog.locator(f"input[name=element_{name}]")
    field.fill(str(value))
    field.press("Tab")  # the number field commits its value on blur


def add_template(page, dialog, style: str) -> None:
    """Pick one more style in the templates multi-select, as a user would."""
    # the only multi-select (engine's is a single select)
    dialog.get_by_role("combobox", name="Select one or multiple values").click()
    page.get_by_role("option", name=style, exact=True).click()  # the menu closes itself
    chosen = dialog.locator("input[name=element_templates]")  # hidden: the chosen values

    def values() -> list[str]:
        return ",".join(c.get_attribute("value") for c in chosen.all()).split(",")

    wait_for(lambda: style in values(), 60, f"{style} among the chosen templates", every=1)


def submit(dialog) -> None:
    button = dialog.get_by_test_id("trigger-dag-submit")
    assert button.is_enabled(), "the form refuses its own defaults"
    button.click()


def runs(ui: Standalone) -> list[dict]:
    return ui.api.call("GET", f"/api/v2/dags/{DAG}/dagRuns?order_by=-run_after")["dag_runs"]


def new_run(ui: Standalone, known: set[str]) -> dict:
    return wait_for(lambda: next((r for r in runs(ui) if r["dag_run_id"] not in known), None),
                    60, "the triggered run to exist")


def finished(ui: Standalone, run_id: str, seconds: float) -> dict:
    def state():
        run = ui.api.call("GET", f"/api/v2/dags/{DAG}/dagRuns/{run_id}")
        return run if run["state"] in ("success", "failed") else None

    return wait_for(state, seconds, f"run {run_id} to finish", every=5)


def task_states(ui: Standalone, run_id: str) -> dict[str, str]:
    tis = ui.api.call("GET", f"/api/v2/dags/{DAG}/dagRuns/{run_id}/taskInstances")
    return {ti["task_id"]: ti["state"] for ti in tis["task_instances"]}


def test_a_param_the_schema_refuses_never_becomes_a_run(page, airflow_ui):
    """A bare path for `source` (it must be a file:// or s3:// URL)."""
    with screenshot_on_failure(page, "refused"):
        before = {r["dag_run_id"] for r in runs(airflow_ui)}
        dialog = open_trigger_form(page, airflow_ui)
        open_section(dialog, "Data")
        dialog.locator("input[name=element_source]").fill("var/corpus")
        dialog.get_by_test_id("trigger-dag-submit").click()
        error = page.get_by_text("source", exact=False).filter(has_text="does not match")
        error.first.wait_for()
        shot(page, "trigger-form-refused")
        time.sleep(3)  # long enough for a run to show up, had one been created
        assert {r["dag_run_id"] for r in runs(airflow_ui)} == before
        dialog.get_by_role("button", name="Close").click()


def test_a_rule_between_fields_fails_the_run_at_once_naming_the_field(page, airflow_ui):
    """Three styles per document from the one default template: the schema accepts each
    field alone; check_params fails the run before crawl starts."""
    with screenshot_on_failure(page, "rule"):
        before = {r["dag_run_id"] for r in runs(airflow_ui)}
        dialog = open_trigger_form(page, airflow_ui)
        open_section(dialog, "Prompts and shards")
        set_number(dialog, "styles_per_doc", 3)
        submit(dialog)
        run = new_run(airflow_ui, before)
        done = finished(airflow_ui, run["dag_run_id"], 900)  # seconds, minutes when loaded
        assert done["state"] == "failed"
        states = task_states(airflow_ui, run["dag_run_id"])
        assert states["check_params"] == "failed"
        # "at once": nothing after the check ran, so no crawl, Spark or vLLM
        assert states["crawl_metadata"] == "upstream_failed"
        # the message a user reads in the task's log, in the UI
        page.goto(f"{airflow_ui.base}/dags/{DAG}/runs/{run['dag_run_id']}/tasks/check_params")
        failure = page.get_by_test_id("summary-AirflowFailException").first
        failure.wait_for()
        assert "styles_per_doc=3: more than the 1 template(s)" in failure.inner_text()
        shot(page, "rule-broken-log")


def test_trigger_form_run_succeeds_and_the_report_shows_its_figures(page, airflow_ui):
    with screenshot_on_failure(page, "run"):
        before = {r["dag_run_id"] for r in runs(airflow_ui)}
        dialog = open_trigger_form(page, airflow_ui)
        open_section(dialog, "Prompts and shards")
        add_template(page, dialog, "qa")
        set_number(dialog, "shard_tokens", 4096)
        shot(page, "trigger-form")
        submit(dialog)
        run = new_run(airflow_ui, before)
        run_id = run["dag_run_id"]
        # what the form sent is what the run got
        assert run["conf"]["templates"] == ["encyclopedic", "qa"]
        assert run["conf"]["shard_tokens"] == 4096
        done = finished(airflow_ui, run_id, RUN_TIMEOUT_S)
        assert done["state"] == "success", (task_states(airflow_ui, run_id),
                                            airflow_ui.log.read_text()[-3000:])

        day = done["data_interval_start"][:10]
        run_folder = airflow_ui.home / "var" / "data" / DAG / day
        report = json.loads((run_folder / "report" / "report.json").read_text())
        check_report_view(page, airflow_ui, run_id, report)


def check_report_view(page, ui: Standalone, run_id: str, report: dict) -> None:
    """The run page's "Run report" tab (the plugin's external view) shows the figures of
    the report.json the run wrote."""
    frame = SCREENSHOT.open_run_report(page, ui.base, run_id)
    view = frame.locator("#run-report")
    assert view.get_attribute("data-complete") == "true"

    def shown(key: str) -> str:
        return frame.locator(f"[data-figure={key}]").get_attribute("data-value")

    assert int(shown("documents_in")) == report["documents_in"] == 2
    assert int(shown("prompt_rows")) == report["prompts"]["rows"]
    assert int(shown("shards")) == report["prompts"]["shards"]
    assert int(shown("rows_generated")) == report["rephrase"]["rows_generated"] > 0
    assert int(shown("output_tokens")) == report["tokens"]["output"] > 0
    assert frame.locator("tr[data-shard]").count() == len(report["shards"])
    shot(page, "run-report")
