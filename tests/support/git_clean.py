"""The suite leaves the source tree as it found it (a file a test leaves there could end
up in a commit, or change what the next run reads): ``git status --porcelain`` is taken
when the session starts and again when it ends, and a difference fails the session,
naming the paths. Tests write under temp folders or ignored paths (var/).

The contents of files already changed or untracked at the start are compared too: a
test that rewrote a file someone was editing would not change its status line. Not in
a git checkout (an sdist, an image) there is nothing to compare, and the check is off.
Deliberately off for one run: ``-p no:tests.support.git_clean``.
"""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

import pytest

BEFORE = pytest.StashKey[dict[str, str]]()


def tree_state(root: Path) -> dict[str, str] | None:
    """{status line: hash of the path's content} of every changed or untracked path,
    or None outside a git checkout."""
    try:
        out = subprocess.run(
            ["git", "status", "--porcelain=v1", "-z", "--untracked-files=all"],
            cwd=root, capture_output=True, check=True, timeout=120).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    state, entries = {}, iter(out.decode("utf-8", "replace").split("\0"))
    for entry in entries:
        if not entry:
            continue
        if entry[0] in "RC":  # a rename or copy: its source path is the next entry
            entry = f"{entry} <- {next(entries, '')}"
        path = root / entry[3:].split(" <- ")[0]
        state[entry] = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else ""
    return state


def changes(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """The status lines that appeared, disappeared or whose file changed, sorted."""
    return sorted({line for line in before.keys() | after.keys()
                   if before.get(line) != after.get(line)})


def pytest_sessionstart(session: pytest.Session) -> None:
    state = tree_state(session.config.rootpath)
    if state is not None:
        session.config.stash[BEFORE] = state


def pytest_sessionfinish(session: pytest.Session) -> None:
    before = session.config.stash.get(BEFORE, None)
    after = tree_state(session.config.rootpath) if before is not None else None
    if after is None:
        return
    changed = changes(before, after)
    if not changed:
        return
    if session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    writer = session.config.get_terminal_writer()
    writer.sep("=", "the suite changed the source tree (git status --porcelain)", red=True)
    for line in changed:
        writer.line(f"  {line.split(' <- ')[0]}", red=True)
    writer.line("tests write only under temp folders or ignored paths (var/test-results/)")
