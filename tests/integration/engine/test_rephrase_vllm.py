"""The rephrase worker on the real vLLM engine (CPU build) with SmolLM2-135M-Instruct:
generate and commit, SIGKILL mid-shard then resume, and a committed shard is a no-op."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pytest

from synthfactory import hardware, storage
from synthfactory.hardware import cpu_hardware, default_dtype
from synthfactory.model import default_model_dir, is_ready
from synthfactory.rephrase.worker import read_commit
from tests.support.shards import write_real_prompt_shard

pytestmark = pytest.mark.skipif(not is_ready(default_model_dir()),
                                reason="run `synthfactory model prepare` (make setup) first")

ROWS = 24
CHECKPOINT = 4


def _rephrase(shard: str, result: Path) -> list[str]:
    return [sys.executable, "-m", "synthfactory.cli", "rephrase", "--shard", shard,
            "--model", str(default_model_dir()), "--checkpoint-rows", str(CHECKPOINT),
            "--max-in-flight", "4", "--temperature", "0"]


def _run(argv, result: Path) -> dict:
    env = {**os.environ, "SYNTHFACTORY_RESULT_FILE": str(result)}
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(result.read_text())


def _keys(run: Path, folder: str = "generated") -> list[tuple]:
    """(id, template) of each generated row; (id, template, attempt) of each attempt."""
    urls = storage.list_files(f"file://{run}/{folder}/shard-00000", suffix=".parquet")
    columns = ["id", "template_id"] + (["attempt"] if folder == "attempts" else [])
    return [key for u in urls for key in zip(*(storage.read_table(u, columns=columns)
                                               .column(c).to_pylist() for c in columns),
                                             strict=True)]


def _later_attempt_saved(run: Path) -> bool:
    try:
        return any(k[2] >= 2 for k in _keys(run, "attempts"))
    except Exception:  # a part being written this instant: look again
        return False


def test_sigkill_mid_shard_then_resume_is_exactly_once(tmp_path):
    """Killed once a later attempt of a row is in a part (the default --max-attempts 3;
    docs/adr/0141): the rerun keeps every attempt made, makes none twice, and each row
    ends in exactly one output."""
    run = tmp_path / "run"
    shard = write_real_prompt_shard(run, ROWS)
    parts = run / "generated" / "shard-00000"
    env = {**os.environ, "SYNTHFACTORY_RESULT_FILE": str(tmp_path / "killed.json")}
    victim = subprocess.Popen(_rephrase(shard, tmp_path / "killed.json"), env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 400
    while time.monotonic() < deadline and not _later_attempt_saved(run):
        assert victim.poll() is None, "worker ended before it could be killed"
        time.sleep(0.2)
    victim.send_signal(signal.SIGKILL)
    victim.wait()
    saved, tried = len(_keys(run)), _keys(run, "attempts")
    assert saved < ROWS and len(tried) >= CHECKPOINT and max(k[2] for k in tried) >= 2
    assert read_commit(f"file://{parts}") is None

    summary = _run(_rephrase(shard, tmp_path / "r.json"), tmp_path / "r.json")
    result = summary["shards"][0]
    assert result["status"] == "committed"
    assert result["resumed_rows"] == saved and result["resumed_attempts"] == len(tried)
    keys = _keys(run)
    assert len(keys) == len(set(keys)) == ROWS  # nothing lost, nothing duplicated
    attempts = _keys(run, "attempts")
    assert set(tried) <= set(attempts)  # the attempts made before the kill are kept
    assert len(attempts) == len(set(attempts))  # and none was made twice
    by_row: dict[tuple, list[int]] = {}
    for doc, template, k in attempts:
        by_row.setdefault((doc, template), []).append(k)
    assert all(sorted(ks) == list(range(1, len(ks) + 1)) and len(ks) <= 3
               for ks in by_row.values())
    commit = read_commit(f"file://{parts}")
    assert commit["rows_generated"] + commit["rows_quarantined"] == ROWS
    assert commit["attempts"]["made"] == len(attempts) > ROWS
    assert commit["output_tokens"] > 0 and commit["device"] == "cpu"
    # the dtype this CPU runs fastest, and why, as vLLM itself configured it (ADR 0130):
    # float32 on an AVX2-only CPU (bfloat16 emulated there ran 4.2x slower)
    dtype, reason = default_dtype(cpu_hardware())
    choice = commit["engine_choice"]
    assert choice["dtype"] == commit["engine_args"]["dtype"] == dtype
    assert choice["dtype_reason"] == reason
    # the reason names the flags that decided it, and each is one this CPU has
    named = set(reason.rsplit("(", 1)[1].rstrip(")").split(","))
    assert named and named <= set(hardware.isa().split(","))
    assert choice["hardware"] == {"device": "cpu", "isa": hardware.isa()}
    assert choice["engine_core"] == "inprocess" and choice["kv_cache_tokens"] >= 2048
    texts = pa.concat_tables([storage.read_table(f"file://{parts}/{p['name']}")
                              for p in commit["parts"]]).column("output_text").to_pylist()
    assert sum(len(t.split()) >= 3 for t in texts) >= ROWS // 2  # real words came out

    again = _run(_rephrase(shard, tmp_path / "a.json"), tmp_path / "a.json")
    assert again["shards"][0]["status"] == "already committed"
    assert read_commit(f"file://{parts}") == commit
