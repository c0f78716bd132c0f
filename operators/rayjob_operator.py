"""Create the wave's RayJob, wait for its status, surface the driver's failure, delete it.

Launched with the kubernetes client's CustomObjectsApi of the GPU pool's connection
(operators/kube_client.py), not the provider's resource operators: those
create and delete but do not wait for a custom resource's status (docs/adr/0057). The
wait is deferrable (``RayJobStatusTrigger`` polls in the triggerer) with a polling
fallback (``deferrable=False``). The job's name is fixed per (DAG run, try), so a task
process killed while waiting reattaches to its job instead of creating a second one.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence
from typing import Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowException

from synthfactory_airflow.operators.kube_client import custom_objects
from synthfactory_airflow.operators.rayjob import (
    GROUP,
    PLURAL,
    VERSION,
    rayjob_manifest,
    wave_entrypoint,
)
from synthfactory_airflow.operators.rayjob_trigger import RayJobStatusTrigger, terminal_state

SUCCEEDED = "SUCCEEDED"


def rayjob_name(dag_id: str, run_id: str, try_number: int) -> str:
    digest = hashlib.sha1(f"{dag_id}/{run_id}".encode()).hexdigest()[:12]
    return f"synthfactory-wave-{digest}-{try_number}"


class RayJobWaveOperator(BaseOperator):
    template_fields: Sequence[str] = ("workers", "gpus_per_worker")
    ui_color = "#fde9d9"

    def __init__(self, *, kubernetes_conn_id: str, namespace: str, image: str,
                 workers: int | str, gpus_per_worker: int | str, secret_name: str,
                 kueue_queue: str | None = None, priority_class: str | None = None,
                 plan_task_id: str = "plan_shards", poll_interval: float = 30.0,
                 deferrable: bool = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.kubernetes_conn_id = kubernetes_conn_id
        self.namespace = namespace
        self.image = image
        self.workers = workers
        self.gpus_per_worker = gpus_per_worker
        self.secret_name = secret_name
        self.kueue_queue = kueue_queue
        self.priority_class = priority_class
        self.plan_task_id = plan_task_id
        self.poll_interval = poll_interval
        self.deferrable = deferrable

    def build_manifest(self, context: Any) -> dict:
        """The RayJob of this run's wave: one worker per plan group, one replica per GPU."""
        ti = context["ti"]
        name = rayjob_name(ti.dag_id, context["run_id"], ti.try_number)
        workers, gpus = int(self.workers), int(self.gpus_per_worker)
        groups = ti.xcom_pull(task_ids=self.plan_task_id)
        return rayjob_manifest(
            name=name, namespace=self.namespace, image=self.image,
            entrypoint=wave_entrypoint(groups, workers * gpus), workers=workers,
            gpus_per_worker=gpus, secret_name=self.secret_name,
            kueue_queue=self.kueue_queue or None, priority_class=self.priority_class or None,
            labels={"synthfactory.io/dag": ti.dag_id})

    def execute(self, context: Any) -> dict:
        manifest = self.build_manifest(context)
        name = self._rayjob = manifest["metadata"]["name"]  # _rayjob: for on_kill
        api = custom_objects(self.kubernetes_conn_id)
        self._create_or_reattach(api, name, manifest)
        if self.deferrable:
            self.defer(trigger=RayJobStatusTrigger(
                kubernetes_conn_id=self.kubernetes_conn_id, namespace=self.namespace,
                name=name, poll_interval=self.poll_interval), method_name="execute_complete")
        while True:  # polling fallback
            status = api.get_namespaced_custom_object(
                GROUP, VERSION, self.namespace, PLURAL, name).get("status") or {}
            if terminal_state(status):
                return self._finish(name, status)
            time.sleep(self.poll_interval)

    def execute_complete(self, context: Any, event: dict) -> dict:
        return self._finish(event["name"], event.get("status") or {}, event.get("error"))

    def _create_or_reattach(self, api, name: str, manifest: dict) -> None:
        from kubernetes.client.exceptions import ApiException

        try:
            api.create_namespaced_custom_object(GROUP, VERSION, self.namespace, PLURAL, manifest)
            self.log.info("created RayJob %s/%s: %s", self.namespace, name,
                          manifest["spec"]["entrypoint"])
        except ApiException as exc:
            if exc.status != 409:
                raise
            self.log.info("RayJob %s/%s exists (this try was restarted): reattaching",
                          self.namespace, name)

    def _finish(self, name: str, status: dict, error: str | None = None) -> dict:
        try:
            if error:
                raise AirflowException(f"RayJob {self.namespace}/{name}: {error}")
            job_status = status.get("jobStatus")
            if job_status != SUCCEEDED:
                raise AirflowException(
                    f"RayJob {self.namespace}/{name} ended {job_status or '?'} "
                    f"({status.get('jobDeploymentStatus')}): "
                    f"{status.get('message') or status.get('reason') or 'no message'}")
            return {"rayjob": name, "job_status": job_status,
                    "job_id": status.get("jobId"), "start_time": status.get("startTime"),
                    "end_time": status.get("endTime")}
        finally:
            self._delete(name)

    def _delete(self, name: str) -> None:
        from kubernetes.client.exceptions import ApiException

        try:
            custom_objects(self.kubernetes_conn_id).delete_namespaced_custom_object(
                GROUP, VERSION, self.namespace, PLURAL, name)
            self.log.info("deleted RayJob %s/%s", self.namespace, name)
        except ApiException as exc:
            if exc.status != 404:
                self.log.warning("could not delete RayJob %s/%s: %s", self.namespace, name,
                                 exc.reason)

    def on_kill(self) -> None:
        if getattr(self, "_rayjob", None):
            self._delete(self._rayjob)
