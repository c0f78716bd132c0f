"""A KubeRay operator double for a real control plane: it turns each RayJob into a RayCluster
with a head pod and worker pods, which the real kube-scheduler places and the node agent runs,
then into a submitter Job (batch/v1, run by the real Job controller), and sets the RayJob's
``jobDeploymentStatus`` and ``jobStatus`` from the submitter's real exit, as KubeRay's
K8sJobMode does. Every object it creates is owned by the one above it (RayJob -> RayCluster ->
pods, RayJob -> Job -> pod), so deleting the RayJob removes them all through the real
garbage collector.

The status flow it writes (KubeRay v1):
``Initializing`` (RayCluster created) -> ``Running``/``PENDING`` (head and workers Running,
submitter created) -> ``Running``/``RUNNING`` (submitter pod Running) -> ``Complete`` with
``SUCCEEDED``, or ``FAILED`` and the message "Job entrypoint command failed with exit code N,
last available logs: ..." read from the submitter pod's log through the apiserver.
A suspended RayJob (Kueue's gate) is left alone until ``spec.suspend`` is false.

What it fakes: no Ray runtime runs in the head and worker pods. Their container runs ``ray
start --head|--address ... --block`` as KubeRay writes it, and the node agent maps ``ray`` to
a stand-in that blocks (``ray start`` would bind the machine's non-loopback address, where
tests must not send traffic). The submitter pod runs the entrypoint itself instead of ``ray
job submit`` to the head's dashboard, so the entrypoint's exit is the job's. No head Service,
no autoscaling, no ``ttlSecondsAfterFinished`` clean-up, no retries (``backoffLimit`` 0).
"""

from __future__ import annotations

import shlex
import threading
from typing import Any

from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from tests.kube_api.node_agent import iso

GROUP, VERSION = "ray.io", "v1"
LOG_TAIL = 20_000  # KubeRay keeps the last 20,000 characters of the driver's log


def _owner(obj: dict) -> dict:
    return {"apiVersion": obj["apiVersion"], "kind": obj["kind"],
            "name": obj["metadata"]["name"], "uid": obj["metadata"]["uid"],
            "controller": True, "blockOwnerDeletion": True}


