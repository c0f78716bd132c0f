"""The trigger a deferred WaveCapacitySensor waits on in the triggerer.

The check runs in a thread (`asyncio.to_thread`) with the same synchronous client as the
sensor: one code path to test, and parsing tens of thousands of pods is CPU work that
would stall the triggerer's event loop if done on it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from synthfactory_airflow.plugins.capacity.check import CapacityCheck
from synthfactory_airflow.plugins.capacity.metrics import push_figures

# A blip of the API server must not end a wait of hours; a broken config must end it.
MAX_CONSECUTIVE_ERRORS = 3


class WaveCapacityTrigger(BaseTrigger):
    """Polls until the wave fits; fires {"status": "success" | "never" | "error", ...}."""

    def __init__(self, check: dict[str, Any], poke_interval: float = 60.0,
                 metrics: dict[str, Any] | None = None) -> None:
        super().__init__()
        self.check = check
        self.poke_interval = poke_interval
        # the sensor's labels, wait start and try: each poll pushes as a poke would
        # (plugins/capacity/metrics.py; when the triggerer has SYNTHFACTORY_PUSHGATEWAY)
        self.metrics = metrics

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (f"{type(self).__module__}.{type(self).__qualname__}",
                {"check": self.check, "poke_interval": self.poke_interval,
                 "metrics": self.metrics})

    async def run(self) -> AsyncIterator[TriggerEvent]:
        check = CapacityCheck(**self.check)
        errors = 0
        while True:
            try:
                result = await asyncio.to_thread(check.run)
            except Exception as exc:
                errors += 1
                self.log.warning("capacity check failed (%d/%d): %s", errors,
                                 MAX_CONSECUTIVE_ERRORS, exc)
                if errors >= MAX_CONSECUTIVE_ERRORS:
                    message = f"{type(exc).__name__}: {exc}"
                    yield TriggerEvent({"status": "error", "message": message})
                    return
            else:
                errors = 0
                self.log.info("capacity check\n%s", result.table)
                if self.metrics is not None:  # a push failing costs a line, never the wait
                    try:
                        await asyncio.to_thread(push_figures, result, self.metrics)
                    except Exception as exc:
                        self.log.warning("metrics: the wave's figures were not pushed (%s)",
                                         exc)
                if result.fits:
                    yield TriggerEvent({"status": "success", "table": result.table,
                                        "xcom": result.xcom})
                    return
                if result.never:
                    yield TriggerEvent({"status": "never", "message": result.never,
                                        "table": result.table})
                    return
            await asyncio.sleep(self.poke_interval)
