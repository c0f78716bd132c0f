"""``[core] hostname_callable`` for the Celery tests: both workers run on this one
machine, so Airflow's default (the machine's FQDN) would give their task instances the
same hostname. Each worker's name (scripts/celery_airflow.py sets
SYNTHFACTORY_CELERY_WORKER_NAME) tells them apart, as two machines' names would."""

from __future__ import annotations

import os
import socket


def hostname() -> str:
    name = os.environ.get("SYNTHFACTORY_CELERY_WORKER_NAME")
    return f"{name}.{socket.getfqdn()}" if name else socket.getfqdn()
