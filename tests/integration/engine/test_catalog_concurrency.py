"""Two days registering into one table at once, as the days of a backfill do.

Each register is the real `synthfactory register` in a process of its own. Both stop
at the pause point `register:commit` (data files written, the catalog not yet told), so
both transactions start from the same snapshot; released together, one commit wins and
the other must lose the race (Iceberg's optimistic concurrency), load the table afresh
and commit again. The table then holds each day's rows exactly once.

Two kinds of race: on a new table (both create the namespace and the table, then append:
pyiceberg re-applies the loser's snapshot on the winner's), and on a table of an older
schema that both evolve (pyiceberg cannot re-apply a schema change made on a schema that
moved: the loser rebuilds its whole transaction on a fresh load, synthfactory's own retry).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from synthfactory.catalog import config
from synthfactory.catalog.iceberg_table import COMMIT_PAUSE, FULL_METRICS
from synthfactory.contract import PAUSE_AT_ENV, PAUSE_MARKER_ENV, PAUSE_RELEASE_ENV
from synthfactory.contract.names import DEFAULT_CATALOG_NAME
from tests.support.paths import WORKER
from tests.support.run_folders import build_run, table_keys

DAYS = ("2026-11-27", "2026-11-28")


def _catalog_uri(request, tmp_path, database: str) -> str:
    if database == "sqlite":  # the local runner's default catalog
        return f"sqlite:///{tmp_path}/catalog/catalog.db"
    return request.getfixturevalue("postgres_uri")


def _older_table(catalog_uri: str, warehouse: str, table: str) -> None:
    """The table as an earlier version left it: only ``run_url`` (both writers add the rest)."""
    catalog = config.open_catalog(config.resolve_catalog(
        DEFAULT_CATALOG_NAME, uri=catalog_uri, warehouse=warehouse))
    try:
        catalog.create_namespace(table.split(".")[0])
        catalog.create_table(table, schema=pa.schema([pa.field("run_url", pa.string())]),
                             properties={FULL_METRICS.format("run_url"): "full"})
    finally:
        config.close_catalog(catalog)


def _wait_for(paths: list[Path], procs: list[subprocess.Popen], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not all(p.exists() for p in paths):
        for proc in procs:
            if proc.poll() is not None:
                out, _ = proc.communicate()
                pytest.fail(f"register exited with {proc.returncode} before its commit:\n{out}")
        if time.monotonic() > deadline:
            pytest.fail(f"registers did not reach {COMMIT_PAUSE} in {seconds:.0f} s")
        time.sleep(0.1)


# the schema race is the same on both databases: SQLite covers it
@pytest.mark.parametrize(("database", "table_was"), [
    ("sqlite", "new"), ("postgres", "new"), ("sqlite", "of an older schema")])
def test_two_days_registering_at_once_both_land_exactly_once(request, tmp_path, database,
                                                              table_was):
    catalog_uri = _catalog_uri(request, tmp_path, database)
    table = f"race_{uuid.uuid4().hex[:8]}.rephrased"  # a fresh namespace
    warehouse = f"file://{tmp_path}/warehouse"
    if table_was != "new":
        _older_table(catalog_uri, warehouse, table)
    runs = {day: build_run(f"file://{tmp_path}/root", pipeline="synthetic_rephrase",
                           interval=day, shard_rows=(5, 4), quarantined=1)
            for day in DAYS}
    release = tmp_path / "release"
    procs, markers = [], []
    for day, run in runs.items():
        marker = tmp_path / f"paused-{day}"
        markers.append(marker)
        env = {**os.environ, PAUSE_AT_ENV: COMMIT_PAUSE, PAUSE_MARKER_ENV: str(marker),
               PAUSE_RELEASE_ENV: str(release)}
        env.pop("SYNTHFACTORY_CATALOG_URI", None)
        procs.append(subprocess.Popen(
            [str(WORKER), "register", "--run", run.run_url, "--table", table,
             "--catalog-uri", catalog_uri, "--warehouse", warehouse,
             "--airflow-run-id", f"backfill__{day}T00:00:00+00:00"],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    try:
        # both transactions are built on the same snapshot of the table...
        _wait_for(markers, procs, 180)
        release.touch()  # ...and commit together
        outputs = [proc.communicate(timeout=180)[0] for proc in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
    for proc, out in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, out
    summaries = [json.loads(out.strip().splitlines()[-1]) for out in outputs]

    # the race was real: one of them lost at least once, said so, and committed again
    conflicts = [s["commit_conflicts"] for s in summaries]
    assert sum(conflicts) >= 1, outputs
    loser = outputs[conflicts.index(max(conflicts))]
    assert "commit conflict with another writer" in loser and "retr" in loser, loser
    if table_was != "new":  # rebuilt whole on a fresh load: synthfactory's retry, not pyiceberg's
        assert "retrying on a fresh load of the table in" in loser, loser
    assert [s["rows"] for s in summaries] == [len(runs[d].generated) for d in DAYS]

    settings = config.resolve_catalog(DEFAULT_CATALOG_NAME, uri=catalog_uri,
                                      warehouse=warehouse)  # what register opened
    catalog = config.open_catalog(settings)
    try:
        rows = catalog.load_table(table).scan().to_arrow()
        lineage = catalog.load_table(table.replace("rephrased", "runs")).scan().to_arrow()
    finally:
        config.close_catalog(catalog)
    # each day's rows exactly once, nothing else
    assert Counter(rows["run_url"].to_pylist()) == {
        runs[d].run_url: len(runs[d].generated) for d in DAYS}
    for day in DAYS:
        mine = rows.filter(pc.equal(rows["run_url"], runs[day].run_url))
        assert table_keys(mine) == runs[day].generated_keys
    assert sorted(lineage["run_url"].to_pylist()) == sorted(r.run_url for r in runs.values())
