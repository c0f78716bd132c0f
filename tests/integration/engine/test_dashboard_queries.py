"""Every query of the Grafana dashboard (deploy/grafana/synthfactory.json) returns series of
the run it is asked about, through a real Prometheus (Debian's, on 127.0.0.1) scraping a
real Pushgateway that a rephrase task and a validate step pushed to: the rows figure equal
to the rows pushed, the quarantined and rejected rows equal to what the steps counted.

The run here is a real rephrase of one shard (synthfactory.metrics, the echo engine in
process, two rows the engine rejects, reporting fixed engine statistics as the offline
vLLM engine's engine_stats() does: test_vllm_engine_stats.py pushes the real engine's)
and `synthfactory validate` as its task runs it. The same queries against the whole-DAG
session run: tests/integration/airflow/test_run_metrics_live.py."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time

import pytest

from synthfactory.contract import METRIC_LABEL_ENV, PUSHGATEWAY_ENV, TRY_NUMBER_ENV
from synthfactory.metrics import EXPECTED_RATE_ENV, PUSH_SECONDS_ENV, RephraseMetrics
from synthfactory.rephrase.engines import EchoEngine
from synthfactory.rephrase.worker import WorkerOptions, rephrase_shard
from tests.support.paths import ROOT
from tests.support.prometheus import prometheus, pushgateway, query
from tests.support.shards import write_prompt_shard

DASHBOARD = ROOT / "deploy" / "grafana" / "synthfactory.json"
ROWS = 14
BAD_ROWS = (3, 9)  # the echo engine rejects them: quarantined
LABELS = {"dag_id": "synthetic_rephrase", "run_id": "scheduled__2026-12-04T00:00:00+00:00"}
OTHER_RUN = "scheduled__2026-12-03T00:00:00+00:00"  # pushed too: no query may return it
# what the stand-in engine reports as its own statistics (synthfactory.metrics.ENGINE_STATS)
ENGINE_FIGURES = {"requests_running": 3, "requests_waiting": 2, "kv_cache_usage": 0.4,
                  "prefix_cache_queries": 200, "prefix_cache_hits": 50}


class EchoWithStats(EchoEngine):
    """The echo engine with the optional engine_stats() of VllmEngine."""

    def engine_stats(self) -> dict[str, float]:
        return dict(ENGINE_FIGURES)


def _rephrase(gateway: str, run_url: str, run_id: str, rows: int) -> None:
    shard = write_prompt_shard(run_url, 0, rows, bad_rows=BAD_ROWS)
    labels = {**LABELS, "run_id": run_id, "task": "shard.rephrase", "map_index": "0",
              "host": "gpu-node-1", "model": "echo"}
    metrics = RephraseMetrics(labels, {EXPECTED_RATE_ENV: "5000", TRY_NUMBER_ENV: "1"})
    metrics.start_pushing({PUSHGATEWAY_ENV: gateway, PUSH_SECONDS_ENV: "0.5"})
    try:
        rephrase_shard(shard, None, lambda: EchoWithStats(reject_if="REJECT"),
                       WorkerOptions(model="echo", checkpoint_rows=4, metrics=metrics))
    finally:
        metrics.close()


def _validate(gateway: str, run_url: str, result: str) -> dict:
    env = {**os.environ, PUSHGATEWAY_ENV: gateway, TRY_NUMBER_ENV: "1",
           "SYNTHFACTORY_RESULT_FILE": result,
           **{METRIC_LABEL_ENV[k]: v for k, v in {
               **LABELS, "task": "shard.validate", "map_index": "0"}.items()}}
    done = subprocess.run([sys.executable, "-m", "synthfactory.cli", "validate", "--shard",
                           f"{run_url}/prompts/shard-00000.parquet"], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    with open(result) as f:
        return json.load(f)


@pytest.fixture(scope="module")
def scraped_run(tmp_path_factory):
    """(Prometheus URL, validate's summary) once Prometheus has scraped the pushes."""
    tmp = tmp_path_factory.mktemp("dashboard")
    with pushgateway() as gateway, prometheus(gateway, tmp, interval_s=1) as prom:
        _rephrase(gateway, f"file://{tmp}/other", OTHER_RUN, 5)
        _rephrase(gateway, f"file://{tmp}/run", LABELS["run_id"], ROWS)
        validated = _validate(gateway, f"file://{tmp}/run", str(tmp / "validate.json"))
        deadline = time.monotonic() + 60
        want = f'synthfactory_step_rows_out{{run_id="{LABELS["run_id"]}", step="validate"}}'
        while not (query(prom, want) and query(
                prom, f'synthfactory_rephrase_rows_done{{run_id="{LABELS["run_id"]}"}}')):
            assert time.monotonic() < deadline, "Prometheus did not scrape the pushes"
            time.sleep(0.5)
        time.sleep(2)  # one more scrape: the last pushes, not an earlier one's
        yield prom, validated


def _targets() -> list[tuple[str, str]]:
    dashboard = json.loads(DASHBOARD.read_text())
    return [(f"{panel['title']} {target['refId']}", target["expr"])
            for panel in dashboard["panels"] for target in panel["targets"]]


def _substitute(expr: str) -> str:
    """The dashboard's template variables, as Grafana substitutes them."""
    values = {"dag_id": LABELS["dag_id"], "run_id": LABELS["run_id"]}
    return re.sub(r"\$\{?(\w+)\}?", lambda m: values[m.group(1)], expr)


def test_the_dashboard_has_the_panels_the_issue_asks_for():
    titles = " ".join(t for t, _ in _targets()).lower()
    for what in ("tokens/s per gpu", "in total against the plan", "eta", "generating",
                 "idle", "quarantined", "rejected", "retries", "rows done"):
        assert what in titles, what


@pytest.mark.parametrize("name, expr", _targets(), ids=[t for t, _ in _targets()])
def test_every_query_returns_series_of_the_run(scraped_run, name, expr):
    prom, _ = scraped_run
    result = query(prom, _substitute(expr))
    assert result, f"{name}: no series for {_substitute(expr)}"
    assert {series["metric"].get("run_id") for series in result} == {LABELS["run_id"]}, name


def test_the_template_variables_offer_the_run(scraped_run):
    prom, _ = scraped_run
    variables = json.loads(DASHBOARD.read_text())["templating"]["list"]
    for variable in (v for v in variables if v["type"] == "query"):
        selector, label = re.fullmatch(r"label_values\((.+),\s*(\w+)\)",
                                       variable["definition"]).groups()
        offered = {s["metric"][label] for s in query(prom, _substitute(selector))}
        assert LABELS[label] in offered, variable["name"]


def _value(prom: str, title: str, ref: str = "A") -> dict[str, float]:
    expr = dict(_targets())[f"{title} {ref}"]
    return {s["metric"].get("reason", ""): float(s["value"][1])
            for s in query(prom, _substitute(expr))}


def test_the_figures_are_the_runs(scraped_run):
    prom, validated = scraped_run
    assert _value(prom, "Rows done of planned", "A") == {"": ROWS}
    assert _value(prom, "Rows done of planned", "B") == {"": ROWS}
    assert _value(prom, "Quarantined rows by reason") == {
        "engine rejected the request": len(BAD_ROWS)}
    assert _value(prom, "Rows rejected by the quality gate", "A") == {
        "": validated["rejected"]}
    assert _value(prom, "Rows rejected by the quality gate", "B") == {"": validated["usable"]}
    assert _value(prom, "ETA") == {"": 0}  # every row done
    assert _value(prom, "Tokens/s in total against the plan", "B") == {"": 5000}
    assert _value(prom, "Engine requests running and waiting", "A") == {"": 3}
    assert _value(prom, "Engine requests running and waiting", "B") == {"": 2}
    assert _value(prom, "Engine KV-cache use") == {"": 0.4}
    assert _value(prom, "Engine prefix-cache hit rate") == {"": 50 / 200}
