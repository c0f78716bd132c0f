"""The markers that keep ``make check`` fast are enforced (tests/support/heavy_guard.py):
an unmarked test that starts a heavy program or imports vLLM fails with a line naming
it; a marked one is let through; a test under tests/integration/ is ``slow`` by its
folder. Each case runs a small suite of its own (pytester)."""

from __future__ import annotations

import pytest

from tests.support.heavy_guard import heavy_program
from tests.support.paths import ROOT

CONFTEST = """
from pathlib import Path
from tests.support import heavy_guard
heavy_guard.INTEGRATION = Path(__file__).parent / "integration"
heavy_guard.HEAVY_MODULES["fake_engine"] = "vLLM"
pytest_plugins = ["tests.support.heavy_guard"]
"""
STARTS_A_CONTROL_PLANE = """
import subprocess
import pytest

{marker}
def test_it():
    try:  # swallowing the guard's exception does not hide the start
        subprocess.run(["/opt/kube/bin/kube-apiserver", "--version"])
    except Exception:
        pass
"""


@pytest.fixture
def suite(pytester, monkeypatch):
    # a pytest of its own (runpytest_subprocess): this test's guard must not see its starts
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    pytester.makeconftest(CONFTEST)
    pytester.makeini("[pytest]\nmarkers =\n slow\n kubernetes_e2e\n browser\n")
    return pytester


def test_an_unmarked_test_that_starts_a_control_plane_fails_naming_it(suite):
    suite.makepyfile(test_plane=STARTS_A_CONTROL_PLANE.format(marker=""))
    result = suite.runpytest_subprocess("-q")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*test_it is not marked slow, kubernetes_e2e, browser and "
                                 "starts a control plane (/opt/kube/bin/kube-apiserver*"])


def test_a_marked_test_starts_what_it_likes(suite):
    suite.makepyfile(test_plane=STARTS_A_CONTROL_PLANE.format(
        marker="@pytest.mark.kubernetes_e2e"))
    suite.runpytest_subprocess("-q").assert_outcomes(passed=1)


def test_an_unmarked_test_that_imports_an_engine_fails(suite):
    suite.makepyfile(fake_engine="LOADED = True\n",
                     test_engine="def test_it():\n    import fake_engine\n")
    result = suite.runpytest_subprocess("-q", "-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*starts vLLM (imports it)*"])


def test_a_test_under_integration_is_slow_by_its_folder(suite):
    suite.mkdir("integration")
    suite.makepyfile(**{"integration/test_whole_run": "def test_it():\n    pass\n",
                        "test_unit": "def test_it():\n    pass\n"})
    result = suite.runpytest_subprocess("-q", "-m", "not slow")
    result.assert_outcomes(passed=1, deselected=1)


@pytest.mark.parametrize(("argv", "what"), [
    (["/usr/bin/java", "-cp", "x"], "Spark (a JVM)"),
    (["/work/.venv/bin/python", "/work/.venv/bin/airflow", "dags", "test"], "Airflow"),
    (["python3", "-m", "airflow", "version"], "Airflow"),
    ("chromium", "a browser"),
    (["/work/.venv-worker/bin/synthfactory", "crawl"], None),
    (["git", "status"], None),
])
def test_heavy_programs_are_known_by_their_name(argv, what):
    assert heavy_program(argv) == what
