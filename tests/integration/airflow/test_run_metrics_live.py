"""The session's whole-DAG run (tests/support/dag_run.py), watched live: its steps pushed to
the session Pushgateway while they ran, the session Prometheus scraped it every second, and
here every query of the Grafana dashboard (deploy/grafana/synthfactory.json) and every
alert's expression (deploy/prometheus/synthfactory-rules.yml) is evaluated through that
Prometheus against that run. No extra run: the one the other whole-DAG tests read.

When: write_report deletes the run's groups at the run's end, and Prometheus marks their
series stale at its next scrape, so "now" shows nothing of the run. The dashboard's
queries are evaluated at the run's last scraped instant with every group present (the last
instant of the first run at which the run's series count is at its largest: every step had
pushed its final figures, write_report had not deleted them yet); the alerts' expressions
at every second of the first run, from its start to that instant.

The dashboard's queries: each returns series, every one carrying the run's run_id (the
Airflow run_id, from the metadata database), and the figures are the run's: rows done
equal to the committed rows (generated + quarantined, from the run folder's
_COMMITTED.json), rows planned to the plan's prompt rows, the gate's rejected and usable
rows to the validation files', every task on its first attempt.

The alerts, healthy: no expression holds at any second of the run. Each expression's
metrics are shown to be there for the run first (else an empty result proves nothing).
One exception, stated: SynthfactoryRephraseSlow's rate is output tokens/s since the shard
started, 0 until its first row ends, under any expected rate; the alert's `for: 10m`
absorbs those seconds (promtool's unit tests prove that timing), so here its expression
is evaluated where the rate is above 0. The paused case (a worker stopped at the fault
hook: the expressions hold) is tests/integration/engine/test_alerts_paused.py.
"""

from __future__ import annotations

import json
import re

import pytest

from tests.support.binaries import required_binary
from tests.support.dag_run import EXPECTED_TOKENS_PER_S, DagRun
from tests.support.paths import MODEL, ROOT, WORKER
from tests.support.prometheus import (
    alert_rules,
    dashboard_targets,
    query,
    query_range,
    substitute,
)

pytestmark = pytest.mark.skipif(
    not (WORKER.exists() and (MODEL / "config.json").exists()),
    reason="needs .venv-worker and the prepared model (make setup)",
)

DASHBOARD = ROOT / "deploy" / "grafana" / "synthfactory.json"
RULES = ROOT / "deploy" / "prometheus" / "synthfactory-rules.yml"
# instants where an expression is not expected to be false in a healthy run (docstring)
NOT_BEFORE_THE_FIRST_TOKEN = {
    "SynthfactoryRephraseSlow": " and synthfactory_rephrase_tokens_per_second > 0"}


class Watched:
    def __init__(self, run: DagRun, at: float) -> None:
        self.run, self.at = run, at
        self.prom = run.metrics.prometheus
        self.run_id = run.first_run_id
        self.values = {"dag_id": "synthetic_rephrase", "run_id": self.run_id}

    def query(self, expr: str) -> list[dict]:
        return query(self.prom, substitute(expr, self.values), at=self.at)


@pytest.fixture(scope="module")
def watched(dag_run) -> Watched:
    required_binary("prometheus", "prometheus")
    required_binary("prometheus-pushgateway", "prometheus-pushgateway")
    assert dag_run.metrics is not None
    assert dag_run.first.returncode == 0, (dag_run.first.stdout + dag_run.first.stderr)[-4000:]
    assert dag_run.first_run_id
    start, end = dag_run.first_window
    counts = query_range(dag_run.metrics.prometheus,
                         f'count({{job="synthfactory", run_id="{dag_run.first_run_id}"}})',
                         start, end)
    assert counts, "Prometheus holds no series of the run: did its steps push?"
    values = [(float(t), float(v)) for t, v in counts[0]["values"]]
    most = max(v for _, v in values)
    at = max(t for t, v in values if v == most)
    # the run's groups were deleted after that instant (write_report), not before its end
    assert at < end
    return Watched(dag_run, at)


@pytest.mark.parametrize("name, expr", dashboard_targets(DASHBOARD),
                         ids=[t for t, _ in dashboard_targets(DASHBOARD)])
