"""A session fixture of the suite's own ends after its last user, and the modules sharing one
of the heaviest run together (tests/support/session_teardown.py). Each case runs a small
suite of its own (pytester, in a subprocess) whose fixtures write what happened when."""

from __future__ import annotations

import pytest

from tests.support.paths import ROOT

CONFTEST = """
from pathlib import Path
import pytest
pytest_plugins = ["tests.support.session_teardown"]
LOG = Path(__file__).parent / "log.txt"

def note(line):
    with LOG.open("a") as f:
        f.write(line + "\\n")

@pytest.fixture(scope="session")
def service():
    note("service up")
    yield
    note("service down")

@pytest.fixture(scope="session")
def dag_run(service):  # one of GROUPED, on top of another session fixture
    note("dag_run up")
    yield
    note("dag_run down")
"""


@pytest.fixture
def suite(pytester, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    pytester.makeconftest(CONFTEST)
    return pytester


def _log(suite) -> list[str]:
    return (suite.path / "log.txt").read_text().splitlines()


def test_a_session_fixture_ends_after_its_last_user_not_at_the_end(suite):
    """Seen failing with the early ``finish`` taken out of the plugin: "service down" came
    after "test_b runs"."""
    suite.makepyfile(
        test_a="from conftest import note\n"
               "def test_a(service):\n    note('test_a runs')\n",
        test_b="from conftest import note\n"
               "def test_b():\n    note('test_b runs')\n")
    suite.runpytest_subprocess("-q", "-p", "no:cacheprovider").assert_outcomes(passed=2)
    assert _log(suite) == ["service up", "test_a runs", "service down", "test_b runs"]


def test_modules_sharing_a_heavy_fixture_run_together_and_it_ends_once(suite):
    """test_c uses dag_run as test_a does: it runs right after test_a (test_b, which uses
    none, after both), dag_run and the service it stands on are set up once and end
    before test_b. Seen failing with the items left in the order they came: test_b ran
    between test_a and test_c, with dag_run still up."""
    use = "from conftest import note\ndef test_{0}(dag_run):\n    note('test_{0} runs')\n"
    suite.makepyfile(
        test_a=use.format("a"), test_c=use.format("c"),
        test_b="from conftest import note\n"
               "def test_b():\n    note('test_b runs')\n")
    suite.runpytest_subprocess("-q", "-p", "no:cacheprovider").assert_outcomes(passed=3)
    assert _log(suite) == ["service up", "dag_run up", "test_a runs", "test_c runs",
                           "dag_run down", "service down", "test_b runs"]