class KubeRayDouble:
    """``start()`` reconciles the namespace's RayJobs every ``interval`` seconds."""

    def __init__(self, kubeconfig: str, namespace: str, interval: float = 0.2):
        self.namespace = namespace
        self.interval = interval
        self.api = config.new_client_from_config(str(kubeconfig))
        self.custom = client.CustomObjectsApi(self.api)
        self.core = client.CoreV1Api(self.api)
        self.batch = client.BatchV1Api(self.api)
        self.flow: dict[str, list[tuple[str, str]]] = {}  # job -> statuses written, in order
        self.errors: list[str] = []  # what the apiserver refused (a test asserts none)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> KubeRayDouble:
        self._thread = threading.Thread(target=self._loop, name="kuberay-double", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(10)
        self.api.close()

    def __enter__(self) -> KubeRayDouble:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                jobs = self.custom.list_namespaced_custom_object(
                    GROUP, VERSION, self.namespace, "rayjobs")["items"]
                for job in jobs:
                    if not job["metadata"].get("deletionTimestamp"):
                        self._reconcile(job)
            except ApiException as err:
                if err.status not in (404, 409):  # 404/409: raced with a delete or update
                    self.errors.append(f"{err.status}: {err.body}")
            except OSError:
                pass  # the apiserver is going away

    # -- reconcile ---------------------------------------------------------------------------

    def _reconcile(self, job: dict) -> None:
        name = job["metadata"]["name"]
        status = job.get("status") or {}
        if job["spec"].get("suspend"):
            if not status:
                self._status(job, {"jobDeploymentStatus": "Suspended"})
            return
        deployment = status.get("jobDeploymentStatus")
        if deployment in ("Complete", "Failed"):
            return
        if deployment in (None, "Suspended"):
            cluster = self._create_cluster(job)
            self._status(job, {"jobDeploymentStatus": "Initializing",
                               "rayClusterName": cluster, "startTime": iso()})
            return
        cluster = status["rayClusterName"]
        pods = self.core.list_namespaced_pod(
            self.namespace, label_selector=f"ray.io/cluster={cluster}").items
        if deployment == "Initializing":
            expected = 1 + sum(g.get("replicas", 1) for g in
                               job["spec"]["rayClusterSpec"].get("workerGroupSpecs", []))
            if len(pods) == expected and all(p.status.phase == "Running" for p in pods):
                self._cluster_ready(cluster)
                self._create_submitter(job)
                self._status(job, {"jobDeploymentStatus": "Running", "jobStatus": "PENDING",
                                   "jobId": name})
            return
        self._follow_submitter(job, status)

    def _create_cluster(self, job: dict) -> str:
        name = f"{job['metadata']['name']}-raycluster"
        spec = job["spec"]["rayClusterSpec"]
        body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "RayCluster",
                "metadata": {"name": name, "namespace": self.namespace,
                             "labels": dict(job["metadata"].get("labels") or {}),
                             "ownerReferences": [_owner(job)]},
                "spec": spec}
        try:
            cluster = self.custom.create_namespaced_custom_object(
                GROUP, VERSION, self.namespace, "rayclusters", body)
        except ApiException as err:
            if err.status != 409:
                raise
            cluster = self.custom.get_namespaced_custom_object(
                GROUP, VERSION, self.namespace, "rayclusters", name)
        head = spec["headGroupSpec"]
        self._pod(cluster, f"{name}-head", head["template"], "head", "headgroup",
                  ["ray", "start", "--head", "--block", "--dashboard-host=0.0.0.0",
                   *[f"--{k}={v}" for k, v in (head.get("rayStartParams") or {}).items()]])
        for group in spec.get("workerGroupSpecs", []):
            for index in range(group.get("replicas", 1)):
                self._pod(cluster, f"{name}-{group['groupName']}-worker-{index}",
                          group["template"], "worker", group["groupName"],
                          ["ray", "start", f"--address={name}-head-svc:6379", "--block",
                           *[f"--{k}={v}" for k, v in
                             (group.get("rayStartParams") or {}).items()]])
        return name

    def _pod(self, cluster: dict, name: str, template: dict, kind: str, group: str,
             command: list[str]) -> None:
        spec = dict(template["spec"])
        containers = [dict(c) for c in spec["containers"]]
        containers[0]["command"] = command
        spec.update(containers=containers, restartPolicy="Never")
        labels = {**(template.get("metadata", {}).get("labels") or {}),
                  "ray.io/cluster": cluster["metadata"]["name"], "ray.io/node-type": kind,
                  "ray.io/group": group}
        body = {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "labels": labels,
                             "ownerReferences": [_owner(cluster)]}, "spec": spec}
        try:
            self.core.create_namespaced_pod(self.namespace, body)
        except ApiException as err:
            if err.status != 409:
                raise

    def _cluster_ready(self, cluster: str) -> None:
        self.custom.patch_namespaced_custom_object_status(
            GROUP, VERSION, self.namespace, "rayclusters", cluster,
            {"status": {"state": "ready"}})

    def _create_submitter(self, job: dict) -> None:
        head = job["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]
        base = head["containers"][0]
        container = {"name": "ray-job-submitter", "image": base["image"],
                     "command": shlex.split(job["spec"]["entrypoint"]),
                     "env": base.get("env") or [], "envFrom": base.get("envFrom") or [],
                     "volumeMounts": base.get("volumeMounts") or [],
                     "resources": {"requests": {"cpu": "500m", "memory": "200Mi"}}}
        body = {"apiVersion": "batch/v1", "kind": "Job",
                "metadata": {"name": job["metadata"]["name"], "namespace": self.namespace,
                             "labels": {"ray.io/originated-from-crd": "RayJob"},
                             "ownerReferences": [_owner(job)]},
                "spec": {"backoffLimit": 0, "template": {
                    "metadata": {"labels": {"ray.io/submitter": job["metadata"]["name"]}},
                    "spec": {"restartPolicy": "Never", "containers": [container],
                             "volumes": head.get("volumes") or [],
                             "nodeSelector": head.get("nodeSelector") or {},
                             "tolerations": head.get("tolerations") or []}}}}
        try:
            self.batch.create_namespaced_job(self.namespace, body)
        except ApiException as err:
            if err.status != 409:
                raise

    def _follow_submitter(self, job: dict, status: dict) -> None:
        name = job["metadata"]["name"]
        pods = self.core.list_namespaced_pod(
            self.namespace, label_selector=f"ray.io/submitter={name}").items
        if not pods:
            return
        pod = pods[0]
        terminated = next((s.state.terminated for s in pod.status.container_statuses or []
                           if s.state and s.state.terminated), None)
        if terminated is None:
            if pod.status.phase == "Running" and status.get("jobStatus") != "RUNNING":
                self._status(job, {"jobStatus": "RUNNING"})
            return
        if terminated.exit_code == 0:
            self._status(job, {"jobDeploymentStatus": "Complete", "jobStatus": "SUCCEEDED",
                               "endTime": iso(), "message": "Job finished successfully."})
            return
        try:
            logs = self.core.read_namespaced_pod_log(pod.metadata.name, self.namespace)
        except ApiException:
            logs = ""
        self._status(job, {"jobDeploymentStatus": "Complete", "jobStatus": "FAILED",
                           "endTime": iso(),
                           "message": f"Job entrypoint command failed with exit code "
                                      f"{terminated.exit_code}, last available logs "
                                      f"(truncated to {LOG_TAIL:,} chars):\n"
                                      f"{logs[-LOG_TAIL:]}"})

    def _status(self, job: dict, update: dict[str, Any]) -> None:
        name = job["metadata"]["name"]
        status = {**(job.get("status") or {}), **update}
        self.custom.patch_namespaced_custom_object_status(
            GROUP, VERSION, self.namespace, "rayjobs", name, {"status": status})
        job["status"] = status
        self.flow.setdefault(name, []).append(
            (status.get("jobDeploymentStatus", ""), status.get("jobStatus", "")))
