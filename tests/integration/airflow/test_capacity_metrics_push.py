"""The capacity sensor pushes the wave it waits for and what is short to a real Pushgateway
(Debian's, on 127.0.0.1) at each poke, under its task's labels; once the wave fits it
pushes that it no longer waits; a Pushgateway that does not answer costs a log line, not
the sensor; no Pushgateway configured, nothing is pushed."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from types import SimpleNamespace

import psutil
import pytest

from synthfactory_airflow.plugins.capacity.sensor import WaveCapacitySensor
from tests.support.ports import free_port
from tests.support.prometheus import matching, pushgateway, scraped

LABELS = {"dag_id": "synthetic_rephrase", "run_id": "manual__2026-12-04T12:00:00+00:00",
          "task": "wait_for_capacity", "map_index": "-1"}
FIRST_POKE = datetime(2026, 12, 4, 12, 0, 5, tzinfo=UTC)
# the whole machine's memory: fits an idle machine (so it waits, never fails), never this
# one, whose processes always hold some
WAITS = [{"pool": "gpu", "count": 1,
          "requests": {"cpu": "100m", "memory": str(psutil.virtual_memory().total)}}]
FITS = [{"pool": "gpu", "count": 1, "requests": {"cpu": "100m", "memory": "64Mi"}}]


@pytest.fixture(scope="module")
def gateway():
    with pushgateway() as url:
        yield url


def _context() -> dict:
    ti = SimpleNamespace(dag_id=LABELS["dag_id"], run_id=LABELS["run_id"],
                         task_id=LABELS["task"], map_index=-1, try_number=1,
                         get_first_reschedule_date=lambda context: FIRST_POKE)
    return {"ti": ti}


def _sensor(wave) -> WaveCapacitySensor:
    return WaveCapacitySensor(task_id="wait_for_capacity", wave=wave, cluster="local",
                              mode="reschedule", poke_interval=30, timeout=600)


def test_a_waiting_wave_pushes_what_is_short_then_that_it_fits(gateway, monkeypatch):
    monkeypatch.setenv("SYNTHFACTORY_PUSHGATEWAY", gateway)
    assert not _sensor(WAITS).poke(_context()).is_done
    assert matching(scraped(gateway, "synthfactory_capacity_waiting"), **LABELS) == [1]
    assert matching(scraped(gateway, "synthfactory_capacity_wait_started_timestamp_seconds"),
                    **LABELS) == [FIRST_POKE.timestamp()]
    assert matching(scraped(gateway, "synthfactory_capacity_wave_pods"), **LABELS,
                    group="gpu") == [1]
    assert matching(scraped(gateway, "synthfactory_capacity_pods_short"), **LABELS,
                    group="gpu") == [1]
    short = scraped(gateway, "synthfactory_capacity_resource_short")
    (memory,) = matching(short, **LABELS, group="gpu", resource="memory")
    assert 0 < memory < psutil.virtual_memory().total  # the memory in use, in bytes
    assert matching(short, **LABELS, group="gpu", resource="cpu") == [0]
    assert matching(scraped(gateway, "synthfactory_task_try_number"), **LABELS) == [1]
    assert matching(scraped(gateway, "push_time_seconds"), job="synthfactory", **LABELS)

    assert _sensor(FITS).poke(_context()).is_done
    assert matching(scraped(gateway, "synthfactory_capacity_waiting"), **LABELS) == [0]
    assert matching(scraped(gateway, "synthfactory_capacity_pods_short"), **LABELS,
                    group="gpu") == [0]


def test_a_pushgateway_that_does_not_answer_costs_a_line_not_the_sensor(monkeypatch, caplog):
    monkeypatch.setenv("SYNTHFACTORY_PUSHGATEWAY", f"127.0.0.1:{free_port()}")
    with caplog.at_level(logging.WARNING):
        assert not _sensor(WAITS).poke(_context()).is_done
    assert sum("did not take the wave's figures" in r.getMessage()
               for r in caplog.records) == 1


def test_no_pushgateway_nothing_pushed(gateway, monkeypatch):
    monkeypatch.delenv("SYNTHFACTORY_PUSHGATEWAY", raising=False)
    other = {**LABELS, "run_id": "manual__nothing"}
    ti = SimpleNamespace(**{**vars(_context()["ti"]), "run_id": other["run_id"]})
    assert not _sensor(WAITS).poke({"ti": ti}).is_done
    assert matching(scraped(gateway, "synthfactory_capacity_waiting"), **other) == []
