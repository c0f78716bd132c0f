"""What the CeleryExecutor asks of a run before any work starts (docs/celery.md).

Under Celery each task may run on another worker, on another machine: a location on one
worker's disk is gone for the next task, and a task sent to a queue no worker serves waits
forever in the broker. Both are the deployment's facts, not the Params', so they are
checked by ``check_params`` at run time, where the executor and the live workers are
known; the LocalExecutor (``make demo``, ``make standalone``) skips them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from synthfactory_airflow.operators.settings import Settings

# the Params that name a location tasks of the run read or write: each on whatever
# worker the task lands on (source: crawl lists it, stitch reads it; benchmarks: plan
# checks their columns, every validate task reads them)
SHARED_LOCATIONS = ("source", "output_root", "warehouse", "templates_url", "benchmarks")


def executor_is_celery(executor: str) -> bool:
    """``[core] executor`` may list several executors, by alias or class path."""
    return any(part.strip().rsplit(".", 1)[-1] == "CeleryExecutor"
               for part in executor.split(","))


def served_queues(timeout_s: float = 5.0) -> set[str] | None:
    """The queues the live Celery workers consume, asked over the broker; None when no
    worker answered."""
    from airflow.providers.celery.executors.celery_executor_utils import app

    answer = app.control.inspect(timeout=timeout_s).active_queues() or {}
    return {q["name"] for queues in answer.values() for q in queues} or None


def needed_queues(settings: Settings, default_queue: str) -> set[str]:
    return {settings.cpu_queue, settings.gpu_queue, default_queue}


def problems(params: Mapping[str, Any], settings: Settings, needed: Iterable[str],
             served: Callable[[], set[str] | None] = served_queues) -> list[str]:
    """One line per problem, naming the Param or the queue; empty when the run can go."""
    found = []
    if not settings.workers_share_disk:
        for name in SHARED_LOCATIONS:
            value = params.get(name)
            if isinstance(value, str) and value.startswith("file://"):
                found.append(f"{name}={value}: on one worker's disk, but under the "
                             "CeleryExecutor each task may run on another worker; use an "
                             "s3:// URL (or set SYNTHFACTORY_WORKERS_SHARE_DISK=1 where every "
                             "worker mounts the same disk)")
        uri = params.get("catalog_uri")
        if (not params.get("catalog_conn_id") and isinstance(uri, str)
                and uri.startswith("sqlite")):
            found.append(f"catalog_uri={uri}: a SQLite file on one worker's disk, but "
                         "under the CeleryExecutor register and audit may run on "
                         "different workers; use a PostgreSQL catalog (catalog_conn_id)")
    have = served()
    if have is None:
        found.append("no Celery worker answered over the broker: nothing would run")
    else:
        for queue in sorted(set(needed) - have):
            found.append(f"Celery queue {queue!r}: no worker serves it (workers serve "
                         f"{sorted(have)}); its tasks would wait forever; start a worker "
                         f"with `airflow celery worker --queues {queue}`")
    return found
