"""Prometheus metrics of a running step, pushed to a Pushgateway while it runs.

Names start with ``synthfactory_``. Labels are kept to a budget: ``dag_id``, ``run_id``,
``task``, ``map_index`` (the shard group), ``host`` and ``model``; never a row, a shard
name or a reason with free text (quarantine reasons are the fixed vocabularies'). A
step learns its Airflow labels from the environment its runner sets (``LABEL_ENV``);
run by hand, they are empty strings.

A step pushes only when ``SYNTHFACTORY_PUSHGATEWAY`` names a Pushgateway (``host:port``
or a URL): every ``PUSH_SECONDS`` while it runs, and once at its end, under the grouping
key ``job=synthfactory`` + the labels above but ``model`` (so two steps never overwrite
each other's group). Stitch, validate, join and register push ``synthfactory_step_*``
(their seconds while they run, their rows at their end: ``StepMetrics``, started by
cli.py around the step's run), labelled with ``step`` instead of ``model``.
In a pod (SYNTHFACTORY_METRICS_PORT set by the kubernetes runner) a step also serves its
registry on /metrics (``serve_metrics``); a local step never does. docs/metrics.md lists
the metrics.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
import urllib.request
from collections.abc import Callable, Mapping

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    delete_from_gateway,
    push_to_gateway,
    start_http_server,
)

from synthfactory.contract import METRIC_LABEL_ENV as LABEL_ENV
from synthfactory.contract import METRICS_JOB, PUSHGATEWAY_ENV, TRY_NUMBER_ENV
from synthfactory.contract.names import METRICS_ADDR_ENV, METRICS_PORT_ENV

log = logging.getLogger(__name__)

PREFIX = "synthfactory_"
PUSH_SECONDS = 15.0  # the alert on a stale group expects a push at least this often
PUSH_SECONDS_ENV = "SYNTHFACTORY_PUSH_SECONDS"  # shorter, for tests and demos
# the rate a GPU step should reach (a sweep's or `estimate`'s figure): the slow-step
# alert compares against it (deploy/prometheus/synthfactory-rules.yml)
EXPECTED_RATE_ENV = "SYNTHFACTORY_EXPECTED_TOKENS_PER_S"
# The steps besides rephrase that push their rows and seconds (cli.py wraps their run), and
# where their summary says the rows: {metric: summary key}. docs/metrics.md.
STEP_ROWS: dict[str, dict[str, str]] = {
    "stitch": {"in": "rows_in", "out": "prompt_rows", "rejected": "quarantined"},
    "validate": {"in": "rows", "out": "usable", "rejected": "rejected"},
    "join": {"in": "generated", "out": "joined", "rejected": "rejected"},
    "register": {"out": "rows"},
}
# An engine's own statistics, from its optional ``engine_stats()`` (the offline vLLM
# engine's; echo and endpoint have none): {key it returns: (metric, kind, doc)}. Gauges are
# set, counters follow the engine's cumulative figure. Sampled every push period, not per
# row (RephraseMetrics.engine). docs/metrics.md.
ENGINE_STATS: dict[str, tuple[str, str, str]] = {
    "requests_running": ("rephrase_engine_requests_running", "gauge",
                         "requests in the engine's running batch (vllm:num_requests_running)"),
    "requests_waiting": ("rephrase_engine_requests_waiting", "gauge",
                         "requests queued in the engine (vllm:num_requests_waiting)"),
    "kv_cache_usage": ("rephrase_engine_kv_cache_usage_ratio", "gauge",
                       "KV-cache blocks in use, 0 to 1 (vllm:kv_cache_usage_perc)"),
    "prefix_cache_queries": ("rephrase_engine_prefix_cache_queries", "counter",
                             "prompt tokens looked up in the prefix cache "
                             "(vllm:prefix_cache_queries)"),
    "prefix_cache_hits": ("rephrase_engine_prefix_cache_hits", "counter",
                          "prompt tokens found in the prefix cache (vllm:prefix_cache_hits)"),
}


def exported(environ: Mapping[str, str] | None = None) -> bool:
    """Whether this task's metrics go anywhere: pushed to a Pushgateway or served on a
    port. Work done only for the metrics (vLLM's stat logging) is skipped otherwise."""
    environ = os.environ if environ is None else environ
    return bool(environ.get(PUSHGATEWAY_ENV) or environ.get(METRICS_PORT_ENV))


def push_period(environ: Mapping[str, str] | None = None) -> float:
    """Seconds between pushes (and between samples of the engine's statistics)."""
    environ = os.environ if environ is None else environ
    return min(float(environ.get(PUSH_SECONDS_ENV, PUSH_SECONDS)), PUSH_SECONDS)


def step_labels(model: str, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    environ = os.environ if environ is None else environ
    return {**{label: environ.get(name, "") for label, name in LABEL_ENV.items()},
            "host": socket.gethostname(), "model": os.path.basename(model.rstrip("/"))}


class RephraseMetrics:
    """What one rephrase task exports: rows, tokens, rate, requests in flight, engine
    start-up and quarantined rows by reason."""

    def __init__(self, labels: Mapping[str, str],
                 environ: Mapping[str, str] | None = None) -> None:
        environ = os.environ if environ is None else environ
        self.labels = dict(labels)
        self.registry = CollectorRegistry()
        names = list(self.labels)

        def gauge(name: str, doc: str) -> Gauge:
            return Gauge(PREFIX + name, doc, names, registry=self.registry).labels(**self.labels)

        def counter(name: str, doc: str) -> Counter:
            return Counter(PREFIX + name, doc, names, registry=self.registry).labels(
                **self.labels)

        self.rows_planned = gauge("rephrase_rows_planned", "prompt rows of the task's shards")
        self.rows_done = gauge("rephrase_rows_done", "rows generated or quarantined so far")
        self.output_tokens = counter("rephrase_output_tokens", "output tokens generated")
        self.prompt_tokens = counter("rephrase_prompt_tokens", "prompt tokens sent")
        self.tokens_per_second = gauge("rephrase_tokens_per_second",
                                       "output tokens/s since the shard started")
        self.in_flight = gauge("rephrase_requests_in_flight", "requests in the engine")
        self.engine_startup = gauge("rephrase_engine_startup_seconds",
                                    "seconds the engine took to start")
        self._quarantined = Counter(PREFIX + "rephrase_quarantined_rows",
                                    "rows quarantined, by reason", [*names, "reason"],
                                    registry=self.registry)
        # one per attempt under each reason the gate gave it, or "usable" / "trimmed"
        self._attempts = Counter(PREFIX + "rephrase_attempts",
                                 "attempts at rows, by the worker's verdict: usable, trimmed, "
                                 "or each reason it was rejected for", [*names, "reason"],
                                 registry=self.registry)
        self.last_checkpoint = gauge("rephrase_last_checkpoint_timestamp_seconds",
                                     "when the task last saved a part (or started)")
        self.expected_rate = gauge("rephrase_expected_tokens_per_second",
                                   f"the rate this step should reach (${EXPECTED_RATE_ENV})")
        self.try_number = gauge("task_try_number", "the task's attempt (1 = first)")
        # the engine's own statistics: no series until an engine that has them is sampled
        self._engine_stats = {
            key: (Gauge if kind == "gauge" else Counter)(PREFIX + name, doc, names,
                                                         registry=self.registry)
            for key, (name, kind, doc) in ENGINE_STATS.items()}
        self._stats_seen: dict[str, float] = {}  # the counters' last engine figures
        self._stats_at: float | None = None
        self._stats_period = push_period(environ)
        self._stats_warned = False
        self._pusher: Pusher | None = None
        self._server: MetricsServer | None = None
        self._startup_s = 0.0
        self._shard_tokens = 0  # output tokens of the shards a Ray driver saw come back
        self.last_checkpoint.set_to_current_time()  # a hung start counts as a stall too
        if environ.get(EXPECTED_RATE_ENV):
            self.expected_rate.set(float(environ[EXPECTED_RATE_ENV]))
        if environ.get(TRY_NUMBER_ENV, "").isdigit():
            self.try_number.set(int(environ[TRY_NUMBER_ENV]))

    def planned(self, rows: int, done: int) -> None:
        """A shard of ``rows`` rows, ``done`` of them already (committed or resumed)."""
        self.rows_planned.inc(rows)
        self.rows_done.inc(done)

    def row(self, output_tokens: int = 0, prompt_tokens: int = 0,
            quarantined: str | None = None) -> None:
        """One row finished: generated, or quarantined for ``quarantined`` (a fixed
        reason, never the engine's free text)."""
        self.rows_done.inc()
        self.output_tokens.inc(output_tokens)
        self.prompt_tokens.inc(prompt_tokens)
        if quarantined is not None:
            self._quarantined.labels(**self.labels, reason=quarantined).inc()

    def attempt(self, reasons: list[str], repair: str | None, output_tokens: int,
                retried: bool) -> None:
        """One attempt at a row judged; a retried one's tokens count here (a row's last
        attempt counts its own in ``row``)."""
        for reason in ([repair] if repair else reasons or ["usable"]):
            self._attempts.labels(**self.labels, reason=reason).inc()
        if retried:
            self.output_tokens.inc(output_tokens)

    def checkpointed(self) -> None:
        self.last_checkpoint.set_to_current_time()

    def shard_done(self, result: Mapping[str, object], elapsed_s: float) -> None:
        """A shard a Ray replica finished, seen from the task's driver: per shard, not per
        row (the rows, the tokens and the rate so far; the engine's own statistics stay in
        the replica's process). ``elapsed_s``: since the task's driver started."""
        def count(key: str) -> int:
            value = result.get(key)
            return int(value) if isinstance(value, int | float) else 0

        self.rows_done.inc(count("rows_in"))
        if result.get("status") == "committed":  # not an earlier try's commit
            self._shard_tokens += count("output_tokens")
            self.output_tokens.inc(count("output_tokens"))
            self.prompt_tokens.inc(count("prompt_tokens"))
            startup = result.get("startup_s")
            if isinstance(startup, int | float):
                self.engine_started(float(startup))
        self.checkpointed()  # a committed shard is a committed part, and more
        if elapsed_s > 0:
            self.tokens_per_second.set(self._shard_tokens / elapsed_s)

    def engine(self, in_flight: int, tokens_per_second: float,
               stats: Callable[[], Mapping[str, float]] | None = None) -> None:
        """The worker's figures after a poll; ``stats``: the engine's ``engine_stats``
        (when it has one), sampled at most once a push period."""
        self.in_flight.set(in_flight)
        self.tokens_per_second.set(tokens_per_second)
        if stats is not None:
            self.sample_engine(stats)

    def sample_engine(self, stats: Callable[[], Mapping[str, float]],
                      force: bool = False) -> None:
        """Copy the engine's statistics (ENGINE_STATS), unless sampled less than a push
        period ago (``force``: the shard's end). An engine whose statistics fail costs
        one log line, never the task."""
        now = time.monotonic()
        if not force and self._stats_at is not None and now - self._stats_at < self._stats_period:
            return
        self._stats_at = now
        try:
            figures = dict(stats())
        except Exception as exc:  # statistics must never fail the task
            if not self._stats_warned:
                log.warning("metrics: the engine's statistics failed (%s); the task goes on",
                            exc)
                self._stats_warned = True
            return
        for key, value in figures.items():
            if key not in ENGINE_STATS or value is None:
                continue
            child = self._engine_stats[key].labels(**self.labels)
            if ENGINE_STATS[key][1] == "gauge":
                child.set(value)
                continue
            # the engine's counter is cumulative: add what it gained since the last
            # sample (a new engine in this process starts again from 0)
            last = self._stats_seen.get(key, 0.0)
            child.inc(value - last if value >= last else value)
            self._stats_seen[key] = value

    def engine_started(self, seconds: float) -> None:
        """The engine's start-up; a later shard's wait for the running engine is not one."""
        if seconds > self._startup_s:
            self._startup_s = seconds
            self.engine_startup.set(seconds)

    def start_pushing(self, environ: Mapping[str, str] | None = None) -> None:
        """Push every PUSH_SECONDS from now on, if a Pushgateway is configured; serve
        /metrics, if a port is (SYNTHFACTORY_METRICS_PORT: a pod's)."""
        if self._pusher is None:
            key = {k: v for k, v in self.labels.items() if k != "model"}
            self._pusher = start_pusher(self.registry, key, environ)
        if self._server is None:
            self._server = serve_metrics(self.registry, environ)

    def close(self) -> None:
        """The last push (the figures at the end of the task); /metrics stops."""
        _stop_exporting(self)


class StepMetrics:
    """What stitch, validate, join and register push: the step's seconds while it runs
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
        self._pusher: Pusher | None = None
        self._server: MetricsServer | None = None

    def start_pushing(self, environ: Mapping[str, str] | None = None) -> None:
        if self._pusher is None:
            self._pusher = start_pusher(self.registry, self.labels, environ)
        if self._server is None:
            self._server = serve_metrics(self.registry, environ)

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
        _stop_exporting(self)


def _stop_exporting(metrics: RephraseMetrics | StepMetrics) -> None:
    """The last push and /metrics stopped, as both close() end: each at most once."""
    if metrics._pusher is not None:
        metrics._pusher.stop()
        metrics._pusher = None
    if metrics._server is not None:
        metrics._server.stop()
        metrics._server = None


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


def step_metrics(step: str, environ: Mapping[str, str] | None = None) -> StepMetrics | None:
    """A step's metrics, pushing or served, when ``step`` is one of STEP_ROWS and a
    Pushgateway or a metrics port is configured; else None (nothing to collect for
    nobody)."""
    environ = os.environ if environ is None else environ
    if step not in STEP_ROWS or not (environ.get(PUSHGATEWAY_ENV)
                                     or environ.get(METRICS_PORT_ENV)):
        return None
    metrics = StepMetrics(step, environ)
    metrics.start_pushing(environ)
    return metrics


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
