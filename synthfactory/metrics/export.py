"""The registry's ways out: pushed to a Pushgateway, served on /metrics, a run's groups
deleted at its end. Separate from the metric sets (rephrase_task.py, step_rows.py): each
set only says what it measures, and any registry leaves the step the same way."""

from __future__ import annotations

import json
import logging
import os
import threading
import urllib.request
from collections.abc import Mapping

from prometheus_client import (
    CollectorRegistry,
    delete_from_gateway,
    push_to_gateway,
    start_http_server,
)

from synthfactory.contract import METRICS_JOB, PUSHGATEWAY_ENV
from synthfactory.contract.names import METRICS_ADDR_ENV, METRICS_PORT_ENV

log = logging.getLogger(__name__)

PREFIX = "synthfactory_"
PUSH_SECONDS = 15.0  # the alert on a stale group expects a push at least this often
PUSH_SECONDS_ENV = "SYNTHFACTORY_PUSH_SECONDS"  # shorter, for tests and demos


def exported(environ: Mapping[str, str] | None = None) -> bool:
    """Whether this task's metrics go anywhere: pushed to a Pushgateway or served on a
    port. Work done only for the metrics (vLLM's stat logging) is skipped otherwise."""
    environ = os.environ if environ is None else environ
    return bool(environ.get(PUSHGATEWAY_ENV) or environ.get(METRICS_PORT_ENV))


def push_period(environ: Mapping[str, str] | None = None) -> float:
    """Seconds between pushes (and between samples of the engine's statistics)."""
    environ = os.environ if environ is None else environ
    return min(float(environ.get(PUSH_SECONDS_ENV, PUSH_SECONDS)), PUSH_SECONDS)


class Exports:
    """How one registry leaves the process: a Pusher (when SYNTHFACTORY_PUSHGATEWAY names
    a gateway) and a /metrics server (when SYNTHFACTORY_METRICS_PORT names a port), each
    started at most once and stopped at most once. The metrics classes hold one each, so
    this module needs nothing of them."""

    def __init__(self) -> None:
        self.pusher: Pusher | None = None
        self.server: MetricsServer | None = None

    def start(self, registry: CollectorRegistry, grouping_key: Mapping[str, str],
              environ: Mapping[str, str] | None = None) -> None:
        if self.pusher is None:
            self.pusher = start_pusher(registry, grouping_key, environ)
        if self.server is None:
            self.server = serve_metrics(registry, environ)

    def stop(self) -> None:
        """The last push and /metrics stopped, as both close() end: each at most once."""
        if self.pusher is not None:
            self.pusher.stop()
            self.pusher = None
        if self.server is not None:
            self.server.stop()
            self.server = None


def start_pusher(registry: CollectorRegistry, grouping_key: Mapping[str, str],
                 environ: Mapping[str, str] | None = None) -> Pusher | None:
    """A started Pusher of ``registry`` when SYNTHFACTORY_PUSHGATEWAY names one, else None."""
    environ = os.environ if environ is None else environ
    gateway = environ.get(PUSHGATEWAY_ENV)
    if not gateway:
        return None
    pusher = Pusher(gateway, registry, grouping_key, push_period(environ))
    pusher.start()
    return pusher


class MetricsServer:
    """prometheus_client's /metrics server of one registry, in a thread of the step."""

    def __init__(self, registry: CollectorRegistry, port: int, addr: str) -> None:
        self.server, self.thread = start_http_server(port, addr=addr, registry=registry)
        self.port = self.server.server_port

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


def serve_metrics(registry: CollectorRegistry,
                  environ: Mapping[str, str] | None = None) -> MetricsServer | None:
    """Serve ``registry`` on /metrics when SYNTHFACTORY_METRICS_PORT names a port (a pod's
    named port ``metrics``, set by the kubernetes runner; never set by the local runner, so
    steps sharing a host never contend for one), on SYNTHFACTORY_METRICS_ADDR (0.0.0.0
    unset: the pod's own network). A port that cannot be bound costs a log line, never
    the step."""
    environ = os.environ if environ is None else environ
    port = environ.get(METRICS_PORT_ENV)
    if not port:
        return None
    addr = environ.get(METRICS_ADDR_ENV) or "0.0.0.0"  # a pod's own network
    try:
        server = MetricsServer(registry, int(port), addr)
    except (OSError, ValueError) as exc:
        log.warning("metrics: could not serve /metrics on %s:%s (%s); the task goes on",
                    addr, port, exc)
        return None
    log.info("metrics: serving /metrics on %s:%d", addr, server.port)
    return server


class Pusher(threading.Thread):
    """Pushes a registry every ``period`` seconds and once more on stop. A Pushgateway
    that does not answer costs a log line, never the task."""

    def __init__(self, gateway: str, registry: CollectorRegistry,
                 grouping_key: Mapping[str, str], period: float = PUSH_SECONDS) -> None:
        super().__init__(name="synthfactory-metrics-push", daemon=True)
        self.gateway, self.registry = gateway, registry
        self.grouping_key = dict(grouping_key)
        self.period = period
        self._done = threading.Event()
        self._warned = False

    def push(self) -> None:
        try:
            push_to_gateway(self.gateway, job=METRICS_JOB, registry=self.registry,
                            grouping_key=self.grouping_key, timeout=5)
        except OSError as exc:
            if not self._warned:
                log.warning("metrics: the Pushgateway at %s did not take them (%s); the "
                            "task goes on", self.gateway, exc)
                self._warned = True

    def run(self) -> None:
        self.push()
        while not self._done.wait(self.period):
            self.push()

    def stop(self) -> None:
        self._done.set()
        self.join(timeout=10)
        self.push()


def delete_run_groups(run_id: str, environ: Mapping[str, str] | None = None) -> int | None:
    """Delete every group the run's tasks pushed (write_report, at the run's end: a group
    left behind is served forever and would read as a task that stopped). Returns how many,
    None without a Pushgateway; one that does not answer costs a log line."""
    gateway = (os.environ if environ is None else environ).get(PUSHGATEWAY_ENV)
    if not gateway or not run_id:
        return None
    base = gateway if "://" in gateway else f"http://{gateway}"
    try:
        with urllib.request.urlopen(f"{base.rstrip('/')}/api/v1/metrics", timeout=10) as r:
            groups = json.load(r).get("data") or []
        keys = [group["labels"] for group in groups
                if group.get("labels", {}).get("job") == METRICS_JOB
                and group["labels"].get("run_id") == run_id]
        for labels in keys:
            delete_from_gateway(gateway, job=METRICS_JOB, timeout=10,
                                grouping_key={k: v for k, v in labels.items() if k != "job"})
    except (OSError, ValueError) as exc:
        log.warning("metrics: could not delete run %s's groups from the Pushgateway at %s "
                    "(%s)", run_id, gateway, exc)
        return None
    return len(keys)
