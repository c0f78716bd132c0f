"""A node agent for a real control plane (scripts/kube-control-plane.sh): the kubelet part of a
cluster, which cannot run here (no container runtime, no images).

It registers its Nodes (capacity, labels, taints, ``nvidia.com/gpu``, an InternalIP of
127.0.0.1 and its own kubelet port), renews their Leases, watches the pods the real
kube-scheduler bound to them and runs each container as a local process, reports pod status
through the API, finishes deletions the way the kubelet does (stop the containers within the
grace period, then delete with grace 0) and serves the kubelet endpoints the apiserver proxies:
``/containerLogs`` (``follow``, ``timestamps``, ``sinceSeconds``/``sinceTime``, ``tailLines``)
and ``/exec`` (websocket ``v4.channel.k8s.io``), over TLS with a certificate signed by the
control plane's CA, which the apiserver checks. So ``pods/log`` and ``pods/exec`` travel
through the real apiserver, its authentication and RBAC.

Faults on demand (``inject``): ``OOMKilled`` (the container's processes are SIGKILLed, exit
137, reason OOMKilled), ``Evicted`` (every container stopped, phase Failed, reason Evicted, an
Evicted event) and ``lose_node`` (the node stops renewing its Lease and its processes die: the
controller-manager marks it NotReady, taints it and evicts its pods).

Fidelity limits, what a kubelet does and this does not:

- no images: a container's ``command`` (or, without one, the image's entrypoint from
  ``images``) names a program looked up in ``commands`` (``synthfactory`` ->
  ``.venv-worker/bin/synthfactory``); the host's checkout stands in for the image's files and
  ``base_env`` for the image's environment;
- no network or PID namespaces, no cgroups: every pod shares the host's network (pod IP
  127.0.0.1, so two pods cannot listen on one port) and process table; resource limits are not
  enforced (an OOM kill happens only when injected); volumes (emptyDir, secret, configMap) are
  folders under the pod's scratch, and env values and args that start with a mount path are
  rewritten to it (paths inside the checkout, the image's own files, never are). Two files
  alone sit at their real paths, in a mount namespace per container (``unshare --mount``,
  when the machine allows it): the ServiceAccount token folder, which clients read from a
  fixed path, and /etc/hosts, which maps every Service of the cluster (``NAME.NS.svc``) to
  127.0.0.1 in place of cluster DNS (every pod is on 127.0.0.1);
- exec runs ``/bin/sh`` on the host with the same rewriting; a ``kill`` line (the xcom
  sidecar's stop) is applied to that container's own process group, never to the host's;
- init containers, probes, restarts (``restartPolicy`` is treated as Never), image pulls and
  ``hostPath``/``projected`` volumes are not run; env ``valueFrom`` covers secretKeyRef,
  configMapKeyRef and the fieldRefs Spark uses.
"""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import json
import os
import re
import signal
import ssl
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import WSMsgType, web
from kubernetes import client, config, watch
from kubernetes.client.exceptions import ApiException

# The "image" is the host's checkout (.venv-worker, the model under var/): a real image holds
# those files outside any volume, so paths inside the checkout are never rewritten to a pod's
# scratch, even when the checkout itself lives under /tmp.
IMAGE_ROOT = str(Path(__file__).resolve().parents[2])
EXEC_PROTOCOL = "v4.channel.k8s.io"
STATUS_CHANNEL = 3
FAULTS = ("OOMKilled", "Evicted")
LEASE_NAMESPACE = "kube-node-lease"
DEFAULT_COMMANDS = {"sh": "/bin/sh", "/bin/sh": "/bin/sh", "bash": "/bin/bash"}
SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
# Each container runs in a mount namespace of its own where the kubelet's per-pod files sit at
# their real paths: /etc/hosts (the pod's name and the cluster's Service names, the stand-in
# for cluster DNS) and the ServiceAccount token, which clients read from a fixed path.
_MOUNTS = """set -e
mount --bind "$NODE_AGENT_HOSTS" /etc/hosts
if [ -n "$NODE_AGENT_SA" ]; then
  mkdir -p "$NODE_AGENT_SA_PATH"; mount --bind "$NODE_AGENT_SA" "$NODE_AGENT_SA_PATH"
fi
unset NODE_AGENT_HOSTS NODE_AGENT_SA NODE_AGENT_SA_PATH
exec "$@"
"""


