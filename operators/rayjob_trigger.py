"""Wait for a RayJob's terminal status in the triggerer (no worker slot held meanwhile)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

# KubeRay's terminal states: the job's own status, or the deployment giving up
TERMINAL_JOB_STATUSES = {"SUCCEEDED", "FAILED", "STOPPED"}
TERMINAL_DEPLOYMENT_STATUSES = {"Complete", "Failed", "ValidationFailed"}


def terminal_state(status: dict) -> bool:
    return (status.get("jobStatus") in TERMINAL_JOB_STATUSES
            or status.get("jobDeploymentStatus") in TERMINAL_DEPLOYMENT_STATUSES)


class RayJobStatusTrigger(BaseTrigger):
    def __init__(self, kubernetes_conn_id: str, namespace: str, name: str,
                 poll_interval: float = 30.0):
        super().__init__()
        self.kubernetes_conn_id = kubernetes_conn_id
        self.namespace = namespace
        self.name = name
        self.poll_interval = poll_interval

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return ("synthfactory_airflow.operators.rayjob_trigger.RayJobStatusTrigger",
                {"kubernetes_conn_id": self.kubernetes_conn_id, "namespace": self.namespace,
                 "name": self.name, "poll_interval": self.poll_interval})

    async def run(self) -> AsyncIterator[TriggerEvent]:
        from synthfactory_airflow.operators.kube_client import custom_objects
        from synthfactory_airflow.operators.rayjob import GROUP, PLURAL, VERSION

        api = custom_objects(self.kubernetes_conn_id)  # sync client, in a thread below
        while True:
            try:
                job = await asyncio.to_thread(api.get_namespaced_custom_object, GROUP, VERSION,
                                              self.namespace, PLURAL, self.name)
            except Exception as exc:  # the job vanished, or the API is gone: say so
                yield TriggerEvent({"name": self.name, "error": f"cannot read it: {exc}"})
                return
            status = job.get("status") or {}
            if terminal_state(status):
                yield TriggerEvent({"name": self.name, "status": status})
                return
            await asyncio.sleep(self.poll_interval)
