"""The suite's own guard (tests/support/git_clean.py): a session that changes the source
tree fails, naming the paths. Each case is a pytest session of its own in a throwaway
git checkout, as both halves of the suite run it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support.paths import ROOT

INNER_TEST = """
import os
from pathlib import Path


def test_may_write():
    for name in filter(None, os.environ.get("WRITE_INTO_TREE", "").split(",")):
        Path(name).write_text("written by a test\\n")
"""
MESSAGE = "the suite changed the source tree"


def checkout(tmp_path: Path, git: bool = True) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "pytest.ini").write_text("[pytest]\n")
    (repo / "conftest.py").write_text('pytest_plugins = ["tests.support.git_clean"]\n')
    (repo / "test_inner.py").write_text(INNER_TEST)
    (repo / "tracked.txt").write_text("as committed\n")
    (repo / ".gitignore").write_text("__pycache__/\nignored/\n")
    if git:
        for argv in (["init", "-q"], ["add", "-A"],
                     ["-c", "user.name=t", "-c", "user.email=t@127.0.0.1", "commit", "-qm", "x"]):
            subprocess.run(["git", *argv], cwd=repo, check=True, capture_output=True)
    return repo


def session(repo: Path, writes: str = "") -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_inner.py"],
        cwd=repo, capture_output=True, text=True, timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT), "WRITE_INTO_TREE": writes})


def test_writes_under_ignored_paths_pass(tmp_path):
    repo = checkout(tmp_path)
    (repo / "ignored").mkdir()
    done = session(repo, writes="ignored/artifact.png")
    assert done.returncode == 0, done.stdout + done.stderr
    assert MESSAGE not in done.stdout


def test_writes_into_the_tree_fail_the_session_naming_the_paths(tmp_path):
    repo = checkout(tmp_path)
    (repo / "ignored").mkdir()
    done = session(repo, writes="tracked.txt,picture.png,ignored/artifact.png")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "1 passed" in done.stdout  # the test itself passed: the tree failed the session
    named = done.stdout.split(MESSAGE, 1)[1]
    assert "M tracked.txt" in named and "?? picture.png" in named
    assert "ignored/" not in named


def test_rewriting_a_file_already_being_edited_is_caught(tmp_path):
    repo = checkout(tmp_path)
    (repo / "tracked.txt").write_text("someone's edit in progress\n")  # dirty before the run
    assert session(repo).returncode == 0
    done = session(repo, writes="tracked.txt")
    assert done.returncode == 1 and "M tracked.txt" in done.stdout.split(MESSAGE, 1)[1]


def test_outside_a_git_checkout_the_check_is_off(tmp_path):
    repo = checkout(tmp_path, git=False)
    done = session(repo, writes="tracked.txt")
    assert done.returncode == 0, done.stdout + done.stderr
    assert MESSAGE not in done.stdout
