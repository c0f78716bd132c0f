"""The trial process as the sweep sees it: a failing child becomes a record, a child
killed outright (the OOM killer's SIGKILL) or stuck past its limit too."""

from __future__ import annotations

import signal

from synthfactory.sweep import runner
from synthfactory.sweep.trial import describe, error_kind


def test_a_trial_that_raises_is_recorded_with_its_message_and_log(tmp_path):
    spec = {"model": str(tmp_path / "model"), "config": {}, "rows": [0],
            "shard": f"file://{tmp_path}/missing.parquet", "sampling": {"max_tokens": 4},
            "warmup_rows": 0, "warmup_tokens": 4}
    result = runner.run_trial(spec, tmp_path / "trial", timeout_s=120)
    assert result["status"] == "failed"
    assert result["returncode"] == 1
    assert "missing.parquet: not found" in result["error"]
    assert result["error_kind"] == "error"
    assert "Traceback" in result["log_tail"]
    assert result["peak_rss_mb"] > 10  # a Python process was measured


def test_a_child_that_dies_without_a_result_is_classified():
    killed = runner._why_no_result(-signal.SIGKILL, False, 60)
    assert killed["error_kind"] == "out_of_memory" and "SIGKILL" in killed["error"]
    assert runner._why_no_result(-signal.SIGSEGV, False, 60)["error_kind"] == "crashed"
    assert runner._why_no_result(None, True, 60) == {"error_kind": "timeout",
                                                      "error": "no result within 60s"}


def test_engine_messages_about_memory_are_out_of_memory():
    assert error_kind("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate") == \
        "out_of_memory"
    assert error_kind("ValueError: No available memory for the cache blocks.") == "out_of_memory"
    assert error_kind("ValueError: max_num_batched_tokens (16) must be >= 64") == "error"


def test_pydantic_style_errors_keep_the_reasons_not_the_argument_dump():
    class ValidationError(Exception):
        def errors(self):
            return [{"msg": "Value error, max_num_batched_tokens (16) must be >= 64"}]

    assert describe(ValidationError("1 validation error ... ArgsKwargs(...)")) == \
        "ValidationError: Value error, max_num_batched_tokens (16) must be >= 64"
    assert describe(KeyError("x")) == "KeyError: 'x'"
