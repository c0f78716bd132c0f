"""A Ray replica started during a run (a replacement, ray_pool._Replica.warm) loads
what a shard's first rows load before it says it is ready. On two loaded cores that
first-use cost (pyarrow's datasets, pandas, the gate's models and word lists) was
20-30 s of the replacement's first shard against ~4 s for its next, while the run
waited on it: the lost-node test's budget, which counts the replacement's start, was
blown by it in CI."""

from __future__ import annotations

import subprocess
import sys

from tests.support.shards import write_prompt_shard

# A fresh interpreter: what the replica's class brings with it, then (or not) the warm-up,
# then a first shard judged (attempts and trims on, as a run's are) and committed; it
# prints the modules that shard loaded.
CHILD = """
import sys
import synthfactory.rephrase.ray_pool
from synthfactory.rephrase.engines import EchoEngine
from synthfactory.rephrase.worker import WorkerOptions, rephrase_shard, warm
if sys.argv[2] == "warm":
    warm()
before = set(sys.modules)
rephrase_shard(sys.argv[1], None, lambda: EchoEngine(),
               WorkerOptions(model="echo", max_attempts=2, repairs=True))
print(" ".join(sorted(set(sys.modules) - before)))
"""


def _first_shard_loads(tmp_path, mode: str) -> list[str]:
    shard = write_prompt_shard(f"file://{tmp_path}/{mode}", 0, rows=6)
    done = subprocess.run([sys.executable, "-c", CHILD, shard, mode], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.split()


def test_a_warmed_replicas_first_shard_loads_nothing_more(tmp_path):
    cold = _first_shard_loads(tmp_path, "cold")
    assert "pandas" in cold and "wordfreq" in cold, "a cold first shard loads them"
    assert _first_shard_loads(tmp_path, "warm") == []
