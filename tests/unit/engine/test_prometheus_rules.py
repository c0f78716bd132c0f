"""The alerting rules in deploy/prometheus/ are valid Prometheus rules (`promtool check
rules`) and behave as their unit tests say (`promtool test rules`: each alert fires once
its condition has held for its `for:`, not before; a healthy and a finished task fire
nothing, nor a wave that fitted). Debian's promtool (package prometheus, installed by
`make test`). Each rule's expression reads only metrics the steps and the capacity sensor
export (synthfactory/metrics.py, plugins/capacity/metrics.py)."""

from __future__ import annotations

import re
import subprocess

import pytest
import yaml

from synthfactory.metrics import RephraseMetrics, StepMetrics
from tests.support.binaries import required_binary
from tests.support.paths import ROOT

RULES = ROOT / "deploy" / "prometheus"


@pytest.fixture(scope="module")
def promtool() -> str:
    return required_binary("promtool", "prometheus")


def test_the_rules_are_valid(promtool):
    done = subprocess.run([promtool, "check", "rules", "synthfactory-rules.yml"], cwd=RULES,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS: 6 rules found" in done.stdout


def test_the_rules_pass_their_unit_tests(promtool):
    done = subprocess.run([promtool, "test", "rules", "synthfactory-rules.test.yml"],
                          cwd=RULES, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


def _capacity_metrics() -> set[str]:
    """The capacity sensor's names (plugins/capacity/metrics.py: Airflow's side, read as
    text here: the worker venv has no Airflow)."""
    text = (ROOT / "plugins" / "capacity" / "metrics.py").read_text()
    prefix = re.search(r'^PREFIX = "([a-z_]+)"', text, re.MULTILINE).group(1)
    return {prefix + name for name in re.findall(r'\(\s*"([a-z_]+)",\s*"', text)}


def test_every_metric_a_rule_reads_is_one_a_step_exports():
    exported = {metric.name for metric in RephraseMetrics({"task": "t"}).registry.collect()}
    exported |= {metric.name for metric in StepMetrics("join", {}).registry.collect()}
    exported |= _capacity_metrics()
    assert "synthfactory_capacity_waiting" in exported
    text = (RULES / "synthfactory-rules.yml").read_text()
    read = set(re.findall(r"\bsynthfactory_[a-z_]+", text))  # push_time_seconds: the gateway's
    assert read and read <= exported | {f"{m}_total" for m in exported}, read - exported


def _check_config(promtool: str, text: str, tmp_path) -> subprocess.CompletedProcess:
    (tmp_path / "synthfactory-rules.yml").write_text(
        (RULES / "synthfactory-rules.yml").read_text())
    (tmp_path / "prometheus.yml").write_text(text)
    return subprocess.run([promtool, "check", "config", "prometheus.yml"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)


def test_the_scrape_config_is_valid_and_keeps_the_pushed_labels(promtool, tmp_path):
    text = (RULES / "prometheus.yml").read_text()
    done = _check_config(promtool, text, tmp_path)
    if "field kubernetes_sd_configs not found" in done.stdout + done.stderr:
        # Debian's Prometheus is built without Kubernetes discovery (its Go client is not
        # packaged): check everything else, the pods job's relabelling included, with
        # file discovery standing in for it
        text = text.replace("kubernetes_sd_configs:\n      - role: pod",
                            "file_sd_configs:\n      - files: [pods.json]")
        done = _check_config(promtool, text, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS: 6 rules found" in done.stdout  # it loads the rule file too
    config = yaml.safe_load((RULES / "prometheus.yml").read_text())
    assert config["scrape_configs"][1]["kubernetes_sd_configs"] == [{"role": "pod"}]
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    # the Pushgateway's job keeps each group's job, run_id, task... as pushed
    assert jobs["synthfactory-pushgateway"]["honor_labels"] is True
    # pods only with prometheus.io/scrape: "true"
    (keep,) = [r for r in jobs["kubernetes-pods"]["relabel_configs"] if r.get("action") == "keep"]
    assert keep["source_labels"] == ["__meta_kubernetes_pod_annotation_prometheus_io_scrape"]
    assert config["global"]["scrape_interval"] == "15s"


def test_every_metric_is_documented():
    docs = (ROOT / "docs" / "metrics.md").read_text()
    families = [*RephraseMetrics({"task": "t"}).registry.collect(),
                *StepMetrics("join", {}).registry.collect()]
    names = {m.name for m in families}
    names |= {n for n in _capacity_metrics() if not n.endswith("task_try_number")}
    counters = {m.name for m in families if m.type == "counter"}  # documented with _total
    assert "synthfactory_rephrase_output_tokens" in counters
    missing = sorted(n for n in names
                     if f"`{n}{'_total' if n in counters else ''}`" not in docs)
    assert missing == []