def test_every_dashboard_query_returns_series_of_the_run(watched, name, expr):
    """Break used: one query's ``by (run_id, ...)`` dropped (the Retries panel's): its
    series lose the run_id label and this test fails for that query."""
    result = watched.query(expr)
    assert result, f"{name}: no series for {substitute(expr, watched.values)}"
    assert {s["metric"].get("run_id") for s in result} == {watched.run_id}, (name, result)


def test_the_template_variables_offer_the_run(watched):
    """Break used: the run_id variable's metric misspelt (``synthfactory_rephrase_rows_planed``):
    it offers no run, and this test fails."""
    variables = json.loads(DASHBOARD.read_text())["templating"]["list"]
    for variable in (v for v in variables if v["type"] == "query"):
        selector, label = re.fullmatch(r"label_values\((.+),\s*(\w+)\)",
                                       variable["definition"]).groups()
        offered = {s["metric"][label] for s in watched.query(selector)}
        assert watched.values[label] in offered, variable["name"]


def _panel(watched: Watched, title: str, ref: str = "A") -> list[float]:
    return [float(s["value"][1]) for s in watched.query(
        dict(dashboard_targets(DASHBOARD))[f"{title} {ref}"])]


def _files(folder, pattern: str) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(folder.glob(pattern))]


def test_the_figures_are_the_committed_rows(watched):
    """Rows done equal to the committed rows (generated + quarantined, every shard's
    _COMMITTED.json), and the other figures the run folder holds.

    Break used: the "Rows done of planned" query summing with ``max by (run_id)`` instead
    of ``sum by (run_id)``: with two shard groups it shows one group's rows, and this test
    fails."""
    run = watched.run.run_folder
    commits = _files(run, "generated/*/_COMMITTED.json")
    plan = json.loads((run / "prompts" / "shards.json").read_text())
    quality = [v["quality"] for v in _files(run, "validation/shard-*.json")]
    assert commits and quality
    committed = sum(c["rows_generated"] + c["rows_quarantined"] for c in commits)
    assert _panel(watched, "Rows done of planned", "A") == [committed]
    assert _panel(watched, "Rows done of planned", "B") == [plan["prompt_rows"]]
    assert sum(_panel(watched, "Quarantined rows by reason")) == sum(
        c["rows_quarantined"] for c in commits)
    assert _panel(watched, "Rows rejected by the quality gate", "A") == [
        sum(q["rejected"] for q in quality)]
    assert _panel(watched, "Rows rejected by the quality gate", "B") == [
        sum(q["usable"] for q in quality)]
    assert _panel(watched, "ETA") == [0]  # every row done
    groups = len(watched.query(
        'synthfactory_rephrase_rows_planned{run_id="$run_id", task="shard.rephrase"}'))
    assert groups == sum(key.startswith("shard.rephrase[") for key in watched.run.first_states)
    assert _panel(watched, "Tokens/s in total against the plan", "B") == [
        groups * EXPECTED_TOKENS_PER_S]
    assert set(_panel(watched, "Retries: attempt of each task")) == {1}
    # the rephrase tasks pushed their output tokens: the commits' sum
    assert sum(float(s["value"][1]) for s in watched.query(
        'synthfactory_rephrase_output_tokens_total{run_id="$run_id"}')) == sum(
        c["output_tokens"] for c in commits)


def _metrics_read(expr: str) -> set[str]:
    return set(re.findall(r"\b(synthfactory_\w+|push_time_seconds)\b", expr))


@pytest.mark.parametrize("alert, expr", sorted(alert_rules(RULES).items()),
                         ids=sorted(alert_rules(RULES)))
def test_no_alert_expression_holds_during_the_healthy_run(watched, alert, expr):
    """Each alert's expression, evaluated every second of the first run by Prometheus,
    returns nothing for it (the ``for:`` timing is promtool's, synthfactory-rules.test.yml).

    Break used: SynthfactoryShardStalled's ``> 900`` made ``> -1`` (always true while rows
    are left): its expression holds while the shards generate, and this test fails."""
    for metric in _metrics_read(expr):
        assert watched.query(f'{metric}{{run_id="$run_id"}}'), (
            f"{alert}: the run pushed no {metric}: an empty result would prove nothing")
    held = query_range(watched.prom, f"({expr}){NOT_BEFORE_THE_FIRST_TOKEN.get(alert, '')}",
                       watched.run.first_window[0], watched.at)
    assert [s for s in held if s["metric"].get("run_id") == watched.run_id] == [], (
        f"{alert}: its expression held during a healthy run: {held}")