def _can_unshare() -> bool:
    try:
        return subprocess.run(["unshare", "--mount", "true"], capture_output=True,
                              timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def iso(at: dt.datetime | None = None) -> str:
    return (at or now()).strftime("%Y-%m-%dT%H:%M:%SZ")


def stamp(at: float) -> str:
    """RFC 3339 with nanoseconds, as the kubelet prefixes log lines when timestamps=true."""
    base = dt.datetime.fromtimestamp(at, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{base}.{int((at % 1) * 1e9):09d}Z"


def node_spec(name: str, labels: dict[str, str], cpu: str, memory: str, gpus: int = 0,
              max_pods: str = "110", taints: list[dict] | None = None) -> dict:
    """What a node offers; GPU nodes get the usual nvidia.com/gpu NoSchedule taint."""
    capacity = {"cpu": cpu, "memory": memory, "pods": max_pods}
    if gpus:
        capacity["nvidia.com/gpu"] = str(gpus)
        if taints is None:
            taints = [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
    return {"name": name, "labels": labels, "capacity": capacity, "taints": taints or []}


@dataclass
class ContainerRun:
    name: str
    image: str
    log: Path
    process: subprocess.Popen | None = None
    state: dict = field(default_factory=lambda: {"waiting": {"reason": "ContainerCreating"}})
    fault: str | None = None

    def status(self) -> dict:
        running = "running" in self.state
        return {"name": self.name, "image": self.image, "imageID": f"agent://{self.image}",
                "containerID": f"agent://{self.name}", "ready": running, "started": running,
                "restartCount": 0, "state": dict(self.state)}

    def terminate(self, code: int, reason: str, message: str | None = None) -> None:
        if "terminated" in self.state:
            return
        started = self.state.get("running", {}).get("startedAt", iso())
        self.state = {"terminated": {"exitCode": code, "reason": reason, "startedAt": started,
                                     "finishedAt": iso(), **({"message": message}
                                                             if message else {})}}


@dataclass
class PodRun:
    namespace: str
    name: str
    uid: str
    node: str
    scratch: Path
    spec: dict
    containers: list[ContainerRun]
    mounts: dict[str, Path] = field(default_factory=dict)
    evicted: bool = False
    finished: bool = False  # the kubelet's final delete was sent

    def container(self, name: str | None) -> ContainerRun | None:
        # a pod is recorded before its kubelet thread creates the containers: none yet
        if not name:
            return self.containers[0] if self.containers else None
        return next((c for c in self.containers if c.name == name), None)


class NodeAgent:
    """Nodes of one cluster, driven on this machine. ``start()`` registers them and starts
    watching; ``stop()`` kills every process it started and removes its Nodes."""

    def __init__(self, kubeconfig: Path, nodes: list[dict], workdir: Path, *,
                 commands: dict[str, str] | None = None, images: dict[str, list[str]] | None
                 = None, base_env: dict[str, str] | None = None,
                 shared_volumes: dict[str, Path] | None = None, tls: tuple[Path, Path] | None
                 = None):
        self.kubeconfig = Path(kubeconfig)
        self.nodes = {n["name"]: n for n in nodes}
        self.workdir = Path(workdir)
        self.commands = {**DEFAULT_COMMANDS, **(commands or {})}
        self.images = dict(images or {})
        self.base_env = dict(base_env if base_env is not None else os.environ)
        # emptyDir volumes by name that are one host folder for every pod, like a node's warm
        # cache (vLLM's and torch's compile caches under HOME): tests start faster
        self.shared_volumes = dict(shared_volumes or {})
        pki = self.kubeconfig.parent / "pki"
        self.tls = tls or (pki / "kubelet.crt", pki / "kubelet.key")
        self.api = config.new_client_from_config(str(self.kubeconfig))
        self.core = client.CoreV1Api(self.api)
        self.coordination = client.CoordinationV1Api(self.api)
        self.pods: dict[str, PodRun] = {}  # by uid
        self.lost: set[str] = set()
        self.started_pods: list[dict] = []  # (namespace, name, node, labels) of every pod run
        self.served: list[tuple[str, str]] = []  # (endpoint, pod) of each kubelet request
        self.lock = threading.RLock()
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []
        self.unshare = _can_unshare()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self.port = 0

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> NodeAgent:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._serve_kubelet()
        for spec in self.nodes.values():
            self._register(spec)
        for target, name in ((self._renew_leases, "leases"), (self._watch_pods, "pods")):
            thread = threading.Thread(target=target, name=f"node-agent-{name}", daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def stop(self) -> None:
        self._stopping.set()
        with self.lock:
            runs = list(self.pods.values())
        for run in runs:
            self._kill(run, signal.SIGKILL)
        for run in runs:  # pods of a node that is gone: what `kubectl delete --force` does
            self._finish(run)
        for name in self.nodes:
            try:
                self.core.delete_node(name)
            except ApiException as err:
                if err.status != 404:
                    raise
        if self._loop and self._runner:
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(10)
            self._loop.call_soon_threadsafe(self._loop.stop)
        for thread in self._threads:
            thread.join(10)
        self.api.close()

    def __enter__(self) -> NodeAgent:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- test controls -----------------------------------------------------------------------

    def run_of(self, namespace: str, name: str) -> PodRun | None:
        with self.lock:
            return next((r for r in self.pods.values()
                         if (r.namespace, r.name) == (namespace, name)), None)

    def pid_owner(self, pid: int) -> PodRun | None:
        """The pod whose container runs process ``pid``."""
        with self.lock:
            return next((r for r in self.pods.values() for c in r.containers
                         if c.process is not None and c.process.pid == pid), None)

    def logs(self, namespace: str, name: str, container: str | None = None) -> str:
        run = self.run_of(namespace, name)
        if run is None:
            raise KeyError(f"{namespace}/{name}: not run by this agent")
        if not run.containers:  # recorded, but its kubelet thread has not created them yet
            return ""
        target = run.container(container)
        if target is None:
            raise KeyError(f"{namespace}/{name}: no container {container!r}")
        return "".join(line.split(" ", 1)[1] for line in _read_lines(target.log))

    def inject(self, namespace: str, name: str, fault: str) -> None:
        """Make a running pod fail the way a node does: one of ``FAULTS``."""
        if fault not in FAULTS:
            raise ValueError(f"fault: expected one of {FAULTS}, got {fault!r}")
        run = self.run_of(namespace, name)
        if run is None:
            raise KeyError(f"{namespace}/{name}: not run by this agent")
        if fault == "OOMKilled":
            base = run.containers[0]
            base.fault = "OOMKilled"
            self._event(run, "Warning", "OOMKilling",
                        f"Memory cgroup out of memory: Killed process of container {base.name}")
            _signal(base.process, signal.SIGKILL)
            return
        run.evicted = True
        self._event(run, "Warning", "Evicted", "The node was low on resource: memory.")
        self._kill(run, signal.SIGKILL)
        for container in run.containers:
            container.terminate(137, "Error")
        self._report(run)

    def lose_node(self, node_name: str) -> None:
        """The machine is gone: its Lease is no longer renewed and its processes die."""
        with self.lock:
            self.lost.add(node_name)
            runs = [r for r in self.pods.values() if r.node == node_name]
        for run in runs:
            self._kill(run, signal.SIGKILL)

    def wait_for(self, predicate: Callable[[], Any], timeout: float = 60,
                 what: str = "condition") -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = predicate()
            if value:
                return value
            time.sleep(0.05)
        raise TimeoutError(f"node agent: {what} not reached within {timeout}s")

    # -- nodes and leases --------------------------------------------------------------------

    def _register(self, spec: dict) -> None:
        body = {"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": spec["name"],
                             "labels": {"kubernetes.io/hostname": spec["name"],
                                        "kubernetes.io/os": "linux", **spec["labels"]}},
                "spec": {"taints": spec["taints"]}}
        try:
            self.core.create_node(body)
        except ApiException as err:
            if err.status != 409:
                raise
            self.core.patch_node(spec["name"], body)
        self._node_status(spec["name"])

    def _node_status(self, name: str) -> None:
        spec = self.nodes[name]
        heartbeat = iso()
        conditions = [
            {"type": "Ready", "status": "True", "reason": "KubeletReady",
             "message": "node agent is posting ready status", "lastHeartbeatTime": heartbeat,
             "lastTransitionTime": heartbeat},
            *({"type": t, "status": "False", "reason": f"KubeletHasNo{t}", "message": "",
               "lastHeartbeatTime": heartbeat, "lastTransitionTime": heartbeat}
              for t in ("MemoryPressure", "DiskPressure", "PIDPressure"))]
        status = {"capacity": spec["capacity"], "allocatable": spec["capacity"],
                  "conditions": conditions,
                  "addresses": [{"type": "InternalIP", "address": "127.0.0.1"},
                                {"type": "Hostname", "address": name}],
                  "daemonEndpoints": {"kubeletEndpoint": {"Port": self.port}},
                  "nodeInfo": {"kubeletVersion": "v1.20.2-node-agent", "operatingSystem": "linux",
                               "architecture": "amd64", "containerRuntimeVersion": "agent://1",
                               "kernelVersion": "", "osImage": "", "kubeProxyVersion": "",
                               "machineID": "", "systemUUID": "", "bootID": ""}}
        self.core.patch_node_status(name, {"status": status})

    def _renew_leases(self) -> None:
        status_every, last_status = 10.0, time.monotonic()
        while not self._stopping.wait(1.0):
            for name in self.nodes:
                if name in self.lost:
                    continue
                try:
                    self._renew(name)
                    if time.monotonic() - last_status > status_every:
                        self._node_status(name)
                except (ApiException, OSError):
                    pass  # the apiserver is going away; the next round retries
            if time.monotonic() - last_status > status_every:
                last_status = time.monotonic()

    def _renew(self, name: str) -> None:
        renew = now().strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        body = {"metadata": {"name": name, "namespace": LEASE_NAMESPACE},
                "spec": {"holderIdentity": name, "leaseDurationSeconds": 40,
                         "renewTime": renew}}
        try:
            self.coordination.patch_namespaced_lease(name, LEASE_NAMESPACE,
                                                     {"spec": body["spec"]})
        except ApiException as err:
            if err.status != 404:
                raise
            self.coordination.create_namespaced_lease(LEASE_NAMESPACE, body)

    # -- pods --------------------------------------------------------------------------------

    def _watch_pods(self) -> None:
        version = None
        while not self._stopping.is_set():
            try:
                if version is None:
                    listed = self.core.list_pod_for_all_namespaces()
                    for pod in listed.items:
                        self._reconcile(pod)
                    version = listed.metadata.resource_version
                for event in watch.Watch().stream(
                        self.core.list_pod_for_all_namespaces, resource_version=version,
                        timeout_seconds=5, allow_watch_bookmarks=True):
                    if self._stopping.is_set():
                        return
                    pod = event["object"]
                    version = pod.metadata.resource_version
                    if event["type"] != "BOOKMARK":
                        self._reconcile(pod, deleted=event["type"] == "DELETED")
            except ApiException as err:
                if err.status == 410:  # too old: list again
                    version = None
                elif not self._stopping.is_set():
                    time.sleep(0.5)
            except Exception:  # noqa: BLE001 - a dropped connection while stopping
                if not self._stopping.is_set():
                    time.sleep(0.5)

    def _reconcile(self, pod: Any, deleted: bool = False) -> None:
        node = pod.spec.node_name
        if node not in self.nodes:
            return
        uid = pod.metadata.uid
        with self.lock:
            run = self.pods.get(uid)
            if node in self.lost:
                return  # nobody is there to act on it
            if deleted:
                if run is not None:
                    self._kill(run, signal.SIGKILL)
                    self.pods.pop(uid, None)
                return
            if pod.metadata.deletion_timestamp is not None:
                if run is None or not run.finished:
                    grace = pod.metadata.deletion_grace_period_seconds or 0
                    threading.Thread(target=self._terminate, args=(pod, run, grace),
                                     daemon=True).start()
                    if run is not None:
                        run.finished = True
                return
            if run is not None:
                return
            if pod.status.phase in ("Succeeded", "Failed"):
                return  # ended before this agent started
            body = self.api.sanitize_for_serialization(pod)
            run = PodRun(namespace=pod.metadata.namespace, name=pod.metadata.name, uid=uid,
                         node=node, scratch=self.workdir / pod.metadata.namespace
                         / f"{pod.metadata.name}-{uid[:8]}", spec=body["spec"], containers=[])
            self.pods[uid] = run
            self.started_pods.append({
                "namespace": run.namespace, "name": run.name, "node": node, "uid": uid,
                "labels": dict(pod.metadata.labels or {}),
                "owners": [(o.kind, o.name, o.uid) for o in pod.metadata.owner_references or []],
                "args": list(pod.spec.containers[0].args or [])})
        threading.Thread(target=self._start, args=(run, body), daemon=True,
                         name=f"kubelet-{run.name}").start()

    def _terminate(self, pod: Any, run: PodRun | None, grace: int) -> None:
        """What the kubelet does for a pod being deleted: stop its containers (TERM, then KILL
        once the grace period is over), report them, then delete the pod for good."""
        if run is not None:
            self._event(run, "Normal", "Killing", "Stopping container "
                        + ", ".join(c.name for c in run.containers))
            self._kill(run, signal.SIGTERM)
            deadline = time.monotonic() + grace
            while time.monotonic() < deadline and any(
                    c.process is not None and c.process.poll() is None for c in run.containers):
                time.sleep(0.1)
            self._kill(run, signal.SIGKILL)
            for container in run.containers:
                if container.process is not None:
                    container.process.wait()
        try:
            # the apiserver reads DeleteOptions from the body when there is one: the grace
            # period goes there too, not in the query
            self.core.delete_namespaced_pod(
                pod.metadata.name, pod.metadata.namespace,
                body=client.V1DeleteOptions(grace_period_seconds=0, preconditions=client
                                            .V1Preconditions(uid=pod.metadata.uid)))
        except ApiException as err:
            if err.status not in (404, 409):
                raise

    def _finish(self, run: PodRun) -> None:
        try:
            self.core.delete_namespaced_pod(run.name, run.namespace, grace_period_seconds=0)
        except (ApiException, OSError):
            pass

    def _start(self, run: PodRun, body: dict) -> None:
        run.scratch.mkdir(parents=True, exist_ok=True)
        spec = body["spec"]
        run.containers = [ContainerRun(c["name"], c.get("image", ""),
                                       run.scratch / "logs" / f"{c['name']}.log")
                          for c in spec["containers"]]
        (run.scratch / "logs").mkdir(exist_ok=True)
        try:
            volumes = self._volumes(run, spec)
        except _ConfigError as err:
            for container in run.containers:
                container.state = {"waiting": {"reason": "CreateContainerConfigError",
                                               "message": str(err)}}
            self._report(run, body)
            self._event(run, "Warning", "Failed", f"Error: {err}")
            return
        for index, container_spec in enumerate(spec["containers"]):
            self._start_container(run, body, run.containers[index], container_spec, volumes)
        self._report(run, body)
        for container in run.containers:
            if container.process is not None:
                threading.Thread(target=self._follow, args=(run, container), daemon=True).start()

    def _volumes(self, run: PodRun, spec: dict) -> dict[str, Path]:
        """Volume name -> its folder on this machine, filled for secrets and configMaps."""
        folders: dict[str, Path] = {}
        for volume in spec.get("volumes") or []:
            name = volume["name"]
            folder = self.shared_volumes.get(name) or run.scratch / "volumes" / name
            folder.mkdir(parents=True, exist_ok=True)
            folders[name] = folder
            if "secret" in volume:
                source = volume["secret"]
                data = self._secret(run.namespace, source["secretName"], source.get("optional"))
                _write_items(folder, data, source.get("items"))
            elif "configMap" in volume:
                source = volume["configMap"]
                data = self._config_map(run.namespace, source["name"], source.get("optional"))
                _write_items(folder, data, source.get("items"))
        return folders

    def _secret(self, namespace: str, name: str, optional: bool | None) -> dict[str, bytes]:
        try:
            secret = self.core.read_namespaced_secret(name, namespace)
        except ApiException as err:
            if err.status == 404 and optional:
                return {}
            if err.status == 404:
                raise _ConfigError(f'secret "{name}" not found') from err
            raise
        return {k: base64.b64decode(v) for k, v in (secret.data or {}).items()}

    def _config_map(self, namespace: str, name: str, optional: bool | None) -> dict[str, bytes]:
        try:
            found = self.core.read_namespaced_config_map(name, namespace)
        except ApiException as err:
            if err.status == 404 and optional:
                return {}
            if err.status == 404:
                raise _ConfigError(f'configmap "{name}" not found') from err
            raise
        return {k: v.encode() for k, v in (found.data or {}).items()}

    def _env(self, run: PodRun, body: dict, spec: dict, mounts: dict[str, Path]) -> dict[str, str]:
        env = dict(self.base_env)
        for source in spec.get("envFrom") or []:
            prefix = source.get("prefix", "")
            if "secretRef" in source:
                ref = source["secretRef"]
                data = self._secret(run.namespace, ref["name"], ref.get("optional"))
            elif "configMapRef" in source:
                ref = source["configMapRef"]
                data = self._config_map(run.namespace, ref["name"], ref.get("optional"))
            else:
                continue
            env.update({prefix + k: v.decode() for k, v in data.items()})
        fields = {"metadata.name": run.name, "metadata.namespace": run.namespace,
                  "metadata.uid": run.uid, "spec.nodeName": run.node,
                  "spec.serviceAccountName": body["spec"].get("serviceAccountName", "default"),
                  "status.podIP": "127.0.0.1", "status.hostIP": "127.0.0.1"}
        for var in spec.get("env") or []:
            source = var.get("valueFrom") or {}
            if "value" in var:
                env[var["name"]] = _rewrite(var["value"], mounts)
            elif "fieldRef" in source:
                env[var["name"]] = fields.get(source["fieldRef"]["fieldPath"], "")
            elif "secretKeyRef" in source:
                ref = source["secretKeyRef"]
                data = self._secret(run.namespace, ref["name"], ref.get("optional"))
                if ref["key"] in data:
                    env[var["name"]] = data[ref["key"]].decode()
                elif not ref.get("optional"):
                    raise _ConfigError(f'couldn\'t find key {ref["key"]} in Secret '
                                       f'{run.namespace}/{ref["name"]}')
            elif "configMapKeyRef" in source:
                ref = source["configMapKeyRef"]
                data = self._config_map(run.namespace, ref["name"], ref.get("optional"))
                if ref["key"] in data:
                    env[var["name"]] = data[ref["key"]].decode()
            elif "value" not in var and not source:
                env[var["name"]] = ""
        env.setdefault("HOSTNAME", run.name)
        # A pod's /metrics listens on every address of its own network; here the host is
        # the pod network, so a step serves on loopback only (test traffic stays there)
        env["SYNTHFACTORY_METRICS_ADDR"] = "127.0.0.1"
        return env

    def _start_container(self, run: PodRun, body: dict, container: ContainerRun, spec: dict,
                         volumes: dict[str, Path]) -> None:
        mounts = {m["mountPath"].rstrip("/") or "/": volumes[m["name"]]
                  for m in spec.get("volumeMounts") or [] if m["name"] in volumes}
        run.mounts.update(mounts)
        try:
            env = self._env(run, body, spec, mounts)
        except _ConfigError as err:
            container.state = {"waiting": {"reason": "CreateContainerConfigError",
                                           "message": str(err)}}
            self._event(run, "Warning", "Failed", f"Error: {err}")
            return
        entry = spec.get("command") or self.images.get(container.image, [])
        argv = [_rewrite(str(a), mounts) for a in [*entry, *(spec.get("args") or [])]]
        program = None
        if argv:  # a name the test maps, or a file of the image (the checkout) itself
            program = self.commands.get(argv[0]) or (
                argv[0] if argv[0].startswith(IMAGE_ROOT + "/") else None)
        if not program or not Path(program).exists():
            container.state = {"running": {"startedAt": iso()}}
            container.terminate(128, "StartError",
                                f"exec: {argv[:1]!r}: executable file not found in $PATH")
            self._event(run, "Warning", "Failed",
                        f"Error: exec: {argv[:1]!r}: executable file not found in $PATH")
            return
        workdir = spec.get("workingDir")
        cwd = Path(_rewrite(workdir, mounts)) if workdir else run.scratch
        if not cwd.is_dir():
            cwd = run.scratch
        command = [program, *argv[1:]]
        if self.unshare:
            env["NODE_AGENT_HOSTS"] = str(self._hosts_file(run))
            token = next((folder for path, folder in mounts.items()
                          if path == SERVICE_ACCOUNT_DIR), None)
            env["NODE_AGENT_SA"] = str(token or "")
            env["NODE_AGENT_SA_PATH"] = SERVICE_ACCOUNT_DIR
            command = ["unshare", "--mount", "/bin/sh", "-c", _MOUNTS, "sh", *command]
        container.state = {"running": {"startedAt": iso()}}
        container.process = subprocess.Popen(
            command, env=env, cwd=cwd, stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
        self._event(run, "Normal", "Started", f"Started container {container.name}")

    def _hosts_file(self, run: PodRun) -> Path:
        """The pod's /etc/hosts: the host's, the pod's own name, and every Service."""
        names = [run.name]
        for service in self.core.list_service_for_all_namespaces().items:
            name, namespace = service.metadata.name, service.metadata.namespace
            names += [f"{name}.{namespace}", f"{name}.{namespace}.svc",
                      f"{name}.{namespace}.svc.cluster.local"]
        hosts = run.scratch / "etc-hosts"
        base = Path("/etc/hosts").read_text() if Path("/etc/hosts").exists() else ""
        hosts.write_text(base.rstrip("\n") + "\n# node agent: pod and Services\n"
                         + "".join(f"127.0.0.1\t{n}\n" for n in names))
        return hosts

    def _follow(self, run: PodRun, container: ContainerRun) -> None:
        process = container.process
        assert process is not None and process.stdout is not None
        with container.log.open("ab") as log:
            for line in iter(process.stdout.readline, b""):
                log.write(stamp(time.time()).encode() + b" " + line)
                log.flush()
        code = process.wait()
        if container.fault == "OOMKilled":
            container.terminate(137, "OOMKilled")
        elif code < 0:  # killed by a signal: the runtime reports 128 + signal
            container.terminate(128 - code, "Error")
        else:
            container.terminate(code, "Completed" if code == 0 else "Error")
        if run.node not in self.lost and not self._stopping.is_set():
            self._report(run)

    def _report(self, run: PodRun, body: dict | None = None) -> None:
        """The pod's status from its containers, written through the status subresource."""
        states = [c.state for c in run.containers]
        ready = bool(states) and all("running" in s for s in states)
        status: dict[str, Any] = {"hostIP": "127.0.0.1", "podIP": "127.0.0.1",
                                  "podIPs": [{"ip": "127.0.0.1"}],
                                  "containerStatuses": [c.status() for c in run.containers]}
        if body is not None:
            status["startTime"] = iso()
        if run.evicted:
            status.update(phase="Failed", reason="Evicted",
                          message="The node was low on resource: memory.")
        elif any("waiting" in s for s in states):
            status["phase"] = "Pending"
        elif any("running" in s for s in states):
            status["phase"] = "Running"
        else:
            failed = any(s["terminated"]["exitCode"] != 0 for s in states)
            status["phase"] = "Failed" if failed else "Succeeded"
        moment = iso()
        status["conditions"] = [
            {"type": "Initialized", "status": "True", "lastTransitionTime": moment},
            {"type": "ContainersReady", "status": str(ready), "lastTransitionTime": moment},
            {"type": "Ready", "status": str(ready), "lastTransitionTime": moment}]
        try:
            self.core.patch_namespaced_pod_status(run.name, run.namespace, {"status": status})
        except ApiException as err:
            if err.status != 404:  # deleted meanwhile
                raise

    def _kill(self, run: PodRun, sig: int) -> None:
        for container in run.containers:
            _signal(container.process, sig)

    def _event(self, run: PodRun, kind: str, reason: str, message: str) -> None:
        moment = iso()
        try:
            self.core.create_namespaced_event(run.namespace, {
                "metadata": {"generateName": f"{run.name}.", "namespace": run.namespace},
                "involvedObject": {"kind": "Pod", "name": run.name, "namespace": run.namespace,
                                   "uid": run.uid, "apiVersion": "v1"},
                "type": kind, "reason": reason, "message": message, "count": 1,
                "firstTimestamp": moment, "lastTimestamp": moment,
                "source": {"component": "kubelet", "host": run.node}})
        except (ApiException, OSError):
            pass  # events are best effort, as the kubelet's are

    # -- kubelet endpoints -------------------------------------------------------------------

    def _serve_kubelet(self) -> None:
        ready = threading.Event()
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(*map(str, self.tls))

        def serve() -> None:
            self._loop = asyncio.new_event_loop()
            asyncio.set_event_loop(self._loop)
            app = web.Application()
            app.add_routes([
                web.get("/containerLogs/{ns}/{pod}/{container}", self._container_logs),
                web.get("/exec/{ns}/{pod}/{container}", self._exec),
                web.post("/exec/{ns}/{pod}/{container}", self._exec),
                web.get("/healthz", _healthz)])
            self._runner = web.AppRunner(app, access_log=None)
            self._loop.run_until_complete(self._runner.setup())
            site = web.TCPSite(self._runner, "127.0.0.1", 0, ssl_context=context)
            self._loop.run_until_complete(site.start())
            self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
            ready.set()
            self._loop.run_forever()

        thread = threading.Thread(target=serve, name="node-agent-kubelet", daemon=True)
        thread.start()
        self._threads.append(thread)
        if not ready.wait(10):
            raise RuntimeError("the node agent's kubelet endpoint did not start")

    def _target(self, request: web.Request) -> tuple[PodRun, ContainerRun] | web.Response:
        info = request.match_info
        run = self.run_of(info["ns"], info["pod"])
        target = run.container(info["container"]) if run else None
        if run is None or target is None:
            return web.Response(status=404, text=f"container {info['container']} of pod "
                                                 f"{info['ns']}/{info['pod']} not found")
        return run, target

    async def _container_logs(self, request: web.Request) -> web.StreamResponse:
        found = self._target(request)
        if isinstance(found, web.Response):
            return found
        run, container = found
        self.served.append(("containerLogs", run.name))
        q = request.query
        follow = q.get("follow") in ("true", "1")
        with_stamps = q.get("timestamps") in ("true", "1")
        since = None
        if q.get("sinceSeconds"):
            since = time.time() - int(q["sinceSeconds"])
        elif q.get("sinceTime"):
            since = dt.datetime.fromisoformat(q["sinceTime"].replace("Z", "+00:00")).timestamp()
        tail = int(q["tailLines"]) if q.get("tailLines") else None
        response = web.StreamResponse(headers={"Content-Type": "text/plain"})
        await response.prepare(request)

        def pick(lines: list[str]) -> list[str]:
            if since is not None:
                lines = [ln for ln in lines if _stamp_seconds(ln) >= since]
            return lines

        lines = pick(_read_lines(container.log))
        if tail is not None:
            lines = lines[-tail:] if tail else []
        sent = len(_read_lines(container.log))
        for line in lines:
            await response.write(_shape(line, with_stamps))
        while follow:
            if "terminated" in container.state and container.process is not None \
                    and container.process.poll() is not None:
                await asyncio.sleep(0.1)  # the follower thread writes what was left
                more = _read_lines(container.log)[sent:]
                for line in more:
                    await response.write(_shape(line, with_stamps))
                break
            await asyncio.sleep(0.1)
            more = _read_lines(container.log)[sent:]
            sent += len(more)
            for line in pick(more):
                await response.write(_shape(line, with_stamps))
        await response.write_eof()
        return response

    async def _exec(self, request: web.Request) -> web.StreamResponse:
        found = self._target(request)
        if isinstance(found, web.Response):
            return found
        run, container = found
        self.served.append(("exec", run.name))
        if "running" not in container.state:
            return web.Response(status=400, text=f"container {container.name} is not running")
        command = request.query.getall("command", [])
        ws = web.WebSocketResponse(protocols=(EXEC_PROTOCOL, "channel.k8s.io"))
        await ws.prepare(request)
        if command[:1] in (["/bin/sh"], ["sh"]) and len(command) == 1:
            await self._exec_interactive(ws, run, container)
        else:
            await self._exec_command(ws, run, container, command)
        await ws.close()
        return ws

    def _shell_line(self, run: PodRun, container: ContainerRun, line: str) -> list[str] | None:
        """A command line for the host's shell, or None when it is the container's ``kill``:
        without a PID namespace, `kill 1` or `pkill sh` must reach only this container."""
        if line.strip().startswith("kill") or "pkill" in line:
            return None
        return ["/bin/sh", "-c", _rewrite_text(line, run.mounts)]

    async def _exec_command(self, ws: web.WebSocketResponse, run: PodRun,
                            container: ContainerRun, command: list[str]) -> None:
        if command[:2] in (["/bin/sh", "-c"], ["sh", "-c"]) and len(command) == 3:
            argv = self._shell_line(run, container, command[2])
        else:
            argv = [_rewrite(c, run.mounts) for c in command]
        if argv is None:
            _signal(container.process, signal.SIGINT)
            await _send_status(ws, 0)
            return
        await _send_status(ws, await _run_to(ws, argv, run.scratch))

    async def _exec_interactive(self, ws: web.WebSocketResponse, run: PodRun,
                                container: ContainerRun) -> None:
        async for message in ws:
            data = (message.data.encode() if message.type == WSMsgType.TEXT
                    else message.data if message.type == WSMsgType.BINARY else b"")
            if not data or data[0] != 0:
                continue
            for line in data[1:].decode(errors="replace").splitlines():
                argv = self._shell_line(run, container, line)
                if argv is None:  # SIGINT to the sidecar's shell: its trap exits 0
                    _signal(container.process, signal.SIGINT)
                    await ws.send_bytes(b"\x01\n")
                    await _send_status(ws, 0)
                    return
                await _run_to(ws, argv, run.scratch)


async def _run_to(ws: web.WebSocketResponse, argv: list[str], cwd: Path) -> int:
    """Run ``argv`` on the host; its stdout and stderr go to channels 1 and 2. Its exit code."""
    process = await asyncio.create_subprocess_exec(
        *argv, cwd=cwd, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await process.communicate()
    if out:
        await ws.send_bytes(b"\x01" + out)
    if err:
        await ws.send_bytes(b"\x02" + err)
    return process.returncode or 0


async def _healthz(_: web.Request) -> web.Response:
    return web.Response(text="ok")


class _ConfigError(Exception):
    """What the kubelet reports as CreateContainerConfigError."""


async def _send_status(ws: web.WebSocketResponse, code: int, message: str = "") -> None:
    if code == 0:
        status = {"metadata": {}, "status": "Success"}
    else:
        status = {"metadata": {}, "status": "Failure", "reason": "NonZeroExitCode",
                  "message": message or f"command terminated with non-zero exit code: {code}",
                  "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]}}
    await ws.send_bytes(bytes([STATUS_CHANNEL]) + json.dumps(status).encode())


def _signal(process: subprocess.Popen | None, sig: int) -> None:
    if process is not None and process.poll() is None:
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            pass


def _write_items(folder: Path, data: dict[str, bytes], items: list[dict] | None) -> None:
    wanted = {i["key"]: i.get("path", i["key"]) for i in items} if items else {k: k for k in data}
    for key, path in wanted.items():
        if key in data:
            target = folder / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data[key])


def _read_lines(path: Path) -> list[str]:
    try:
        return path.read_bytes().decode(errors="replace").splitlines(keepends=True)
    except FileNotFoundError:
        return []


def _stamp_seconds(line: str) -> float:
    text = line.split(" ", 1)[0]
    base, _, fraction = text.rstrip("Z").partition(".")
    moment = dt.datetime.strptime(base, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=dt.UTC)
    return moment.timestamp() + float(f"0.{fraction or 0}")


def _shape(line: str, with_stamps: bool) -> bytes:
    return (line if with_stamps else line.split(" ", 1)[1]).encode()


def _rewrite_text(text: str, mounts: dict[str, Path]) -> str:
    """Every mount path in a shell line, in one pass: a folder that replaced one path (under
    /tmp, say) is never rewritten again by a shorter mount path (``/tmp``)."""
    if not mounts:
        return text
    paths = sorted(mounts, key=len, reverse=True)
    pattern = re.compile(r"(?<![\w/.-])(" + "|".join(map(re.escape, paths)) + r")(?=/|\b|$)")
    return pattern.sub(lambda m: str(mounts[m.group(1)]), text)


def _rewrite(value: str, mounts: dict[str, Path]) -> str:
    if value == IMAGE_ROOT or value.startswith(IMAGE_ROOT + "/"):
        return value  # the image's own files (see IMAGE_ROOT)
    for path, folder in sorted(mounts.items(), key=lambda kv: -len(kv[0])):
        if value == path or value.startswith(path + "/"):
            return str(folder) + value[len(path):]
    return value
