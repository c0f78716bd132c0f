"""One snapshot of the cluster: nodes and pods as Kubernetes API JSON dicts.

`kubernetes`: listed through the real `kubernetes` client (a CoreV1Api from
operators/kube_client.py), raw JSON (deserialising 20,000
V1Pod models would cost seconds a poke), paged so a large cluster is never one response.
`local`: this machine as a single node (CPUs, memory, GPUs) for the local runner.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
from dataclasses import dataclass
from typing import Any

# Pods in these phases hold nothing; the API server filters them out for us.
_NON_TERMINAL = "status.phase!=Succeeded,status.phase!=Failed"
_PAGE_SIZE = 500
_REQUEST_TIMEOUT = (10, 60)
LOCAL_NODE_LABEL = "synthfactory.io/local"


@dataclass
class ClusterSnapshot:
    nodes: list[dict[str, Any]]
    pods: list[dict[str, Any]]
    source: str


def kubernetes_snapshot(core: Any, page_size: int = _PAGE_SIZE) -> ClusterSnapshot:
    nodes = _list_all(core.list_node, page_size)
    # Every namespace: another team's pods take node capacity just the same.
    pods = _list_all(core.list_pod_for_all_namespaces, page_size, field_selector=_NON_TERMINAL)
    return ClusterSnapshot(nodes=nodes, pods=pods, source="kubernetes")


def _list_all(list_call: Any, page_size: int, **kwargs: Any) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    token = None
    while True:
        extra = {"_continue": token} if token else {}
        response = list_call(limit=page_size, _preload_content=False,
                             _request_timeout=_REQUEST_TIMEOUT, **kwargs, **extra)
        body = json.loads(response.data)
        items.extend(body.get("items") or [])
        token = (body.get("metadata") or {}).get("continue")
        if not token:
            return items


def local_snapshot() -> ClusterSnapshot:
    """This machine as one node. Memory already in use counts as one running pod's request,
    so free memory is what is available now; CPU is compressible and counted whole."""
    import psutil

    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    memory = psutil.virtual_memory()
    allocatable = {"cpu": str(cpus or 1), "memory": str(memory.total), "pods": "110"}
    gpus = local_gpu_count()
    if gpus:
        allocatable["nvidia.com/gpu"] = str(gpus)
    name = socket.gethostname() or "localhost"
    node = {
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name,
                                              LOCAL_NODE_LABEL: "true"}},
        "spec": {},
        "status": {"allocatable": allocatable,
                   "conditions": [{"type": "Ready", "status": "True"}]},
    }
    in_use = {
        "metadata": {"name": "local-processes"},
        "spec": {"nodeName": name, "containers": [
            {"name": "in-use", "resources": {"requests": {
                "memory": str(memory.total - memory.available)}}}]},
        "status": {"phase": "Running"},
    }
    return ClusterSnapshot(nodes=[node], pods=[in_use], source="local")


def local_gpu_count() -> int:
    """GPUs nvidia-smi lists, 0 when it is absent or fails (no driver, no device)."""
    binary = shutil.which("nvidia-smi")
    if not binary:
        return 0
    try:
        out = subprocess.run([binary, "--query-gpu=index", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return 0
    return sum(1 for line in out.splitlines() if line.strip())
