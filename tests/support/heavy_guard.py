"""The markers keep the fast loop fast (docs/adr/0132): a test that starts Airflow, Spark,
vLLM, Ray, a Kubernetes control plane or a browser carries ``slow``, ``kubernetes_e2e`` or
``browser``, so that ``-m "not slow and not kubernetes_e2e and not browser"`` (``make
check``) leaves it out.

Two rules put the markers on:
- every test under ``tests/integration/`` is ``slow`` unless it carries one of the others
  (each of them starts at least one of those things; the folder says it once);
- a test anywhere else that carries none of them and still starts one of them fails, with
  a line naming what it started. Caught while it runs, setup included: a process whose
  program is one of ``HEAVY_PROGRAMS`` (Airflow's CLI, the JVM of Spark, Ray's daemons,
  the control plane, Chromium and Playwright's driver; Spark and Ray start theirs as
  processes too), and vLLM or Ray imported into the test process (vLLM's in-process
  engine starts no process of its own).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

MARKERS = ("slow", "kubernetes_e2e", "browser")
INTEGRATION = Path(__file__).resolve().parents[1] / "integration"
# program basenames (argv[0], or the script a Python runs) that start one of them
HEAVY_PROGRAMS = {
    "airflow": "Airflow", "java": "Spark (a JVM)", "spark-submit": "Spark",
    "spark-class": "Spark", "gcs_server": "Ray", "raylet": "Ray", "ray": "Ray",
    "etcd": "a control plane", "kube-apiserver": "a control plane",
    "kube-scheduler": "a control plane", "kube-controller-manager": "a control plane",
    "chromium": "a browser", "chrome": "a browser", "node": "a browser (Playwright's driver)",
}
HEAVY_MODULES = {"vllm": "vLLM", "ray": "Ray"}


class HeavyStart(Exception):
    """An unmarked test started something the fast loop leaves out."""


def heavy_program(argv) -> str | None:
    """What ``argv`` starts, if it is one of HEAVY_PROGRAMS."""
    if isinstance(argv, (str, bytes, os.PathLike)):
        argv = [argv]
    words = [os.path.basename(os.fsdecode(a)) for a in list(argv)[:3]]
    if not words:
        return None
    program = words[0]
    if program.startswith("python") and len(words) > 1:  # python path/to/airflow ...
        program = words[1] if words[1] != "-m" or len(words) < 3 else words[2]
    return HEAVY_PROGRAMS.get(program)


def _marked(item: pytest.Item) -> bool:
    return any(item.get_closest_marker(name) for name in MARKERS)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if INTEGRATION in Path(str(item.path)).resolve().parents and not _marked(item):
            item.add_marker(pytest.mark.slow)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item):
    return (yield from _guarded(item))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    return (yield from _guarded(item))


def _guarded(item: pytest.Item):
    if _marked(item):
        return (yield)
    started: list[str] = []
    before = set(sys.modules)
    original = subprocess.Popen.__init__

    def guarded_init(self, args, *rest, **kwargs):
        what = heavy_program(args)
        if what is not None:
            started.append(f"{what} ({' '.join(map(str, list(args)[:3]))})"
                           if not isinstance(args, (str, bytes)) else f"{what} ({args})")
            raise HeavyStart(f"{item.nodeid} starts {what}: mark it "
                             f"{' or '.join(MARKERS)}")
        original(self, args, *rest, **kwargs)

    subprocess.Popen.__init__ = guarded_init
    try:
        result = yield
    finally:
        subprocess.Popen.__init__ = original
    imported = [what for module, what in HEAVY_MODULES.items()
                if module in sys.modules and module not in before]
    if started or imported:
        pytest.fail(f"{item.nodeid} is not marked {', '.join(MARKERS)} and starts "
                    f"{', '.join(started + [f'{w} (imports it)' for w in imported])}",
                    pytrace=False)
    return result
