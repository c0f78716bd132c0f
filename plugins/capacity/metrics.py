"""What the capacity sensor pushes to the Pushgateway at each poke (docs/metrics.md): the
wave it waits for and what is short, so that a wave waiting on capacity too long alerts
(deploy/prometheus/synthfactory-rules.yml, SynthfactoryWaveWaitingOnCapacity).

Same job, label scheme and grouping key as the steps' metrics (synthfactory/metrics.py):
``job=synthfactory`` + ``dag_id``, ``run_id``, ``task``, ``map_index``, and ``host``; per
series only ``group`` (the wave's pod group: a pool, or the RayJob's head and workers),
``resource`` (cpu, memory, nvidia.com/gpu, ...) or ``pool`` (an Airflow pool). Only when
``SYNTHFACTORY_PUSHGATEWAY`` is set in the worker's environment; a Pushgateway that does
not answer costs a log line, never the sensor. prometheus_client is imported only then:
the DAG file imports this module's sensor, and parsing stays cheap.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Callable, Mapping
from typing import Any

from synthfactory.contract import METRIC_LABEL_ENV, METRICS_JOB, PUSHGATEWAY_ENV
from synthfactory_airflow.plugins.capacity.quantities import CPU, PODS

log = logging.getLogger(__name__)

PREFIX = "synthfactory_capacity_"


def sensor_labels(context: Any) -> dict[str, str]:
    """``dag_id``, ``run_id``, ``task``, ``map_index`` of the sensor's task instance, and
    ``host``; empty strings outside a task."""
    ti = context.get("ti") if hasattr(context, "get") else None
    attribute = {"dag_id": "dag_id", "run_id": "run_id", "task": "task_id",
                 "map_index": "map_index"}
    values = {label: "" if ti is None else str(getattr(ti, attribute[label], ""))
              for label in METRIC_LABEL_ENV}
    return {**values, "host": socket.gethostname()}


def _amount(resource: str, value: int) -> float:
    """A quantity in the unit Prometheus users expect: cores, bytes, devices."""
    return value / 1000 if resource == CPU else float(value)


def wave_samples(result: Any, wait_started: float) -> list[tuple[str, str, dict[str, str], float]]:
    """(name, help, extra labels, value) of one check: the wave, what fits and what is
    short. ``result`` is a CheckResult (plugins/capacity/check.py)."""
    samples = [
        ("waiting", "1 while the wave does not fit, 0 once it does", {},
         0.0 if result.fits else 1.0),
        ("wait_started_timestamp_seconds", "when the sensor began waiting for the wave", {},
         wait_started),
    ]
    for group in (result.fit.groups if result.fit is not None else []):
        labels = {"group": group.group.name}
        samples += [
            ("wave_pods", "pods of the wave's group", labels, float(group.group.count)),
            ("pods_short", "pods of the group no node can take now", labels,
             float(max(group.group.count - group.placed, 0))),
        ]
        for resource in group.group.shown_resources:
            if resource == PODS:
                continue
            needed = group.group.requests[resource] * group.group.count
            short = max(needed - group.free.get(resource, 0), 0)
            samples.append(("resource_short",
                            "the group's requests past the free capacity of the nodes it "
                            "may use (cores, bytes, devices)",
                            {**labels, "resource": resource}, _amount(resource, short)))
    for slots in result.slots:
        samples.append(("pool_slots_short", "Airflow pool slots the wave needs past the open "
                        "ones", {"pool": slots.pool}, float(max(slots.needed - slots.open, 0))))
    return samples


def push_wave(result: Any, context: Any, wait_started: Callable[[], float],
              environ: Mapping[str, str] | None = None) -> bool:
    """Push one check's figures when a Pushgateway is configured. True when pushed.
    ``wait_started`` is asked only then (it may ask Airflow for the first reschedule)."""
    environ = os.environ if environ is None else environ
    if not environ.get(PUSHGATEWAY_ENV):
        return False
    return push_figures(result, wave_metrics(context, wait_started()), environ)


def wave_metrics(context: Any, wait_started: float) -> dict[str, Any]:
    """What a push needs besides the check: the task's labels, when the wait began and
    the try number; plain values, so a deferred sensor hands them to its trigger."""
    ti = context.get("ti") if hasattr(context, "get") else None
    tries = str(getattr(ti, "try_number", "")) if ti is not None else ""
    return {"labels": sensor_labels(context), "wait_started": wait_started,
            "try_number": int(tries) if tries.isdigit() else None}


def push_figures(result: Any, metrics: Mapping[str, Any],
                 environ: Mapping[str, str] | None = None) -> bool:
    """Push one check's figures under ``metrics`` (``wave_metrics``) when a Pushgateway
    is configured: the sensor's pokes and its trigger's polls alike. True when pushed."""
    environ = os.environ if environ is None else environ
    gateway = environ.get(PUSHGATEWAY_ENV)
    if not gateway:
        return False
    try:
        from prometheus_client import CollectorRegistry, Gauge, push_to_gateway
    except ImportError:  # an Airflow image without the airflow extra's prometheus_client
        log.warning("metrics: %s is set but prometheus_client is not installed; the sensor "
                    "goes on without pushing", PUSHGATEWAY_ENV)
        return False

    labels = dict(metrics["labels"])
    registry = CollectorRegistry()
    families: dict[str, Gauge] = {}
    for name, doc, extra, value in wave_samples(result, float(metrics["wait_started"])):
        if name not in families:
            families[name] = Gauge(PREFIX + name, doc, [*labels, *extra], registry=registry)
        families[name].labels(**labels, **extra).set(value)
    if metrics.get("try_number") is not None:
        Gauge("synthfactory_task_try_number", "the task's attempt (1 = first)",
              list(labels), registry=registry).labels(**labels).set(int(metrics["try_number"]))
    key = {k: v for k, v in labels.items() if k in METRIC_LABEL_ENV or k == "host"}
    try:
        push_to_gateway(gateway, job=METRICS_JOB, registry=registry, grouping_key=key, timeout=5)
    except OSError as exc:
        log.warning("metrics: the Pushgateway at %s did not take the wave's figures (%s); "
                    "the sensor goes on", gateway, exc)
        return False
    return True

