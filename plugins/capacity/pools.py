"""Airflow pools' open slots, read from the Airflow REST API (/api/v2/pools/{name}).

Airflow 3 tasks and triggers have no metadata-DB access, and the execution API has no pool
endpoint, so the public API is the supported way in. The connection (an `http` one) names
the API server; its extra `token`, or its login and password exchanged at /auth/token,
authenticates.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

_TIMEOUT = 30


@dataclass(frozen=True)
class PoolSlots:
    pool: str
    needed: int
    open: int

    @property
    def fits(self) -> bool:
        return self.open >= self.needed

    def row(self) -> tuple[str, ...]:
        why = "fits" if self.fits else f"only {self.open} open slot(s), {self.needed} needed"
        return (f"airflow pool {self.pool}", "-", f"slots={self.needed}", f"open={self.open}",
                "-", why)


def api_base_url(conn: Any) -> str:
    host = (conn.host or "").rstrip("/")
    if "://" not in host:
        host = f"{conn.schema or 'http'}://{host}"
    if conn.port:
        host = f"{host}:{conn.port}"
    return host


def open_slots(conn_id: str, needed: Mapping[str, int]) -> list[PoolSlots]:
    """Open slots of each pool in `needed` ({pool name: slots the wave will take})."""
    import requests
    from airflow.sdk import BaseHook

    conn = BaseHook.get_connection(conn_id)
    base = api_base_url(conn)
    session = requests.Session()
    token = (conn.extra_dejson or {}).get("token")
    if not token:
        response = session.post(f"{base}/auth/token", timeout=_TIMEOUT,
                                json={"username": conn.login, "password": conn.password})
        response.raise_for_status()
        token = response.json()["access_token"]
    session.headers["Authorization"] = f"Bearer {token}"
    result = []
    for pool, slots in needed.items():
        response = session.get(f"{base}/api/v2/pools/{quote(pool, safe='')}", timeout=_TIMEOUT)
        if response.status_code == 404:
            raise ValueError(f"airflow_pools: pool {pool!r} does not exist on {base}")
        response.raise_for_status()
        result.append(PoolSlots(pool=pool, needed=int(slots),
                                open=int(response.json()["open_slots"])))
    return result
