"""What a step's summary does on the Airflow side besides becoming XCom."""

from __future__ import annotations

from typing import Any


def attach_to_outlets(context: Any, outlets: list, summary: dict | None) -> None:
    """Put the step's summary on every outlet Asset's event, so downstream DAGs
    scheduled on the asset see the same lineage and accounting as the catalog."""
    if not summary or not outlets:
        return
    events = context["outlet_events"]
    for outlet in outlets:
        events[outlet].extra = dict(summary)
