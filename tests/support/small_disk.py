"""A real filesystem that fills: a size-limited tmpfs mounted on a test's folder, so a
write meets ENOSPC from the kernel as on a full node disk, not a mocked error.

It needs the right to mount (root, as in CI here, or CAP_SYS_ADMIN); without it the test
is skipped, except under CI=true where a missing capability is a failure."""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


@contextlib.contextmanager
def small_disk(folder: Path, size: str = "1m") -> Iterator[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs",
                              str(folder)], capture_output=True, text=True)
    if mounted.returncode != 0:
        reason = f"cannot mount a {size} tmpfs on {folder}: {mounted.stderr.strip()}"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)
