"""The alerting rules in deploy/prometheus/ are valid Prometheus rules (`promtool check
rules`) and behave as their unit tests say (`promtool test rules`: each alert fires once
its condition has held for its `for:`, not before; a healthy and a finished task fire
nothing). Debian's promtool (package prometheus, installed by `make test`). Each rule's
expression reads only metrics the steps export (synthfactory/metrics.py)."""

from __future__ import annotations

import re
import subprocess

import pytest

from synthfactory.metrics import RephraseMetrics
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
    assert "SUCCESS: 4 rules found" in done.stdout


def test_the_rules_pass_their_unit_tests(promtool):
    done = subprocess.run([promtool, "test", "rules", "synthfactory-rules.test.yml"],
                          cwd=RULES, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_metric_a_rule_reads_is_one_a_step_exports():
    exported = {metric.name for metric in RephraseMetrics({"task": "t"}).registry.collect()}
    text = (RULES / "synthfactory-rules.yml").read_text()
    read = set(re.findall(r"\bsynthfactory_[a-z_]+", text))  # push_time_seconds: the gateway's
    assert read and read <= exported | {f"{m}_total" for m in exported}, read - exported
