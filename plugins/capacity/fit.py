"""Does a whole wave of pods fit the cluster right now? Pure Python, no Airflow import.

Nodes and pods are the JSON dicts the Kubernetes API serves (`/api/v1/nodes`,
`/api/v1/pods`). A node's free capacity is its allocatable minus the effective requests
of the non-terminal pods bound to it, computed as the scheduler does. The wave is placed
by first-fit decreasing; a placement found is a proof that the wave fits (FFD may miss a
packing that exists, never the reverse), so the sensor errs on the side of waiting.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from synthfactory_airflow.plugins.capacity.quantities import (
    CPU,
    MEMORY,
    PODS,
    Resources,
    add_into,
    max_into,
    parse_resources,
)
from synthfactory_airflow.plugins.capacity.wave import PodGroup

TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})
_BLOCKING_EFFECTS = frozenset({"NoSchedule", "NoExecute"})
# Pod-level `spec.resources` (PodLevelResources) may set only these; they then win.
_POD_LEVEL_RESOURCES = frozenset({CPU, MEMORY})
_KUBELET_DEFAULT_MAX_PODS = 110
_NOT_EXTENDED = frozenset({CPU, MEMORY, PODS, "ephemeral-storage"})


@dataclass
class NodeState:
    """One node: what it could hold and what is free of it in this snapshot."""

    name: str
    labels: dict[str, str]
    taints: list[dict[str, Any]]  # only NoSchedule / NoExecute: those keep pods off
    allocatable: Resources
    free: Resources
    blocked: str | None = None  # "unschedulable" (cordoned) or "not ready"


@dataclass
class GroupFit:
    """The outcome for one pod group of the wave."""

    group: PodGroup
    placed: int
    placements: dict[str, int]  # node name -> pods placed there
    free: Resources  # summed over the nodes this group may use, before the wave
    largest: Resources  # free capacity of the best single node for this group
    largest_node: str | None
    why_not: str = ""  # the scheduler-style reason the first unplaced pod has no node
    never_fits: bool = False  # no node could hold one pod even if it were empty

    @property
    def fits(self) -> bool:
        return self.placed >= self.group.count


@dataclass
class WaveFit:
    groups: list[GroupFit]
    nodes: int
    blocked: Counter[str] = field(default_factory=Counter)

    @property
    def fits(self) -> bool:
        return all(g.fits for g in self.groups)

    @property
    def never_fits(self) -> list[GroupFit]:
        return [g for g in self.groups if g.never_fits]


def container_requests(container: Mapping[str, Any]) -> Resources:
    """A container's requests; a resource with only a limit requests the limit (API defaulting)."""
    resources = container.get("resources") or {}
    requests = parse_resources(resources.get("requests"))
    for name, value in parse_resources(resources.get("limits")).items():
        requests.setdefault(name, value)
    return requests


def effective_requests(spec: Mapping[str, Any]) -> Resources:
    """What the scheduler reserves for a pod: max(sum(containers), init peak) + overhead.

    Sidecars (init containers with restartPolicy Always) keep running next to the app
    containers, so they add to the sum and to every later init container's peak.
    """
    total: Resources = {}
    for container in spec.get("containers") or ():
        add_into(total, container_requests(container))
    init_peak: Resources = {}
    sidecars: Resources = {}
    for container in spec.get("initContainers") or ():
        requests = container_requests(container)
        if container.get("restartPolicy") == "Always":
            add_into(total, requests)
            add_into(sidecars, requests)
            max_into(init_peak, sidecars)
        else:
            running = dict(sidecars)
            add_into(running, requests)
            max_into(init_peak, running)
    max_into(total, init_peak)
    pod_level = parse_resources((spec.get("resources") or {}).get("requests"))
    for name, value in pod_level.items():
        if name in _POD_LEVEL_RESOURCES:
            total[name] = value
    add_into(total, parse_resources(spec.get("overhead")))
    return total


