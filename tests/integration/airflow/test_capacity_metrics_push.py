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


def test_the_wave_waiting_alert_holds_for_a_wave_still_waiting_after_half_an_hour(
        tmp_path, monkeypatch):
    """SynthfactoryWaveWaitingOnCapacity's expression, evaluated live by Debian's
    Prometheus scraping the Pushgateway the sensor pushes to: a wave whose first poke was
    31 minutes ago and that still does not fit holds it; a second run's wave, waiting for a
    minute, does not; once the first fits, it no longer holds. The rule's own text, nothing
    substituted; its ``for: 10m`` is promtool's. Break used: ``synthfactory_capacity_waiting
    == 1`` changed to ``== 2`` in the rule file: the waiting wave never holds it."""
    import time

    from tests.support.paths import ROOT
    from tests.support.prometheus import alert_rules, prometheus, query

    expr = alert_rules(ROOT / "deploy" / "prometheus" / "synthfactory-rules.yml")[
        "SynthfactoryWaveWaitingOnCapacity"]
    now = datetime.now(UTC)
    long_ago, lately = now.timestamp() - 31 * 60, now.timestamp() - 60
    runs = {"manual__2026-12-04T13:00:00+00:00": long_ago,
            "manual__2026-12-04T14:00:00+00:00": lately}

    def context(run_id: str) -> dict:
        ti = SimpleNamespace(**{**vars(_context()["ti"]), "run_id": run_id,
                                "get_first_reschedule_date": lambda _context, at=runs[run_id]:
                                datetime.fromtimestamp(at, UTC)})
        return {"ti": ti}

    def holding() -> set[str]:
        return {s["metric"].get("run_id") for s in query(url, expr)} & set(runs)

    def until(what: str, check) -> None:
        deadline = time.monotonic() + 60
        while not check():
            assert time.monotonic() < deadline, f"not within 60 s: {what} ({holding()})"
            time.sleep(0.5)

    with pushgateway() as gateway, prometheus(gateway, tmp_path, interval_s=1) as url:
        monkeypatch.setenv("SYNTHFACTORY_PUSHGATEWAY", gateway)
        first, second = runs
        for run_id in runs:
            assert not _sensor(WAITS).poke(context(run_id)).is_done
        until("the expression holds for the wave waiting 31 minutes",
              lambda: holding() == {first})
        assert _sensor(FITS).poke(context(first)).is_done
        until("it no longer holds once the wave fits", lambda: holding() == set())


def test_a_deferred_sensors_trigger_pushes_at_each_poll(gateway, monkeypatch):
    """deferrable=True: the sensor's first poke pushes, then it hands its labels, wait
    start and try to the trigger, whose polls in the triggerer push the same group (one
    group per task, waiting 1). Break used: the trigger built without the sensor's
    metrics (a push at the first poke only, as before): it carries none and the test
    fails."""
    import asyncio
    import time

    from airflow.sdk.exceptions import TaskDeferred

    from synthfactory_airflow.plugins.capacity.trigger import WaveCapacityTrigger

    monkeypatch.setenv("SYNTHFACTORY_PUSHGATEWAY", gateway)
    run = {**LABELS, "run_id": "manual__2026-12-04T15:00:00+00:00"}
    ti = SimpleNamespace(**{**vars(_context()["ti"]), "run_id": run["run_id"]})
    sensor = WaveCapacitySensor(task_id="wait_for_capacity", wave=WAITS, cluster="local",
                                mode="reschedule", poke_interval=30, timeout=600,
                                deferrable=True)
    with pytest.raises(TaskDeferred) as deferred:
        sensor.execute({"ti": ti})
    path, kwargs = deferred.value.trigger.serialize()
    assert kwargs["metrics"]["labels"]["run_id"] == run["run_id"]

    def pushed_at() -> list[float]:
        return matching(scraped(gateway, "push_time_seconds"), job="synthfactory", **run)

    (first,) = pushed_at()  # the sensor's own poke
    trigger = WaveCapacityTrigger(**{**kwargs, "poke_interval": 0.2})

    async def poll_for(seconds: float) -> None:
        events = trigger.run()
        try:
            await asyncio.wait_for(anext(events), seconds)
        except TimeoutError:
            pass
        finally:
            await events.aclose()

    time.sleep(1.1)  # push_time_seconds has a second's resolution here and there
    asyncio.run(poll_for(1.5))
    (later,) = pushed_at()
    assert later > first
    assert matching(scraped(gateway, "synthfactory_capacity_waiting"), **run) == [1]
    assert matching(scraped(gateway, "synthfactory_capacity_wait_started_timestamp_seconds"),
                    **run) == [FIRST_POKE.timestamp()]
