"""What every step but rephrase measures (StepMetrics): its seconds while it runs and its
storage retries; stitch, validate, join and register their rows at their end too.
Separate from rephrase's larger set (rephrase_task.py) and from how a registry is pushed
or served (export.py)."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Mapping

from prometheus_client import CollectorRegistry, Gauge

from synthfactory.contract import METRIC_LABEL_ENV as LABEL_ENV
from synthfactory.contract import PUSHGATEWAY_ENV, TRY_NUMBER_ENV
from synthfactory.contract.names import METRICS_PORT_ENV
from synthfactory.contract.steps import STEPS
from synthfactory.metrics.export import PREFIX, Exports
from synthfactory.metrics.storage import StorageRetries

# The steps besides rephrase that push their rows and seconds (cli.py wraps their run), and
# where their summary says the rows: {metric: summary key}. docs/metrics.md.
STEP_ROWS: dict[str, dict[str, str]] = {
    "stitch": {"in": "rows_in", "out": "prompt_rows", "rejected": "quarantined"},
    "validate": {"in": "rows", "out": "usable", "rejected": "rejected"},
    "join": {"in": "generated", "out": "joined", "rejected": "rejected"},
    "register": {"out": "rows"},
}


# Every step but rephrase (which pushes its own, rephrase_task.py) pushes its seconds and
# its storage retries (metrics/storage.py); only STEP_ROWS's have rows.
PUSHED = tuple(name for name in STEPS if name != "rephrase")


class StepMetrics:
    """What a step pushes: its seconds while it runs, its storage retries
    (every PUSH_SECONDS), and at its end the rows it read, wrote on and rejected (from its
    summary, STEP_ROWS). Labels: the task's, ``host`` and ``step`` (the command)."""

    def __init__(self, step: str, environ: Mapping[str, str] | None = None) -> None:
        environ = os.environ if environ is None else environ
        self.step = step
        self.labels = {**{label: environ.get(name, "") for label, name in LABEL_ENV.items()},
                       "host": socket.gethostname(), "step": step}
        self.registry = CollectorRegistry()
        names = list(self.labels)

        def gauge(name: str, doc: str) -> Gauge:
            return Gauge(PREFIX + name, doc, names, registry=self.registry)

        # rows: no sample until the step has its figures (a failed step has none)
        self._rows = {
            "in": gauge("step_rows_in", "rows the step read"),
            "out": gauge("step_rows_out", "rows the step wrote on (prompt, usable, joined, "
                                          "registered rows)"),
            "rejected": gauge("step_rows_rejected", "rows the step set aside (stitch: "
                                                    "quarantined; validate, join: rejected)"),
        }
        self.seconds = gauge("step_seconds", "seconds the step has run").labels(**self.labels)
        self.running = gauge("step_running", "1 while the step runs, 0 once it ended").labels(
            **self.labels)
        self.try_number = gauge("task_try_number", "the task's attempt (1 = first)").labels(
            **self.labels)
        self._started = time.monotonic()
        self.seconds.set_function(lambda: time.monotonic() - self._started)
        self.running.set(1)
        if environ.get(TRY_NUMBER_ENV, "").isdigit():
            self.try_number.set(int(environ[TRY_NUMBER_ENV]))
        # labels has step already; the collector sets it again to the same value
        self.registry.register(StorageRetries(self.labels, step))
        self._exports = Exports()

    def start_pushing(self, environ: Mapping[str, str] | None = None) -> None:
        self._exports.start(self.registry, self.labels, environ)

    def finished(self, summary: object) -> None:
        """The step's summary: its rows, as STEP_ROWS says where they are."""
        if not isinstance(summary, Mapping):
            return
        for metric, key in STEP_ROWS.get(self.step, {}).items():
            value = summary.get(key)
            if isinstance(value, int | float) and not isinstance(value, bool):
                self._rows[metric].labels(**self.labels).set(value)

    def close(self) -> None:
        """The step ended (done or failed): its seconds stop, and the last push."""
        seconds = time.monotonic() - self._started
        self.seconds.set_function(lambda: seconds)
        self.running.set(0)
        self._exports.stop()


def step_metrics(step: str, environ: Mapping[str, str] | None = None) -> StepMetrics | None:
    """A step's metrics, pushing or served, when ``step`` is one of PUSHED and a
    Pushgateway or a metrics port is configured; else None (nothing to collect for
    nobody)."""
    environ = os.environ if environ is None else environ
    if step not in PUSHED or not (environ.get(PUSHGATEWAY_ENV)
                                     or environ.get(METRICS_PORT_ENV)):
        return None
    metrics = StepMetrics(step, environ)
    metrics.start_pushing(environ)
    return metrics
