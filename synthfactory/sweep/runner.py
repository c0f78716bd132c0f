"""Launch one trial process and watch it: peak resident memory of its whole process
tree (psutil, sampled), a wall-clock limit, and a failure record when the child dies
without writing one (killed by the OOM killer, a crash in native code)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil

POLL_S = 0.2
LOG_TAIL = 4000


def run_trial(spec: dict, workdir: Path, timeout_s: float) -> dict:
    workdir.mkdir(parents=True, exist_ok=True)
    spec_file, result_file, log_file = (workdir / "spec.json", workdir / "result.json",
                                        workdir / "trial.log")
    spec_file.write_text(json.dumps(spec, sort_keys=True))
    result_file.unlink(missing_ok=True)
    argv = [sys.executable, "-m", "synthfactory.sweep.trial", "--spec", str(spec_file),
            "--result", str(result_file)]
    started = time.monotonic()
    with log_file.open("w") as log:
        child = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                 start_new_session=True)  # its own group: killable as one
        peak, timed_out = _watch(child, started + timeout_s)
    _kill_group(child.pid)  # leftovers (engine-core processes) must not hold the device
    result = _read(result_file)
    if result is None:
        result = {"status": "failed", **_why_no_result(child.returncode, timed_out, timeout_s)}
    result["peak_rss_mb"] = round(max(peak / 2**20, result.pop("child_peak_rss_mb", 0.0)), 1)
    result["wall_s"] = round(time.monotonic() - started, 3)
    result["returncode"] = child.returncode
    if result["status"] != "ok":
        result["log_tail"] = log_file.read_text(errors="replace")[-LOG_TAIL:]
    return result


def _watch(child: subprocess.Popen, deadline: float) -> tuple[int, bool]:
    peak = 0
    try:
        process = psutil.Process(child.pid)
    except psutil.NoSuchProcess:
        process = None
    while child.poll() is None:
        if process is not None:
            peak = max(peak, _tree_rss(process))
        if time.monotonic() > deadline:
            _kill_group(child.pid)
            child.wait()
            return peak, True
        time.sleep(POLL_S)
    return peak, False


def _tree_rss(process: psutil.Process) -> int:
    total = 0
    try:
        for p in [process, *process.children(recursive=True)]:
            try:
                total += p.memory_info().rss
            except psutil.Error:
                pass
    except psutil.Error:
        pass
    return total


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _read(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def _why_no_result(returncode: int | None, timed_out: bool, timeout_s: float) -> dict:
    if timed_out:
        return {"error_kind": "timeout", "error": f"no result within {timeout_s:g}s"}
    if returncode is not None and returncode < 0:
        name = signal.Signals(-returncode).name
        kind = "out_of_memory" if -returncode == signal.SIGKILL else "crashed"
        hint = " (the kernel's OOM killer sends SIGKILL)" if kind == "out_of_memory" else ""
        return {"error_kind": kind, "error": f"trial process killed by {name}{hint}"}
    return {"error_kind": "crashed",
            "error": f"trial process exited with code {returncode} and no result"}
