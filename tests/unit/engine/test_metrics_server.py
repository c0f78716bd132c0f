"""serve_metrics: a registry on /metrics when SYNTHFACTORY_METRICS_PORT names a port (a
pod's), nothing without it (a local step, which pushes only), and a port already taken
costs a log line, never the step. StepMetrics serve as RephraseMetrics do."""

from __future__ import annotations

import logging
import socket
import urllib.request

import pytest
from prometheus_client import CollectorRegistry, Gauge

from synthfactory.contract.names import METRICS_ADDR_ENV, METRICS_PORT_ENV
from synthfactory.metrics import StepMetrics, serve_metrics, step_metrics
from tests.support.ports import free_port


def _get(port: int) -> str:
    return urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()


def test_without_a_port_nothing_is_served():
    assert serve_metrics(CollectorRegistry(), {}) is None
    assert step_metrics("join", {}) is None


def test_a_port_serves_the_registry_until_stopped():
    registry = CollectorRegistry()
    Gauge("synthfactory_probe", "a probe", registry=registry).set(7)
    port = free_port()
    server = serve_metrics(registry, {METRICS_PORT_ENV: str(port), METRICS_ADDR_ENV: "127.0.0.1"})
    assert server is not None
    try:
        assert "synthfactory_probe 7.0" in _get(port)
    finally:
        server.stop()
    with pytest.raises(OSError):  # stopped: nothing answers there any more
        _get(port)


def test_a_port_in_use_costs_a_line_not_the_step(caplog):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with caplog.at_level(logging.WARNING):
            server = serve_metrics(CollectorRegistry(), {
                METRICS_PORT_ENV: str(port), METRICS_ADDR_ENV: "127.0.0.1"})
    assert server is None
    assert "could not serve /metrics" in caplog.text


def test_a_step_serves_its_rows_and_seconds():
    port = free_port()
    environ = {METRICS_PORT_ENV: str(port), METRICS_ADDR_ENV: "127.0.0.1",
               "SYNTHFACTORY_TASK_ID": "join_chunks"}
    metrics = step_metrics("join", environ)
    assert isinstance(metrics, StepMetrics)
    try:
        metrics.finished({"generated": 10, "joined": 9, "rejected": 1})
        text = _get(port)
        assert 'synthfactory_step_rows_out{' in text and 'task="join_chunks"' in text
        assert "synthfactory_step_running{" in text
    finally:
        metrics.close()
