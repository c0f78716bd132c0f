"""The offline vLLM engine's own statistics (running and waiting requests, KV-cache use,
prefix-cache queries and hits: VllmEngine.engine_stats, from LLM.get_metrics()) reach a
real Pushgateway with the rest of a rephrase task's metrics, under the task's labels,
with sane values: SmolLM2-135M-Instruct on the CPU build, one shard."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from synthfactory.contract import METRIC_LABEL_ENV
from synthfactory.metrics import ENGINE_STATS, PREFIX
from synthfactory.model import default_model_dir, is_ready
from tests.support.prometheus import matching, pushgateway, scraped
from tests.support.shards import write_real_prompt_shard

pytestmark = pytest.mark.skipif(not is_ready(default_model_dir()),
                                reason="run `synthfactory model prepare` (make setup) first")

ROWS = 12
LABELS = {"dag_id": "synthetic_rephrase", "run_id": "manual__2026-12-04T18:00:00+00:00",
          "task": "shard.rephrase", "map_index": "0"}


def _name(key: str) -> str:
    name, kind, _ = ENGINE_STATS[key]
    return PREFIX + name + ("_total" if kind == "counter" else "")


def _ours(gateway: str, key: str) -> list[float]:
    return matching(scraped(gateway, _name(key)), **LABELS, job="synthfactory")


def test_the_offline_engines_statistics_are_pushed_with_the_tasks_metrics(tmp_path):
    shard = write_real_prompt_shard(tmp_path / "run", rows=ROWS, max_new_tokens=16)
    with pushgateway() as gateway:
        env = {**os.environ, "SYNTHFACTORY_PUSHGATEWAY": gateway,
               "SYNTHFACTORY_PUSH_SECONDS": "0.5",
               "SYNTHFACTORY_RESULT_FILE": str(tmp_path / "result.json"),
               **{METRIC_LABEL_ENV[k]: v for k, v in LABELS.items()}}
        task = subprocess.Popen(
            [sys.executable, "-m", "synthfactory.cli", "rephrase", "--shard", shard,
             "--model", str(default_model_dir()), "--checkpoint-rows", "4",
             "--max-in-flight", "6", "--temperature", "0"],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        mid_run: list[tuple[float, float]] = []  # (running, waiting) pushed while it ran
        while task.poll() is None:
            running, waiting = (_ours(gateway, k) for k in ("requests_running",
                                                           "requests_waiting"))
            if running and waiting:
                mid_run.append((running[0], waiting[0]))
            time.sleep(0.25)
        output = task.stdout.read()
        assert task.returncode == 0, output[-3000:]
        final = {key: _ours(gateway, key) for key in ENGINE_STATS}
        rows_done = matching(scraped(gateway, "synthfactory_rephrase_rows_done"), **LABELS)

    assert rows_done == [ROWS]
    assert all(len(values) == 1 for values in final.values()), final  # one series each
    stats = {key: values[0] for key, values in final.items()}
    assert stats["requests_running"] >= 0 and stats["requests_waiting"] >= 0, stats
    assert 0 <= stats["kv_cache_usage"] <= 1, stats
    # every prompt was looked up in the prefix cache; hits are a part of the lookups
    assert stats["prefix_cache_queries"] > 0, stats
    assert 0 <= stats["prefix_cache_hits"] <= stats["prefix_cache_queries"], stats
    # pushed while the task ran (sampled at the push period), never more than it holds
    assert mid_run, "no engine statistics pushed while the task ran"
    assert all(r >= 0 and w >= 0 and r + w <= 6 for r, w in mid_run), mid_run
    # the task itself is unchanged: every row generated or quarantined
    result = json.loads((tmp_path / "result.json").read_text())
    assert result["rows_generated"] + result["rows_quarantined"] == ROWS
