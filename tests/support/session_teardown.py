"""A session fixture of the suite's own ends after the last test that uses it, not when the
session ends; and the modules that share one of the heaviest run one after the other.

Why: a whole Airflow deployment (``scheduler``: scheduler, DAG processor, API server), a
Celery deployment (``celery_run``) or the DAG run's services (``dag_run``: moto, a
PostgreSQL role, Prometheus and a Pushgateway) kept running, idle, for the rest of the
session: the DAG processor re-parses, the scheduler polls, the JVM of a Spark cluster
waits. On 2 cores, every test after them ran beside them (issue 51: the suite's time).

- Early teardown: every session-scoped fixture defined under tests/ (pytest's own, such
  as ``tmp_path_factory``, are left alone) is finished right after the teardown of the
  last collected test whose fixture closure holds it. A fixture it depends on that is
  finished first finishes it too (pytest's own finalizer chain), so the order is safe.
  A later request would simply set it up again.
- Grouping: the modules using one of ``GROUPED`` are moved, whole and in their order,
  next to the first module that uses it. Tests inside a module keep their order; modules
  using none of them keep theirs.
"""

from __future__ import annotations

import pytest

# The fixtures whose users are run together (each one's set-up costs minutes)
GROUPED = ("scheduler", "celery_run", "dag_run")
LAST_USER = pytest.StashKey[dict[str, list[str]]]()


def _ours(fixturedef) -> bool:
    module = getattr(getattr(fixturedef, "func", None), "__module__", "") or ""
    return module.startswith("tests.") or module.startswith("conftest")


def _session_fixtures(item) -> list[str]:
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return []
    found = []
    for name in info.names_closure:
        defs = info.name2fixturedefs.get(name)
        if defs and defs[-1].scope == "session" and _ours(defs[-1]):
            found.append(name)
    return found


def group_modules(items: list, grouped: tuple[str, ...] = GROUPED) -> list:
    """``items`` with each module that uses a fixture of ``grouped`` moved, whole, next
    to the first module using it (the modules' own order otherwise kept)."""
    modules: dict[object, list] = {}
    for item in items:
        modules.setdefault(item.module if hasattr(item, "module") else item.parent, []
                           ).append(item)
    order = list(modules)
    first: dict[str, int] = {}
    keys = []
    for index, module in enumerate(order):
        uses = {name for item in modules[module]
                for name in getattr(item, "fixturenames", ()) if name in grouped}
        for name in sorted(uses):
            first.setdefault(name, index)
        keys.append(min((first[name] for name in uses), default=index))
    ranked = sorted(range(len(order)), key=lambda i: (keys[i], i))
    return [item for i in ranked for item in modules[order[i]]]


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(session, config, items) -> None:
    items[:] = group_modules(items)
    last: dict[str, str] = {}
    for item in items:
        for name in _session_fixtures(item):
            last[name] = item.nodeid
    ends: dict[str, list[str]] = {}
    for name, nodeid in last.items():
        ends.setdefault(nodeid, []).append(name)
    config.stash[LAST_USER] = ends


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item, nextitem):
    result = yield
    for name in item.config.stash.get(LAST_USER, {}).get(item.nodeid, []):
        defs = item._fixtureinfo.name2fixturedefs.get(name)
        if defs:
            defs[-1].finish(item._request)
    return result
