"""One capacity check, shared by the sensor (poke) and the trigger (in a thread).

Its settings are plain JSON values, so the trigger can be serialised and rebuilt in the
triggerer with exactly the check the sensor would have run.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from synthfactory_airflow.operators.kube_client import kubernetes_hook
from synthfactory_airflow.plugins.capacity.cluster import (
    ClusterSnapshot,
    kubernetes_snapshot,
    local_snapshot,
)
from synthfactory_airflow.plugins.capacity.fit import WaveFit, build_nodes, fit_wave
from synthfactory_airflow.plugins.capacity.kueue import (
    admission_labels,
    fit_cluster_queue,
    read_cluster_queue,
)
from synthfactory_airflow.plugins.capacity.pools import PoolSlots, open_slots
from synthfactory_airflow.plugins.capacity.report import group_row, render_table
from synthfactory_airflow.plugins.capacity.wave import PodGroup, parse_wave

CLUSTERS = ("local", "kubernetes")


@dataclass
class CheckResult:
    fits: bool
    never: str | None  # set when some pod can never fit (fail instead of waiting)
    table: str
    xcom: dict[str, Any] = field(default_factory=dict)
    # what the figures came from: the groups' fit and the Airflow pools' slots (metrics)
    fit: WaveFit | None = None
    slots: list[PoolSlots] = field(default_factory=list)


@dataclass(frozen=True)
class CapacityCheck:
    wave: list[dict[str, Any]]
    cluster: str = "local"
    namespace: str | None = None
    kubernetes_conn_id: str | None = "kubernetes_default"
    config_file: str | None = None
    cluster_context: str | None = None
    airflow_pools: dict[str, int] | None = None
    airflow_api_conn_id: str = "airflow_api"
    kueue_cluster_queue: str | None = None
    kueue_local_queue: str | None = None
    fail_when_impossible: bool | None = None
    # pool -> Kubernetes connection of the cluster that runs that pool's pods; pools not
    # listed are fitted on kubernetes_conn_id's cluster
    pool_connections: dict[str, str] | None = None

    def __post_init__(self) -> None:
        if self.cluster not in CLUSTERS:
            raise ValueError(f"cluster: expected one of {CLUSTERS}, got {self.cluster!r}")
        if self.kueue_cluster_queue and self.cluster != "kubernetes":
            raise ValueError("kueue_cluster_queue: Kueue mode needs cluster='kubernetes'")
        parse_wave(self.wave)  # a bad wave fails here, naming the group and the field

    def to_kwargs(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def fails_when_impossible(self) -> bool:
        # On Kubernetes a cluster autoscaler may still add the node the pod needs.
        if self.fail_when_impossible is None:
            return self.cluster == "local"
        return self.fail_when_impossible

    def run(self, snapshot: ClusterSnapshot | None = None) -> CheckResult:
        started = time.monotonic()
        groups = parse_wave(self.wave)
        pod_labels: dict[str, str] = {}
        if self.kueue_cluster_queue:
            queue = read_cluster_queue(self._hook().custom_object_client, self.kueue_cluster_queue)
            fit = fit_cluster_queue(groups, queue)
            pod_labels = admission_labels(self.kueue_local_queue)
            source = f"kueue ClusterQueue {self.kueue_cluster_queue}"
        elif snapshot is None and self.cluster == "kubernetes" and self.pool_connections:
            fit, source = self._fit_across_clusters(groups)
        else:
            if snapshot is None:
                snapshot = (local_snapshot() if self.cluster == "local"
                            else kubernetes_snapshot(self._hook().core_v1_client))
            if snapshot.source == "local":
                # The local runner runs every pod on this machine: selectors and taints
                # written for the Kubernetes pools do not apply.
                groups = [replace(g, node_selector={}, tolerations=()) for g in groups]
            fit = fit_wave(groups, build_nodes(snapshot.nodes, snapshot.pods))
            source = f"{snapshot.source}: {len(snapshot.nodes)} nodes, {len(snapshot.pods)} pods"
        slots: list[PoolSlots] = []
        if self.airflow_pools:
            slots = open_slots(self.airflow_api_conn_id, self.airflow_pools)
        fits = fit.fits and all(s.fits for s in slots)
        rows = [group_row(g) for g in fit.groups] + [s.row() for s in slots]
        table = render_table(rows) + _footer(fit, source, time.monotonic() - started)
        return CheckResult(fits=fits, never=self._never(fit), table=table,
                           xcom=_xcom(fit, pod_labels, self.namespace), fit=fit, slots=slots)

    def _hook(self, conn_id: str | None = None) -> Any:
        return kubernetes_hook(conn_id or self.kubernetes_conn_id, config_file=self.config_file,
                               cluster_context=self.cluster_context)

    def _fit_across_clusters(self, groups: list[PodGroup]) -> tuple[WaveFit, str]:
        """Each pool's groups on its own cluster's nodes, every cluster read in this one
        check: the wave is admitted only when CPU and GPU capacity are free together."""
        by_conn: dict[str | None, list[PodGroup]] = {}
        for group in groups:
            conn_id = (self.pool_connections or {}).get(group.pool) or self.kubernetes_conn_id
            by_conn.setdefault(conn_id, []).append(group)
        fits: list[WaveFit] = []
        sources: list[str] = []
        for conn_id, members in by_conn.items():
            snapshot = kubernetes_snapshot(self._hook(conn_id).core_v1_client)
            fits.append(fit_wave(members, build_nodes(snapshot.nodes, snapshot.pods)))
            sources.append(f"{conn_id}: {len(snapshot.nodes)} nodes, {len(snapshot.pods)} pods")
        order = {g.name: i for i, g in enumerate(groups)}  # names are unique in a wave
        merged = WaveFit(
            groups=sorted((g for f in fits for g in f.groups), key=lambda g: order[g.group.name]),
            nodes=sum(f.nodes for f in fits),
            blocked=sum((f.blocked for f in fits), Counter()))
        return merged, "kubernetes " + "; ".join(sources)

    def _never(self, fit: WaveFit) -> str | None:
        impossible = fit.never_fits
        if not impossible or not self.fails_when_impossible:
            return None
        names = ", ".join(f"{g.group.name} ({g.why_not or 'no node'})" for g in impossible)
        return f"these pods can never fit, even on an empty node: {names}"


def _footer(fit: WaveFit, source: str, seconds: float) -> str:
    skipped = "".join(f", {n} {reason}" for reason, n in sorted(fit.blocked.items()))
    verdict = ("wave fits" if fit.fits else "some pods can never fit" if fit.never_fits
               else "wave does not fit yet")
    return f"\n[{verdict}; {source}{skipped}; checked in {seconds * 1000:.0f} ms]"


def _xcom(fit: WaveFit, pod_labels: dict[str, str], namespace: str | None) -> dict[str, Any]:
    """What the sensor returns: where each group would go, and labels for its pods."""
    return {
        "fits": fit.fits,
        "placements": {g.group.name: g.placements for g in fit.groups},
        "pod_labels": pod_labels,
        "namespace": namespace,
    }