def is_terminal(pod: Mapping[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") in TERMINAL_PHASES


def build_nodes(
    nodes: Iterable[Mapping[str, Any]], pods: Iterable[Mapping[str, Any]]
) -> list[NodeState]:
    """Per-node free capacity: allocatable minus what non-terminal bound pods request."""
    states: dict[str, NodeState] = {}
    for node in nodes:
        state = _node_state(node)
        states[state.name] = state
    for pod in pods:
        spec = pod.get("spec") or {}
        node = states.get(spec.get("nodeName") or "")
        # Unbound pods hold nothing yet; terminal pods have released their requests.
        if node is None or is_terminal(pod):
            continue
        free = node.free
        for name, value in effective_requests(spec).items():
            free[name] = free.get(name, 0) - value
        free[PODS] = free.get(PODS, 0) - 1
    return list(states.values())


def _node_state(node: Mapping[str, Any]) -> NodeState:
    metadata = node.get("metadata") or {}
    spec = node.get("spec") or {}
    status = node.get("status") or {}
    allocatable = parse_resources(status.get("allocatable") or status.get("capacity"))
    allocatable.setdefault(PODS, _KUBELET_DEFAULT_MAX_PODS)
    ready = any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in status.get("conditions") or ()
    )
    blocked = "unschedulable" if spec.get("unschedulable") else None if ready else "not ready"
    return NodeState(
        name=metadata.get("name", ""),
        labels=dict(metadata.get("labels") or {}),
        taints=[t for t in spec.get("taints") or () if t.get("effect") in _BLOCKING_EFFECTS],
        allocatable=allocatable,
        free=dict(allocatable),
        blocked=blocked,
    )


def tolerates(tolerations: Sequence[Mapping[str, Any]], taint: Mapping[str, Any]) -> bool:
    """Kubernetes toleration matching (an empty key with Exists tolerates everything)."""
    for tol in tolerations:
        effect = tol.get("effect")
        if effect and effect != taint.get("effect"):
            continue
        key = tol.get("key") or ""
        operator = tol.get("operator") or "Equal"
        if not key:
            if operator == "Exists":
                return True
            continue
        if key != taint.get("key"):
            continue
        if operator == "Exists" or (tol.get("value") or "") == (taint.get("value") or ""):
            return True
    return False


def _exclusion(group: PodGroup, node: NodeState) -> str | None:
    """Why `group` may never use `node` (selector or taint), independent of load."""
    labels = node.labels
    for key, value in group.node_selector.items():
        if labels.get(key) != value:
            return "node(s) didn't match Pod's node affinity/selector"
    for taint in node.taints:
        if not tolerates(group.tolerations, taint):
            shown = f"{taint.get('key')}: {taint.get('value', '')}".rstrip(": ")
            return f"node(s) had untolerated taint {{{shown}}}"
    return None


def _how_many(requests: Mapping[str, int], free: Mapping[str, int]) -> int:
    best: int | None = None
    for name, need in requests.items():
        if need <= 0:
            continue
        n = free.get(name, 0) // need
        if n <= 0:
            return 0
        best = n if best is None or n < best else best
    return best if best is not None else 1 << 30


def _size_key(group: PodGroup, largest_alloc: Mapping[str, int]) -> tuple[int, float]:
    """Decreasing order: scarce extended resources (GPUs) first, then the dominant share.

    Placing GPU pods first keeps CPU pods without a selector from taking the CPU a GPU
    node needs for its own GPU pods.
    """
    extended = sum(v for n, v in group.requests.items() if n not in _NOT_EXTENDED)
    share = max(
        (v / largest_alloc[n] if largest_alloc.get(n) else float("inf"))
        for n, v in group.requests.items()
        if n != PODS and v > 0
    ) if any(n != PODS and v > 0 for n, v in group.requests.items()) else 0.0
    return (extended, share)


def fit_wave(groups: Sequence[PodGroup], nodes: Sequence[NodeState]) -> WaveFit:
    """Place every pod of every group first-fit decreasing on one copy of the nodes' free."""
    largest_alloc: Resources = {}
    for node in nodes:
        max_into(largest_alloc, node.allocatable)
    free = [dict(node.free) for node in nodes]
    exclusions = [[_exclusion(group, node) for node in nodes] for group in groups]
    order = sorted(range(len(groups)), key=lambda i: _size_key(groups[i], largest_alloc),
                   reverse=True)
    results: list[GroupFit | None] = [None] * len(groups)
    for gi in order:
        group, excluded = groups[gi], exclusions[gi]
        usable = [i for i, node in enumerate(nodes) if node.blocked is None and not excluded[i]]
        result = _summary(group, nodes, usable, excluded)
        remaining = group.count
        # Identical pods: first fit fills node i until it is full, then never returns to it.
        for i in usable:
            if remaining == 0:
                break
            n = min(_how_many(group.requests, free[i]), remaining)
            if n:
                for name, need in group.requests.items():
                    free[i][name] = free[i].get(name, 0) - need * n
                result.placements[nodes[i].name] = n
                remaining -= n
        result.placed = group.count - remaining
        if remaining:
            result.why_not = _why_not(group, nodes, free, excluded)
        results[gi] = result
    blocked = Counter(node.blocked for node in nodes if node.blocked)
    return WaveFit(groups=[r for r in results if r is not None], nodes=len(nodes), blocked=blocked)


def _summary(group: PodGroup, nodes: Sequence[NodeState], usable: list[int],
             excluded: list[str | None]) -> GroupFit:
    shown = group.shown_resources
    total: Resources = {name: 0 for name in shown}
    best, best_key = None, (-1, -1)
    for i in usable:
        node_free = nodes[i].free
        for name in shown:
            total[name] += max(node_free.get(name, 0), 0)
        key = (_how_many(group.requests, node_free), sum(node_free.get(n, 0) for n in shown))
        if key > best_key:
            best, best_key = i, key
    largest = {n: max(nodes[best].free.get(n, 0), 0) for n in shown} if best is not None else {}
    never = not any(
        excluded[i] is None and _how_many(group.requests, nodes[i].allocatable) > 0
        for i in range(len(nodes))
    )
    return GroupFit(group=group, placed=0, placements={}, free=total, largest=largest,
                    largest_node=nodes[best].name if best is not None else None,
                    never_fits=never and group.count > 0)


def _why_not(group: PodGroup, nodes: Sequence[NodeState], free: list[Resources],
             excluded: list[str | None]) -> str:
    """The message a pending pod would get: '0/N nodes are available: 2 Insufficient cpu, ...'."""
    reasons: Counter[str] = Counter()
    for i, node in enumerate(nodes):
        if node.blocked == "unschedulable":
            reasons["node(s) were unschedulable"] += 1
        elif node.blocked:
            reasons["node(s) were not ready"] += 1
        elif excluded[i]:
            reasons[excluded[i]] += 1
        else:
            for name, need in group.requests.items():
                if need > free[i].get(name, 0):
                    reasons["Too many pods" if name == PODS else f"Insufficient {name}"] += 1
    detail = ", ".join(f"{count} {reason}" for reason, count in sorted(
        reasons.items(), key=lambda item: (-item[1], item[0])))
    return f"0/{len(nodes)} nodes are available: {detail or 'no nodes'}"
