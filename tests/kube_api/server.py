"""A Kubernetes API double: API server, scheduler and kubelet in one process, on 127.0.0.1.

What it serves (the calls cncf-kubernetes 10.25's KubernetesPodOperator and
plugins/capacity make, over plain HTTP with a bearer token from a kubeconfig):

- pods: create (POST), get, list (``labelSelector``, ``fieldSelector``, ``limit``/``continue``,
  ``watch=true``), merge-patch (labels, annotations), delete; all namespaces and one;
- ``pods/log`` with ``follow``, ``timestamps``, ``sinceSeconds``/``sinceTime``, ``tailLines``;
- ``events`` (``fieldSelector=involvedObject.name=...``);
- ``pods/exec`` over the websocket subprotocol ``v4.channel.k8s.io`` (one channel byte before
  each binary frame, 0 stdin, 1 stdout, 2 stderr, the final Status JSON on channel 3);
- nodes: list; secrets: create and get (for ``envFrom``); services: create, get, delete
  (stored only); custom objects (``/apis/GROUP/VERSION/namespaces/NS/PLURAL``, a RayJob):
  create, get, delete, stored only, their status set by the test (``set_custom_status``).

What it does, as scheduler and kubelet:

- a pod is bound to the first node whose labels hold its ``nodeSelector``, whose taints it
  tolerates and whose allocatable resources minus the requests of the pods already bound there
  hold its requests (limits stand in for missing requests); otherwise it stays ``Pending`` with
  ``PodScheduled=False/Unschedulable`` and a ``FailedScheduling`` event, and is retried;
- a bound pod's first container runs ``command + args`` as a local subprocess (own session),
  ``argv[0]`` looked up in ``commands`` (``synthfactory`` -> ``.venv-worker/bin/synthfactory``),
  with the pod's ``env`` (literal values) and ``envFrom`` secrets over ``base_env``; every
  emptyDir mount path (``/airflow/xcom`` included) is a per-pod scratch folder, and env values
  and args that start with such a path are rewritten to it, except paths inside the checkout,
  which stands in for the image (``shared_volumes`` names emptyDirs that are one folder for
  all pods instead, a node's warm cache);
- phase follows the process: ``Running``, then when every container has ended ``Succeeded`` or
  ``Failed``, the exit code in ``containerStatuses[].state.terminated``; the xcom sidecar counts
  as running until the provider's kill command reaches it over exec;
- faults on demand (``inject``): ``OOMKilled`` (the process is SIGKILLed, exit 137, reason
  OOMKilled), ``Evicted`` (every container stopped, phase Failed, reason Evicted) and
  ``Deleted`` (the pod is deleted while it runs, as ``kubectl delete`` would).

Fidelity limits (what a real cluster does and this does not): no TLS, authentication or RBAC
(any token passes); one process per pod (init containers, extra containers and restarts are not
run; ``restartPolicy`` is treated as Never); no images (the host's worker environment stands
in for the image, ``base_env`` for the image's environment); resource limits are not enforced
(an OOM kill only happens when injected); ``valueFrom``/configMaps are ignored; exec runs
``/bin/sh -c CMD`` in the xcom sidecar only, on the pod's scratch folder, and an interactive
sidecar shell understands only the provider's ``kill`` line; strategic-merge patches are applied
as JSON merge patches; deletion is immediate (no grace period, no finalizers); watches poll the
store every 50 ms and resource versions are not honoured for resuming a watch.
"""

from __future__ import annotations

import asyncio
import base64
import copy
import datetime as dt
import itertools
import json
import os
import secrets as token_source
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import WSMsgType, web
from kubernetes.utils import parse_quantity

from .selectors import field_matches, label_matches

# The double's "image" is the host's checkout (.venv-worker, the model under var/): a real
# image holds those files outside any emptyDir, so paths inside the checkout are never
# rewritten to a pod's scratch, even when the checkout itself lives under /tmp.
IMAGE_ROOT = str(Path(__file__).resolve().parents[2])

XCOM_SIDECAR = "airflow-xcom-sidecar"
XCOM_PATH = "/airflow/xcom"
EXEC_PROTOCOL = "v4.channel.k8s.io"
STATUS_CHANNEL = 3
FAULTS = ("OOMKilled", "Evicted", "Deleted")


