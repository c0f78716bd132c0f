"""A stand-in for the ``outlet_events`` accessor of an Airflow task's context: an
operator's ``execute`` writes ``context["outlet_events"][asset].extra``, and a test
reads back what it wrote without a scheduler."""

from __future__ import annotations


class OutletEvents(dict):
    """Asset -> an event with an ``extra`` dict, made on first access (as Airflow does)."""

    def __missing__(self, key):
        self[key] = type("Event", (), {"extra": {}})()
        return self[key]
