"""Kueue mode: fit the wave against a ClusterQueue's free quota, one flavour at a time.

Each flavour of a resource group is a bin whose free room is nominalQuota minus what is
reserved (status.flavorsReservation, else flavorsUsage); pods are placed first-fit
decreasing across flavours by the same code as nodes. Borrowing from the cohort is not
counted: it is not guaranteed, and the sensor must not admit on hope.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from synthfactory_airflow.plugins.capacity.fit import GroupFit, NodeState, WaveFit, fit_wave
from synthfactory_airflow.plugins.capacity.quantities import PODS, parse_resources
from synthfactory_airflow.plugins.capacity.wave import PodGroup

GROUP, VERSION, PLURAL = "kueue.x-k8s.io", "v1beta1", "clusterqueues"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
_FLAVOR_LABEL = "kueue.x-k8s.io/flavor"


def read_cluster_queue(custom_objects: Any, name: str) -> dict[str, Any]:
    return custom_objects.get_cluster_custom_object(GROUP, VERSION, PLURAL, name)


def admission_labels(local_queue: str | None) -> dict[str, str]:
    """Labels the wave's pods must carry for Kueue to admit them through `local_queue`."""
    return {QUEUE_LABEL: local_queue} if local_queue else {}


def flavor_bins(cluster_queue: Mapping[str, Any]) -> list[tuple[set[str], list[NodeState]]]:
    """Per resource group: its covered resources and one bin per flavour, in queue order."""
    status = cluster_queue.get("status") or {}
    used: dict[str, dict[str, int]] = {}
    for entry in status.get("flavorsReservation") or status.get("flavorsUsage") or ():
        used[entry["name"]] = {r["name"]: parse_resources({r["name"]: r.get("total", 0)})[r["name"]]
                               for r in entry.get("resources") or ()}
    groups = []
    for rg in (cluster_queue.get("spec") or {}).get("resourceGroups") or ():
        bins = []
        for flavor in rg.get("flavors") or ():
            nominal = parse_resources({r["name"]: r["nominalQuota"] for r in flavor["resources"]})
            free = {name: quota - used.get(flavor["name"], {}).get(name, 0)
                    for name, quota in nominal.items()}
            bins.append(NodeState(name=flavor["name"], labels={_FLAVOR_LABEL: flavor["name"]},
                                  taints=[], allocatable=nominal, free=free))
        groups.append((set(rg.get("coveredResources") or ()), bins))
    return groups


def fit_cluster_queue(groups: Sequence[PodGroup], cluster_queue: Mapping[str, Any]) -> WaveFit:
    """Fit per resource group; a pod group is placed as far as its tightest resource group."""
    resource_groups = flavor_bins(cluster_queue)
    covered = set().union(*(names for names, _ in resource_groups)) if resource_groups else set()
    results: dict[str, GroupFit] = {}
    placements: dict[str, dict[str, int]] = {}
    for names, bins in resource_groups:
        flavors = {b.name for b in bins}
        sub_groups = [_restrict(g, names, flavors) for g in groups
                      if set(g.shown_resources) & names]
        for result in fit_wave(sub_groups, bins).groups:
            placements.setdefault(result.group.name, {}).update(result.placements)
            previous = results.get(result.group.name)
            if previous is None or result.placed < previous.placed:
                results[result.group.name] = result
    fits = []
    for group in groups:
        result = results.get(group.name)
        missing = sorted(set(group.shown_resources) - covered)
        if result is None or missing:
            result = GroupFit(group=group, placed=0, placements={}, free={}, largest={},
                              largest_node=None, never_fits=group.count > 0,
                              why_not=f"ClusterQueue covers none of {missing or 'its resources'}")
        else:
            result = replace(result, group=group, placements=placements[group.name],
                             why_not=result.why_not.replace("nodes are available",
                                                            "flavors have quota"))
        fits.append(result)
    return WaveFit(groups=fits, nodes=sum(len(bins) for _, bins in resource_groups))


def _restrict(group: PodGroup, names: set[str], flavors: set[str]) -> PodGroup:
    """The part of `group` one resource group sees; a pinned flavour binds only its own."""
    requests = {n: v for n, v in group.requests.items() if n in names and n != PODS}
    selector = {_FLAVOR_LABEL: group.flavor} if group.flavor in flavors else {}
    return replace(group, requests=requests, node_selector=selector, tolerations=())