def now_iso() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _log_stamp(at: float) -> str:
    # RFC 3339 with nanoseconds, as the kubelet prefixes lines when timestamps=true
    base = dt.datetime.fromtimestamp(at, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{base}.{int((at % 1) * 1e9):09d}Z"


def node(name: str, labels: dict[str, str], cpu: str, memory: str, gpus: int = 0,
         max_pods: str = "110", taints: list[dict] | None = None) -> dict:
    """A Ready node; GPU nodes get the usual nvidia.com/gpu NoSchedule taint."""
    allocatable = {"cpu": cpu, "memory": memory, "pods": max_pods}
    if gpus:
        allocatable["nvidia.com/gpu"] = str(gpus)
        taints = taints if taints is not None else [
            {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "uid": str(uuid.uuid4()), "resourceVersion": "1",
                         "labels": {"kubernetes.io/hostname": name, **labels}},
            "spec": {"taints": taints or []},
            "status": {"allocatable": allocatable, "capacity": dict(allocatable),
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def status_body(code: int, reason: str, message: str) -> dict:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": code}


@dataclass
class Container:
    name: str
    image: str
    state: dict = field(default_factory=lambda: {"waiting": {"reason": "ContainerCreating"}})

    def status(self) -> dict:
        running = "running" in self.state
        return {"name": self.name, "image": self.image, "imageID": f"double://{self.image}",
                "containerID": f"double://{self.name}", "ready": running, "started": running,
                "restartCount": 0, "state": copy.deepcopy(self.state)}

    def terminate(self, code: int, reason: str) -> None:
        if "terminated" in self.state:
            return
        started = self.state.get("running", {}).get("startedAt", now_iso())
        self.state = {"terminated": {"exitCode": code, "reason": reason, "startedAt": started,
                                     "finishedAt": now_iso()}}


@dataclass
class PodRecord:
    body: dict
    scratch: Path
    containers: list[Container]
    logs: list[tuple[float, bytes]] = field(default_factory=list)
    process: subprocess.Popen | None = None
    evicted: bool = False
    fault: str | None = None  # injected fault that explains the next exit

    @property
    def key(self) -> tuple[str, str]:
        return self.body["metadata"]["namespace"], self.body["metadata"]["name"]

    def container(self, name: str) -> Container | None:
        return next((c for c in self.containers if c.name == name), None)


class KubeApiDouble:
    """One cluster: ``start()`` serves it on 127.0.0.1, ``stop()`` kills its pods' processes.

    ``created`` lists every pod created (a snapshot of its metadata), ``deleted`` the names
    of the pods deleted through the API, ``injected`` the faults injected, ``requests``
    every request served.
    """

    def __init__(self, nodes: list[dict], workdir: Path, *, name: str = "double",
                 commands: dict[str, str] | None = None, base_env: dict[str, str] | None = None,
                 shared_volumes: dict[str, Path] | None = None):
        self.name = name
        self.nodes = nodes
        self.workdir = Path(workdir)
        self.commands = commands or {}
        self.base_env = dict(base_env if base_env is not None else os.environ)
        # emptyDir volumes by name that are one host folder for every pod, like a node's
        # warm cache (vLLM's and torch's compile caches under HOME): tests start faster
        self.shared_volumes = dict(shared_volumes or {})
        self.pods: dict[tuple[str, str], PodRecord] = {}
        self.events: list[dict] = []
        self.secrets: dict[tuple[str, str], dict] = {}
        self.services: dict[tuple[str, str], dict] = {}  # stored only: no endpoints, no DNS
        # custom objects (a RayJob...): stored only; a test plays the controller through
        # set_custom_status. Key: (group, version, namespace, plural, name)
        self.custom: dict[tuple[str, str, str, str, str], dict] = {}
        self.created: list[dict] = []
        self.deleted: list[str] = []
        self.injected: list[tuple[str, str]] = []
        self.requests: list[tuple[str, str]] = []  # (method, path) of every request served
        self.lock = threading.RLock()
        self._versions = itertools.count(2)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._scheduler: asyncio.Task | None = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self.url = ""

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> KubeApiDouble:
        self.workdir.mkdir(parents=True, exist_ok=True)
        ready = threading.Event()

        def serve() -> None:
            self._loop = asyncio.new_event_loop()
            asyncio.set_event_loop(self._loop)
            self._runner = web.AppRunner(self._app(), access_log=None)
            self._loop.run_until_complete(self._runner.setup())
            site = web.TCPSite(self._runner, "127.0.0.1", 0)
            self._loop.run_until_complete(site.start())
            port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
            self.url = f"http://127.0.0.1:{port}"
            self._scheduler = self._loop.create_task(self._schedule_forever())
            ready.set()
            self._loop.run_forever()

        self._thread = threading.Thread(target=serve, name=f"kube-api-{self.name}", daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("the Kubernetes API double did not start")
        return self

    def stop(self) -> None:
        self._stopping.set()
        with self.lock:
            for record in self.pods.values():
                self._kill(record)
        if self._loop and self._runner:
            asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop).result(10)
            self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread:
            self._thread.join(10)

    async def _shutdown(self) -> None:
        if self._scheduler is not None:
            self._scheduler.cancel()
        assert self._runner is not None
        await self._runner.cleanup()

    def __enter__(self) -> KubeApiDouble:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def kubeconfig(self, path: Path) -> Path:
        """Write a kubeconfig that points the kubernetes client at this double."""
        path.write_text(json.dumps({
            "apiVersion": "v1", "kind": "Config", "current-context": self.name,
            "clusters": [{"name": self.name, "cluster": {"server": self.url}}],
            "users": [{"name": "tester", "user": {"token": "double-token"}}],
            "contexts": [{"name": self.name,
                          "context": {"cluster": self.name, "user": "tester"}}],
        }))
        return path

    # -- test controls -----------------------------------------------------------------------

    def add_secret(self, namespace: str, name: str, data: dict[str, str]) -> None:
        encoded = {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}
        with self.lock:
            self.secrets[(namespace, name)] = {
                "apiVersion": "v1", "kind": "Secret", "type": "Opaque", "data": encoded,
                "metadata": {"name": name, "namespace": namespace, "uid": str(uuid.uuid4()),
                             "resourceVersion": str(next(self._versions))}}

    def pod_bodies(self) -> list[dict]:
        with self.lock:
            return [self._render(r) for r in self.pods.values()]

    def pod_logs(self, name: str) -> str:
        with self.lock:
            record = next(r for r in self.pods.values() if r.body["metadata"]["name"] == name)
            return b"".join(line for _, line in record.logs).decode(errors="replace")

    def inject(self, pod_name: str, fault: str, namespace: str | None = None) -> None:
        """Make a running pod fail the way a cluster does: one of ``FAULTS``."""
        if fault not in FAULTS:
            raise ValueError(f"fault: expected one of {FAULTS}, got {fault!r}")
        with self.lock:
            record = next(r for r in self.pods.values()
                          if r.body["metadata"]["name"] == pod_name
                          and namespace in (None, r.body["metadata"]["namespace"]))
            self.injected.append((pod_name, fault))
            if fault == "Deleted":
                self._delete(record)
                return
            record.fault = fault
            if fault == "Evicted":
                record.evicted = True
                self._event(record, "Warning", "Evicted",
                            "The node was low on resource: memory.")
                for c in record.containers:
                    c.terminate(137, "Error")
            else:
                self._event(record, "Warning", "OOMKilling",
                            "Memory cgroup out of memory: Killed process (synthfactory)")
            self._kill(record)
            self._touch(record)

    def wait_for(self, predicate: Callable[[], Any], timeout: float = 60,
                 what: str = "condition") -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                value = predicate()
            if value:
                return value
            time.sleep(0.05)
        raise TimeoutError(f"{self.name}: {what} not reached within {timeout}s")

    # -- store -------------------------------------------------------------------------------

    def _touch(self, record: PodRecord) -> None:
        record.body["metadata"]["resourceVersion"] = str(next(self._versions))

    def _event(self, record: PodRecord, kind: str, reason: str, message: str) -> None:
        meta = record.body["metadata"]
        for event in self.events:  # the API server folds repeats into a count
            if (event["involvedObject"]["uid"] == meta["uid"] and event["reason"] == reason
                    and event["message"] == message):
                event["count"] += 1
                event["lastTimestamp"] = now_iso()
                event["metadata"]["resourceVersion"] = str(next(self._versions))
                return
        self.events.append({
            "apiVersion": "v1", "kind": "Event", "type": kind, "reason": reason,
            "message": message, "count": 1, "firstTimestamp": now_iso(),
            "lastTimestamp": now_iso(), "source": {"component": f"{self.name}-double"},
            "metadata": {"name": f"{meta['name']}.{uuid.uuid4().hex[:12]}",
                         "namespace": meta["namespace"], "uid": str(uuid.uuid4()),
                         "resourceVersion": str(next(self._versions))},
            "involvedObject": {"kind": "Pod", "name": meta["name"],
                               "namespace": meta["namespace"], "uid": meta["uid"],
                               "apiVersion": "v1", "fieldPath": "spec.containers{base}"},
        })

    def _render(self, record: PodRecord) -> dict:
        """The pod as the API returns it, status derived from its containers."""
        body = copy.deepcopy(record.body)
        status = body["status"]
        statuses = [c.status() for c in record.containers]
        if body["spec"].get("nodeName"):
            status["containerStatuses"] = statuses
        states = [c.state for c in record.containers]
        if record.evicted:
            status.update(phase="Failed", reason="Evicted",
                          message="The node was low on resource: memory.")
        elif not body["spec"].get("nodeName") or any("waiting" in s for s in states):
            status["phase"] = "Pending"
        elif any("running" in s for s in states):
            status["phase"] = "Running"
        else:
            failed = any(s["terminated"]["exitCode"] != 0 for s in states)
            status["phase"] = "Failed" if failed else "Succeeded"
        return body

    def _create(self, namespace: str, body: dict) -> tuple[int, dict]:
        meta = body.setdefault("metadata", {})
        if not meta.get("name"):
            if not meta.get("generateName"):
                return 422, status_body(422, "Invalid", "metadata.name: Required value")
            meta["name"] = meta["generateName"] + token_source.token_hex(3)
        meta["namespace"] = namespace
        with self.lock:
            if (namespace, meta["name"]) in self.pods:
                return 409, status_body(409, "AlreadyExists",
                                        f'pods "{meta["name"]}" already exists')
            meta.update(uid=str(uuid.uuid4()), creationTimestamp=now_iso())
            meta.setdefault("labels", {})
            body["status"] = {"phase": "Pending", "qosClass": "Burstable", "conditions": []}
            scratch = self.workdir / namespace / meta["name"]
            scratch.mkdir(parents=True, exist_ok=True)
            containers = [Container(c["name"], c.get("image", "")) for c in body["spec"]
                          ["containers"]]
            record = PodRecord(body=body, scratch=scratch, containers=containers)
            self._touch(record)
            self.pods[record.key] = record
            self.created.append(copy.deepcopy(meta))
            self._try_schedule(record)
            return 201, self._render(record)

    def _delete(self, record: PodRecord) -> dict:
        self._event(record, "Normal", "Killing", "Stopping container base")
        self._kill(record)
        for c in record.containers:
            c.terminate(137, "Error")
        self.pods.pop(record.key, None)
        self.deleted.append(record.body["metadata"]["name"])
        self._touch(record)
        return self._render(record)

    # -- scheduler ---------------------------------------------------------------------------

    async def _schedule_forever(self) -> None:
        while not self._stopping.is_set():
            with self.lock:
                for record in list(self.pods.values()):
                    if not record.body["spec"].get("nodeName"):
                        self._try_schedule(record)
            await asyncio.sleep(0.2)

    def _try_schedule(self, record: PodRecord) -> None:
        need = _pod_requests(record.body)
        why: dict[str, int] = {}
        for candidate in self.nodes:
            reason = self._misfit(candidate, record.body, need)
            if reason is None:
                self._bind(record, candidate["metadata"]["name"])
                return
            why[reason] = why.get(reason, 0) + 1
        detail = ", ".join(f"{n} {r}" for r, n in sorted(why.items()))
        message = f"0/{len(self.nodes)} nodes are available: {detail}."
        record.body["status"]["conditions"] = [{
            "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
            "message": message, "lastTransitionTime": now_iso(), "lastProbeTime": None}]
        self._event(record, "Warning", "FailedScheduling", message)

    def _misfit(self, candidate: dict, pod: dict, need: dict[str, Any]) -> str | None:
        labels = candidate["metadata"].get("labels") or {}
        selector = pod["spec"].get("nodeSelector") or {}
        if any(labels.get(k) != v for k, v in selector.items()):
            return "node(s) didn't match Pod's node affinity/selector"
        tolerations = pod["spec"].get("tolerations") or []
        for taint in candidate["spec"].get("taints") or []:
            if taint.get("effect") in ("NoSchedule", "NoExecute") and not any(
                    _tolerates(t, taint) for t in tolerations):
                return f"node(s) had untolerated taint {{{taint['key']}: {taint.get('value')}}}"
        allocatable = candidate["status"]["allocatable"]
        bound = [r.body for r in self.pods.values()
                 if r.body["spec"].get("nodeName") == candidate["metadata"]["name"]
                 and self._render(r)["status"]["phase"] in ("Pending", "Running")]
        if len(bound) + 1 > int(allocatable.get("pods", "110")):
            return "Too many pods"
        for resource, amount in need.items():
            used = sum(_pod_requests(b).get(resource, 0) for b in bound)
            if used + amount > parse_quantity(allocatable.get(resource, "0")):
                return f"Insufficient {resource}"
        return None

    def _bind(self, record: PodRecord, node_name: str) -> None:
        record.body["spec"]["nodeName"] = node_name
        record.body["status"].update(hostIP="127.0.0.1", podIP="127.0.0.1",
                                     startTime=now_iso())
        record.body["status"]["conditions"] = [
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": now_iso(),
             "lastProbeTime": None}]
        self._event(record, "Normal", "Scheduled",
                    f"Successfully assigned {record.key[0]}/{record.key[1]} to {node_name}")
        self._touch(record)
        self._start(record)

    # -- kubelet -----------------------------------------------------------------------------

    def _mounts(self, record: PodRecord) -> dict[str, Path]:
        """emptyDir mount path -> the pod's scratch folder for that volume."""
        empty = {v["name"] for v in record.body["spec"].get("volumes") or []
                 if "emptyDir" in v}
        base = record.body["spec"]["containers"][0]
        mounts = {}
        for m in base.get("volumeMounts") or []:
            if m["name"] in empty:
                folder = (self.shared_volumes.get(m["name"])
                          or record.scratch / "volumes" / m["name"])
                folder.mkdir(parents=True, exist_ok=True)
                mounts[m["mountPath"].rstrip("/")] = folder
        return mounts

    def _start(self, record: PodRecord) -> None:
        spec = record.body["spec"]["containers"][0]
        base, others = record.containers[0], record.containers[1:]
        for c in others:  # the xcom sidecar (and anything else) only "runs"
            c.state = {"running": {"startedAt": now_iso()}}
        mounts = self._mounts(record)
        env = dict(self.base_env)
        namespace = record.key[0]
        for source in spec.get("envFrom") or []:
            ref = source.get("secretRef")
            if not ref:
                continue
            secret = self.secrets.get((namespace, ref["name"]))
            if secret is None:
                if ref.get("optional"):
                    continue
                base.state = {"waiting": {"reason": "CreateContainerConfigError",
                                          "message": f'secret "{ref["name"]}" not found'}}
                return
            prefix = source.get("prefix", "")
            env.update({prefix + k: base64.b64decode(v).decode()
                        for k, v in (secret.get("data") or {}).items()})
        for var in spec.get("env") or []:
            if "value" in var:
                env[var["name"]] = _rewrite(var["value"], mounts)
        argv = [_rewrite(str(a), mounts) for a in
                [*(spec.get("command") or []), *(spec.get("args") or [])]]
        program = self.commands.get(argv[0]) if argv else None
        if not program or not Path(program).exists():
            base.state = {"running": {"startedAt": now_iso()}}
            base.terminate(128, "StartError")
            self._event(record, "Warning", "Failed",
                        f"exec: {argv[:1]!r}: executable file not found in $PATH")
            return
        base.state = {"running": {"startedAt": now_iso()}}
        log_file = open(record.scratch / "base.log", "ab")  # noqa: SIM115 - closed by the reader
        record.process = subprocess.Popen(
            [program, *argv[1:]], env=env, cwd=record.scratch, stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
        self._event(record, "Normal", "Started", "Started container base")
        threading.Thread(target=self._follow, args=(record, log_file), daemon=True,
                         name=f"kubelet-{record.key[1]}").start()

    def _follow(self, record: PodRecord, log_file: Any) -> None:
        process = record.process
        assert process is not None and process.stdout is not None
        with log_file:
            for line in iter(process.stdout.readline, b""):
                log_file.write(line)
                log_file.flush()
                with self.lock:
                    record.logs.append((time.time(), line))
        code = process.wait()
        with self.lock:
            base = record.containers[0]
            if record.fault == "OOMKilled":
                base.terminate(137, "OOMKilled")
            elif code < 0:  # killed by a signal: report it the way the kubelet does
                base.terminate(128 - code, "Error")
            else:
                base.terminate(code, "Completed" if code == 0 else "Error")
            self._touch(record)

    def _kill(self, record: PodRecord) -> None:
        process = record.process
        if process and process.poll() is None:
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    # -- HTTP --------------------------------------------------------------------------------

    def _app(self) -> web.Application:
        app = web.Application(middlewares=[self._record_request])
        pods = "/api/v1/namespaces/{ns}/pods"
        app.add_routes([
            web.get("/api/v1/nodes", self._list_nodes),
            web.get("/api/v1/pods", self._list_pods),
            web.get(pods, self._list_pods),
            web.post(pods, self._create_pod),
            web.get(pods + "/{name}", self._get_pod),
            web.patch(pods + "/{name}", self._patch_pod),
            web.delete(pods + "/{name}", self._delete_pod),
            web.get(pods + "/{name}/log", self._pod_log),
            web.get(pods + "/{name}/exec", self._exec),
            web.post(pods + "/{name}/exec", self._exec),
            web.get("/api/v1/namespaces/{ns}/events", self._list_events),
            web.get("/api/v1/events", self._list_events),
            web.post("/api/v1/namespaces/{ns}/secrets", self._create_secret),
            web.get("/api/v1/namespaces/{ns}/secrets/{name}", self._get_secret),
            web.post("/api/v1/namespaces/{ns}/services", self._create_service),
            web.get("/api/v1/namespaces/{ns}/services/{name}", self._service),
            web.delete("/api/v1/namespaces/{ns}/services/{name}", self._service),
            web.post("/apis/{group}/{version}/namespaces/{ns}/{plural}", self._create_custom),
            web.get("/apis/{group}/{version}/namespaces/{ns}/{plural}/{name}", self._custom),
            web.delete("/apis/{group}/{version}/namespaces/{ns}/{plural}/{name}",
                       self._custom),
        ])
        app.router.add_route("*", "/{tail:.*}", self._not_found)
        return app

    @web.middleware
    async def _record_request(self, request: web.Request, handler: Any) -> web.StreamResponse:
        with self.lock:
            self.requests.append((request.method, request.path))
        try:
            return await handler(request)
        except ConnectionResetError:  # a client gave up on a stream (log follow, watch)
            return web.Response(status=499)

    @staticmethod
    def _json(code: int, body: dict) -> web.Response:
        return web.json_response(body, status=code)

    async def _not_found(self, request: web.Request) -> web.Response:
        return self._json(404, status_body(404, "NotFound",
                                           f"the server could not find {request.path}"))

    def _record(self, request: web.Request) -> PodRecord | None:
        return self.pods.get((request.match_info["ns"], request.match_info["name"]))

    def _missing(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        return self._json(404, status_body(404, "NotFound", f'pods "{name}" not found'))

    def _page(self, items: list[dict], request: web.Request, kind: str) -> dict:
        start = int(request.query.get("continue") or 0)
        limit = int(request.query.get("limit") or 0) or len(items) or 1
        meta: dict[str, Any] = {"resourceVersion": str(next(self._versions))}
        if start + limit < len(items):
            meta["continue"] = str(start + limit)
        return {"kind": kind, "apiVersion": "v1", "metadata": meta,
                "items": items[start:start + limit]}

    async def _list_nodes(self, request: web.Request) -> web.Response:
        selector = request.query.get("labelSelector", "")
        items = [n for n in self.nodes
                 if label_matches(selector, n["metadata"].get("labels") or {})]
        return self._json(200, self._page(copy.deepcopy(items), request, "NodeList"))

    def _matching_pods(self, request: web.Request) -> list[dict]:
        namespace = request.match_info.get("ns")
        labels = request.query.get("labelSelector", "")
        fields = request.query.get("fieldSelector", "")
        with self.lock:
            rendered = [self._render(r) for r in self.pods.values()
                        if namespace in (None, r.key[0])]
        return [p for p in rendered
                if label_matches(labels, p["metadata"].get("labels") or {})
                and field_matches(fields, p)]

    async def _list_pods(self, request: web.Request) -> web.StreamResponse:
        if request.query.get("watch") in ("true", "1", "True"):
            return await self._watch_pods(request)
        return self._json(200, self._page(self._matching_pods(request), request, "PodList"))

    async def _watch_pods(self, request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(request)
        timeout = float(request.query.get("timeoutSeconds") or 60)
        deadline = time.monotonic() + timeout
        seen: dict[str, tuple[str, dict]] = {}
        while time.monotonic() < deadline and not self._stopping.is_set():
            current = {p["metadata"]["uid"]: p for p in self._matching_pods(request)}
            changes = []
            for uid, pod in current.items():
                if uid not in seen:
                    changes.append(("ADDED", pod))
                elif seen[uid][0] != pod["metadata"]["resourceVersion"]:
                    changes.append(("MODIFIED", pod))
            changes += [("DELETED", seen[uid][1]) for uid in seen if uid not in current]
            for kind, pod in changes:
                await response.write(json.dumps({"type": kind, "object": pod}).encode() + b"\n")
            seen = {uid: (p["metadata"]["resourceVersion"], p) for uid, p in current.items()}
            await asyncio.sleep(0.05)
        await response.write_eof()
        return response

    async def _create_pod(self, request: web.Request) -> web.Response:
        body = await request.json()
        if body.get("kind", "Pod") != "Pod" or not (body.get("spec") or {}).get("containers"):
            return self._json(422, status_body(422, "Invalid",
                                               "spec.containers: Required value"))
        code, created = self._create(request.match_info["ns"], body)
        return self._json(code, created)

    async def _get_pod(self, request: web.Request) -> web.Response:
        with self.lock:
            record = self._record(request)
            return self._json(200, self._render(record)) if record else self._missing(request)

    async def _patch_pod(self, request: web.Request) -> web.Response:
        patch = await request.json()
        with self.lock:
            record = self._record(request)
            if record is None:
                return self._missing(request)
            _merge(record.body, {k: v for k, v in patch.items() if k in ("metadata",)})
            self._touch(record)
            return self._json(200, self._render(record))

    async def _delete_pod(self, request: web.Request) -> web.Response:
        with self.lock:
            record = self._record(request)
            if record is None:
                return self._missing(request)
            return self._json(200, self._delete(record))

    async def _pod_log(self, request: web.Request) -> web.StreamResponse:
        with self.lock:
            record = self._record(request)
            if record is None:
                return self._missing(request)
            container = request.query.get("container") or record.containers[0].name
            if record.container(container) is None:
                return self._json(400, status_body(
                    400, "BadRequest",
                    f"container {container} is not valid for pod {record.key[1]}"))
        q = request.query
        stamps = q.get("timestamps") in ("true", "True", "1")
        since = 0.0
        if q.get("sinceSeconds"):
            since = time.time() - int(q["sinceSeconds"])
        elif q.get("sinceTime"):
            since = dt.datetime.fromisoformat(q["sinceTime"].replace("Z", "+00:00")).timestamp()
        tail = int(q["tailLines"]) if q.get("tailLines") else None
        follow = q.get("follow") in ("true", "True", "1") and container == record.containers[0].name

        def lines(start: int) -> tuple[list[bytes], int]:
            with self.lock:
                chosen = record.logs[start:] if container == record.containers[0].name else []
                picked = [(at, line) for at, line in chosen if at >= since]
                return ([(_log_stamp(at) + " ").encode() * stamps + line for at, line in picked],
                        start + len(chosen))

        first, cursor = lines(0)
        if tail is not None:
            first = first[-tail:] if tail else []
        if not follow:
            return web.Response(body=b"".join(first), content_type="text/plain")
        response = web.StreamResponse(headers={"Content-Type": "text/plain"})
        await response.prepare(request)
        await response.write(b"".join(first))
        while not self._stopping.is_set():
            with self.lock:
                running = "running" in record.containers[0].state and record.key in self.pods
            more, cursor = lines(cursor)
            if more:
                await response.write(b"".join(more))
            elif not running:
                break
            else:
                await asyncio.sleep(0.05)
        await response.write_eof()
        return response

    async def _list_events(self, request: web.Request) -> web.Response:
        namespace = request.match_info.get("ns")
        fields = request.query.get("fieldSelector", "")
        with self.lock:
            items = [copy.deepcopy(e) for e in self.events
                     if namespace in (None, e["metadata"]["namespace"])
                     and field_matches(fields, e)]
        return self._json(200, self._page(items, request, "EventList"))

    async def _create_secret(self, request: web.Request) -> web.Response:
        body = await request.json()
        data = {k: base64.b64decode(v).decode() for k, v in (body.get("data") or {}).items()}
        data.update(body.get("stringData") or {})
        namespace, name = request.match_info["ns"], body["metadata"]["name"]
        self.add_secret(namespace, name, data)
        return self._json(201, self.secrets[(namespace, name)])

    async def _get_secret(self, request: web.Request) -> web.Response:
        secret = self.secrets.get((request.match_info["ns"], request.match_info["name"]))
        if secret is None:
            return self._json(404, status_body(
                404, "NotFound", f'secrets "{request.match_info["name"]}" not found'))
        return self._json(200, secret)

    async def _create_service(self, request: web.Request) -> web.Response:
        body = await request.json()
        key = (request.match_info["ns"], body["metadata"]["name"])
        with self.lock:
            if key in self.services:
                return self._json(409, status_body(409, "AlreadyExists",
                                                   f'services "{key[1]}" already exists'))
            body["metadata"].update(namespace=key[0], uid=str(uuid.uuid4()),
                                    resourceVersion=str(next(self._versions)),
                                    creationTimestamp=now_iso())
            body.setdefault("status", {})
            self.services[key] = body
        return self._json(201, body)

    async def _service(self, request: web.Request) -> web.Response:
        key = (request.match_info["ns"], request.match_info["name"])
        with self.lock:
            found = (self.services.pop(key, None) if request.method == "DELETE"
                     else self.services.get(key))
        if found is None:
            return self._json(404, status_body(404, "NotFound", f'services "{key[1]}" not found'))
        return self._json(200, found)

    @staticmethod
    def _custom_key(request: web.Request, name: str) -> tuple[str, str, str, str, str]:
        m = request.match_info
        return (m["group"], m["version"], m["ns"], m["plural"], name)

    async def _create_custom(self, request: web.Request) -> web.Response:
        body = await request.json()
        key = self._custom_key(request, body["metadata"]["name"])
        with self.lock:
            if key in self.custom:
                return self._json(409, status_body(
                    409, "AlreadyExists", f'{key[3]}.{key[0]} "{key[4]}" already exists'))
            body["metadata"].update(namespace=key[2], uid=str(uuid.uuid4()),
                                    resourceVersion=str(next(self._versions)),
                                    creationTimestamp=now_iso())
            self.custom[key] = body
        return self._json(201, body)

    async def _custom(self, request: web.Request) -> web.Response:
        key = self._custom_key(request, request.match_info["name"])
        with self.lock:
            found = (self.custom.pop(key, None) if request.method == "DELETE"
                     else copy.deepcopy(self.custom.get(key)))
        if found is None:
            return self._json(404, status_body(404, "NotFound",
                                               f'{key[3]}.{key[0]} "{key[4]}" not found'))
        return self._json(200, found)

    def set_custom_status(self, group: str, plural: str, namespace: str, name: str,
                          status: dict) -> None:
        """Play the custom resource's controller: replace the object's status."""
        with self.lock:
            for key, obj in self.custom.items():
                if (key[0], key[2], key[3], key[4]) == (group, namespace, plural, name):
                    obj["status"] = copy.deepcopy(status)
                    obj["metadata"]["resourceVersion"] = str(next(self._versions))
                    return
        raise KeyError(f"{plural}.{group} {namespace}/{name}")

    # -- exec (websocket, v4.channel.k8s.io) -------------------------------------------------

    async def _exec(self, request: web.Request) -> web.StreamResponse:
        q = request.query
        command = q.getall("command", [])
        with self.lock:
            record = self._record(request)
            if record is None:
                return self._missing(request)
            name = q.get("container") or record.containers[0].name
            target = record.container(name)
            if target is None or "running" not in target.state:
                return self._json(400, status_body(
                    400, "BadRequest", f"container {name} is not running in {record.key[1]}"))
        if name != XCOM_SIDECAR:
            return self._json(400, status_body(
                400, "BadRequest", "the double execs into the xcom sidecar only"))
        ws = web.WebSocketResponse(protocols=(EXEC_PROTOCOL,))
        await ws.prepare(request)
        if command[:2] == ["/bin/sh", "-c"] and len(command) == 3:
            await self._exec_shell(ws, record, command[2])
        elif command in (["/bin/sh"], ["sh"]):
            await self._exec_interactive(ws, record)
        else:
            await self._send_status(ws, 126, f"the double cannot exec {command!r}")
        await ws.close()
        return ws

    async def _exec_shell(self, ws: web.WebSocketResponse, record: PodRecord, script: str) -> None:
        script = script.replace(XCOM_PATH, str(self._mounts(record).get(XCOM_PATH, record.scratch)))
        process = await asyncio.create_subprocess_exec(
            "/bin/sh", "-c", script, cwd=record.scratch,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await process.communicate()
        if out:
            await ws.send_bytes(b"\x01" + out)
        if err:
            await ws.send_bytes(b"\x02" + err)
        await self._send_status(ws, process.returncode or 0)

    async def _exec_interactive(self, ws: web.WebSocketResponse, record: PodRecord) -> None:
        async for message in ws:
            # the client sends str data as TEXT frames, bytes as BINARY ones
            data = (message.data.encode() if message.type == WSMsgType.TEXT
                    else message.data if message.type == WSMsgType.BINARY else b"")
            if not data or data[0] != 0:
                continue
            line = data[1:].decode(errors="replace")
            if line.strip().startswith("kill"):
                with self.lock:  # SIGINT to the sidecar's shell: its trap exits 0
                    sidecar = record.container(XCOM_SIDECAR)
                    if sidecar is not None:
                        sidecar.terminate(0, "Completed")
                    self._touch(record)
                await self._send_status(ws, 0)
                return
            await ws.send_bytes(b"\x02" + f"the double's sidecar shell ignores: {line}".encode())

    @staticmethod
    async def _send_status(ws: web.WebSocketResponse, code: int, message: str = "") -> None:
        if code == 0:
            status = {"metadata": {}, "status": "Success"}
        else:
            status = {"metadata": {}, "status": "Failure", "reason": "NonZeroExitCode",
                      "message": message or f"command terminated with non-zero exit code: {code}",
                      "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]}}
        await ws.send_bytes(bytes([STATUS_CHANNEL]) + json.dumps(status).encode())


def _tolerates(toleration: dict, taint: dict) -> bool:
    if toleration.get("effect") and toleration["effect"] != taint.get("effect"):
        return False
    if toleration.get("operator") == "Exists":
        return not toleration.get("key") or toleration["key"] == taint["key"]
    return toleration.get("key") == taint["key"] and toleration.get("value") == taint.get("value")


def _pod_requests(pod: dict) -> dict[str, Any]:
    """Sum of the containers' requests (a limit stands in for a missing request)."""
    total: dict[str, Any] = {}
    for container in pod["spec"]["containers"]:
        resources = container.get("resources") or {}
        wanted = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
        for name, amount in wanted.items():
            total[name] = total.get(name, 0) + parse_quantity(amount)
    return total


def _rewrite(value: str, mounts: dict[str, Path]) -> str:
    if value == IMAGE_ROOT or value.startswith(IMAGE_ROOT + "/"):
        return value  # the image's own files (see IMAGE_ROOT)
    for path, folder in sorted(mounts.items(), key=lambda kv: -len(kv[0])):
        if value == path or value.startswith(path + "/"):
            return str(folder) + value[len(path):]
    return value


def _merge(target: dict, patch: dict) -> None:
    """RFC 7386 JSON merge patch."""
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict) and isinstance(target.get(key), dict):
            _merge(target[key], value)
        else:
            target[key] = copy.deepcopy(value)
