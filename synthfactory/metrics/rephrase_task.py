"""What one rephrase task measures (RephraseMetrics): rows, tokens, rate, attempts and the
engine's own statistics. Separate from how a registry is pushed or served (export.py) and
from the other steps' smaller set (step_rows.py)."""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Callable, Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge

from synthfactory.contract import METRIC_LABEL_ENV as LABEL_ENV
from synthfactory.contract import TRY_NUMBER_ENV
from synthfactory.metrics.export import PREFIX, Exports, push_period
from synthfactory.metrics.storage import StorageRetries

log = logging.getLogger(__name__)

# the rate a GPU step should reach (a sweep's or `estimate`'s figure): the slow-step
# alert compares against it (deploy/prometheus/synthfactory-rules.yml)
EXPECTED_RATE_ENV = "SYNTHFACTORY_EXPECTED_TOKENS_PER_S"
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
        # attempts not generated but replayed from an earlier commit (docs/adr/0150)
        self.replayed_attempts = counter("rephrase_replayed_attempts",
                                         "attempts replayed from an earlier commit, not "
                                         "generated")
        self.replayed_tokens = counter("rephrase_replayed_tokens",
                                       "output tokens replayed from an earlier commit")
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
        self.registry.register(StorageRetries(self.labels, "rephrase"))
        self._exports = Exports()
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
                retried: bool, replayed: bool = False) -> None:
        """One attempt at a row judged; a retried one's tokens count here (a row's last
        attempt counts its own in ``row``), a replayed one's apart, as replayed."""
        for reason in ([repair] if repair else reasons or ["usable"]):
            self._attempts.labels(**self.labels, reason=reason).inc()
        if replayed:
            self.replayed_attempts.inc()
            self.replayed_tokens.inc(output_tokens)
        elif retried:
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
        key = {k: v for k, v in self.labels.items() if k != "model"}
        self._exports.start(self.registry, key, environ)

    def close(self) -> None:
        """The last push (the figures at the end of the task); /metrics stops."""
        self._exports.stop()
