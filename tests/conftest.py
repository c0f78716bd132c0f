"""Suite-wide rule (docs/adr/0065): with ``CI=true`` a skip is a failure.

Every skip in this suite means a service or an environment is missing (PostgreSQL,
the prepared model, .venv-worker, moto). On a developer's machine that may be fine;
in CI it would turn a broken set-up into a green run, so there the skip is reported
as a failure carrying the skip's own reason. xfail is left alone.
"""

from __future__ import annotations

import os

import pytest

# Shared fixtures and hooks (tests/support/); pytest honours pytest_plugins only here.
pytest_plugins = ["tests.support.git_clean", "tests.support.moto", "tests.support.dag_run",
                  "tests.support.scheduler", "tests.support.celery_deployment",
                  "tests.support.heavy_guard", "tests.support.session_teardown",
                  "pytester"]

CI_VALUES = {"1", "true", "yes"}


def ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in CI_VALUES


def _reason(longrepr) -> str:
    # a skip's longrepr is (file, line, "Skipped: reason")
    return longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)


def _fail_instead(report) -> None:
    report.outcome = "failed"
    report.longrepr = ("CI=true: a skip is a failure (missing service or environment): "
                       + _reason(report.longrepr))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if ci() and report.skipped and not hasattr(report, "wasxfail"):
        _fail_instead(report)
    return report


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector):
    report = yield  # a module-level importorskip or pytest.skip(allow_module_level=True)
    if ci() and report.skipped:
        _fail_instead(report)
    return report
