"""An engine's own statistics (its optional ``engine_stats()``, ENGINE_STATS) in the
rephrase task's metrics: sampled at the push period, not per row; the engine's cumulative
counters become counters of the task; an engine without them (echo, endpoint) exports no
such series; statistics that fail cost one log line, never the task."""

from __future__ import annotations

import logging

from prometheus_client import generate_latest

from synthfactory.metrics import ENGINE_STATS, PREFIX, RephraseMetrics
from synthfactory.rephrase.engines import EchoEngine, VllmEngine
from synthfactory.rephrase.worker import WorkerOptions, rephrase_shard
from tests.support.shards import write_prompt_shard

LABELS = {"dag_id": "d", "run_id": "r", "task": "t", "map_index": "0", "host": "h",
          "model": "m"}


def _value(metrics: RephraseMetrics, key: str) -> float | None:
    name, kind, _ = ENGINE_STATS[key]
    return metrics.registry.get_sample_value(
        PREFIX + name + ("_total" if kind == "counter" else ""), LABELS)


class Stats:
    def __init__(self):
        self.calls = 0
        self.figures = {"requests_running": 3, "requests_waiting": 1,
                        "kv_cache_usage": 0.25, "prefix_cache_queries": 100,
                        "prefix_cache_hits": 40}

    def __call__(self):
        self.calls += 1
        return dict(self.figures)


def test_sampled_once_a_period_counters_follow_the_engines_figures():
    metrics = RephraseMetrics(LABELS, {"SYNTHFACTORY_PUSH_SECONDS": "3600"})
    stats = Stats()
    for _ in range(50):  # fifty polls within one period: one sample
        metrics.engine(2, 10.0, stats)
    assert stats.calls == 1
    assert _value(metrics, "requests_running") == 3
    assert _value(metrics, "kv_cache_usage") == 0.25
    assert _value(metrics, "prefix_cache_hits") == 40
    stats.figures.update(prefix_cache_queries=160, prefix_cache_hits=70, requests_running=0)
    metrics.sample_engine(stats, force=True)  # the shard's end
    assert stats.calls == 2
    assert _value(metrics, "prefix_cache_queries") == 160
    assert _value(metrics, "prefix_cache_hits") == 70
    assert _value(metrics, "requests_running") == 0
    # a new engine in the same process starts its counters again from 0: still counting up
    stats.figures.update(prefix_cache_queries=20, prefix_cache_hits=5)
    metrics.sample_engine(stats, force=True)
    assert _value(metrics, "prefix_cache_queries") == 180
    assert _value(metrics, "prefix_cache_hits") == 75


def test_a_period_later_it_samples_again():
    metrics = RephraseMetrics(LABELS, {"SYNTHFACTORY_PUSH_SECONDS": "0"})
    stats = Stats()
    for _ in range(3):
        metrics.engine(1, 1.0, stats)
    assert stats.calls == 3


def test_statistics_that_fail_cost_one_line_not_the_task(caplog):
    metrics = RephraseMetrics(LABELS, {"SYNTHFACTORY_PUSH_SECONDS": "0"})

    def broken():
        raise RuntimeError("stat logging disabled")

    with caplog.at_level(logging.WARNING):
        for _ in range(3):
            metrics.engine(1, 1.0, broken)
    assert sum("engine's statistics failed" in r.message for r in caplog.records) == 1
    assert _value(metrics, "requests_running") is None


def test_an_engine_without_statistics_exports_none_of_them(tmp_path):
    assert not hasattr(EchoEngine(), "engine_stats")
    assert hasattr(VllmEngine, "engine_stats")
    shard = write_prompt_shard(f"file://{tmp_path}/run", 0, 8)
    metrics = RephraseMetrics(LABELS, {})
    rephrase_shard(shard, None, EchoEngine, WorkerOptions(model="m", checkpoint_rows=3,
                                                          metrics=metrics))
    text = generate_latest(metrics.registry).decode()
    assert "synthfactory_rephrase_rows_done{" in text
    for name, _, _ in ENGINE_STATS.values():
        assert f"{PREFIX}{name}{{" not in text and f"{PREFIX}{name}_total{{" not in text


def test_the_worker_samples_an_engine_that_has_them(tmp_path):
    class WithStats(EchoEngine):
        def __init__(self):
            super().__init__()
            self.stats = Stats()

        def engine_stats(self):
            return self.stats()

    engine = WithStats()
    shard = write_prompt_shard(f"file://{tmp_path}/run", 0, 8)
    metrics = RephraseMetrics(LABELS, {"SYNTHFACTORY_PUSH_SECONDS": "3600"})
    rephrase_shard(shard, None, lambda: engine, WorkerOptions(model="m", checkpoint_rows=3,
                                                              metrics=metrics))
    assert engine.stats.calls == 2  # the first poll, and the shard's end; not per row
    assert _value(metrics, "prefix_cache_queries") == 100


def test_stat_logging_is_paid_only_where_metrics_go_somewhere(monkeypatch):
    """vLLM's stat logging (which engine_stats needs) is asked for only with a
    Pushgateway or a metrics port: its cost per engine step is not measured yet. What
    VllmEngine hands vLLM's LLM is read off a stand-in ``vllm`` module (vLLM is neither
    imported nor started); --engine-args disable_log_stats wins either way."""
    import os
    import sys
    import types

    from synthfactory.metrics import exported
    from synthfactory.rephrase import engines

    assert exported({}) is False
    assert exported({"SYNTHFACTORY_PUSHGATEWAY": "127.0.0.1:9091"}) is True
    assert exported({"SYNTHFACTORY_METRICS_PORT": "9400"}) is True

    built: list[dict] = []

    class LLM:
        def __init__(self, model, **kwargs):
            built.append(kwargs)

    def engine_kwargs(environ: dict, engine_args: dict) -> dict:
        # the process environment the engine reads (and writes its settings into)
        monkeypatch.setattr(os, "environ", dict(environ))
        VllmEngine("no-model", engine_args, {"max_tokens": 8})
        return built.pop()

    # undone before the test ends: the heavy-import guard sees no vllm module left behind
    with monkeypatch.context() as patch:
        patch.setitem(sys.modules, "vllm", types.SimpleNamespace(
            LLM=LLM, SamplingParams=lambda **kw: kw))
        patch.setattr(engines, "has_cuda", lambda: False)  # no torch import either
        nowhere = engine_kwargs({}, {})
        pushed = engine_kwargs({"SYNTHFACTORY_PUSHGATEWAY": "127.0.0.1:9091"}, {})
        served = engine_kwargs({"SYNTHFACTORY_METRICS_PORT": "9400"}, {})
        told_off = engine_kwargs({"SYNTHFACTORY_METRICS_PORT": "9400"},
                                 {"disable_log_stats": True})
        told_on = engine_kwargs({}, {"disable_log_stats": False})
    assert nowhere["disable_log_stats"] is True  # nothing exported: not paid
    assert pushed["disable_log_stats"] is False and served["disable_log_stats"] is False
    assert told_off["disable_log_stats"] is True and told_on["disable_log_stats"] is False
