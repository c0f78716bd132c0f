"""The GPU image's pins resolve together on PyPI: every quoted ``"name==version"`` of
docker/worker-gpu.Dockerfile (the CUDA build of vLLM, the torch it pins, the worker extra,
the GPU-only arctic-inference) goes through ``pip install --dry-run`` by .venv-worker's pip:
Python 3.11 on Linux x86_64, as in the image.

No image is built and no wheel is installed. pip reads this machine's configuration
(PIP_FIND_LINKS, /etc/pip.conf, /etc/xdg/pip: a local torch+cpu wheel folder, local
indexes, a torch cap): ``--isolated`` and ``PIP_CONFIG_FILE=os.devnull`` leave all of it
out, so PyPI's CUDA torch is what resolves. Metadata only: PEP 658 files where the index
serves them, else HTTP range requests (``fast-deps``; the index this machine reaches
serves no PEP 658 files), where pip would otherwise fetch every wheel whole, 4.6 GB.
Two sdists are downloaded whole to read their metadata: pyspark (456 MB) and
arctic-inference (0.1 MB, prepared without build isolation against .venv-worker's torch,
as the image builds it against its own; isolated, pip would first install torch 2.7.0
and its CUDA wheels to run its setup.py). 75-110 s here.

Not in ``make test`` (its traffic stays on 127.0.0.1): the file name keeps it out of
pytest's collection, and ``make check-gpu-image`` names it. Without the registry it
skips; with CI=true that skip is a failure (tests/conftest.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.request

import pytest
from packaging.utils import canonicalize_name

from tests.support.image_requirements import (
    GPU_DOCKERFILE,
    GPU_ONLY,
    dockerfile_pins,
    gpu_image_requirements,
    release,
)
from tests.support.paths import ROOT, WORKER_PYTHON

pytestmark = pytest.mark.slow

INDEX = "https://pypi.org/simple/"


def _registry_reachable() -> str | None:
    try:
        with urllib.request.urlopen(INDEX + "pip/", timeout=20) as response:
            response.read(1)
    except OSError as exc:
        return f"{INDEX} unreachable ({exc})"
    return None


def test_the_gpu_images_pins_resolve_together_on_pypi(tmp_path):
    if not WORKER_PYTHON.exists():
        pytest.skip(f"no {WORKER_PYTHON}: run `make setup`")
    unreachable = _registry_reachable()
    if unreachable:
        pytest.skip(unreachable)
    requirements = gpu_image_requirements()
    pins = dockerfile_pins(GPU_DOCKERFILE.read_text())
    assert {"vllm", "torch", *GPU_ONLY} <= set(pins)
    report_path = tmp_path / "report.json"
    # no PIP_* settings and no configuration file: --isolated alone still reads the global
    # one (/etc/pip.conf, /etc/xdg/pip/pip.conf); PIP_CONFIG_FILE=os.devnull drops them all
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env["PIP_CONFIG_FILE"] = os.devnull
    started = time.monotonic()
    done = subprocess.run(
        [str(WORKER_PYTHON), "-m", "pip", "install", "--isolated", "--dry-run",
         "--ignore-installed", "--no-build-isolation", "--use-feature=fast-deps",
         "--index-url", INDEX, "--quiet", "--report", str(report_path), *requirements],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    seconds = time.monotonic() - started
    print(f"pip install --dry-run of {len(requirements)} pins: {seconds:.0f} s")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    report = json.loads(report_path.read_text())
    resolved = {canonicalize_name(item["metadata"]["name"]): item["metadata"]["version"]
                for item in report["install"]}
    for name in ("vllm", "torch", *GPU_ONLY):
        assert resolved.get(name) == str(release(pins[name])), (name, resolved.get(name))
    # the CUDA build, not a local +cpu wheel
    assert "+" not in resolved["torch"]
    assert any(name.startswith("nvidia-") for name in resolved), sorted(resolved)
