"""Capacity fit vs a naive cluster-wide sum: 1,000 nodes, 20,000 pods, a wave of 500 pods.

Each scenario is one snapshot with a different level of GPU fragmentation. The fit
(per-node first-fit decreasing, including building free capacity from the pods) and the
naive check (per pool: sum of free >= sum of needed) run on the same snapshot; a false
admission is a scenario the naive check admits although the wave cannot be placed. The two
pools here are disjoint and each holds identical pods, for which first-fit places as many
pods as any packing could, so the fit's "no" is exact in this benchmark.

    python benchmarks/capacity.py [--scenarios 8] [--seed 0]

Last line: ``RESULT capacity nodes=N pods=P wave=W fit_ms=X naive_ms=Y
false_admits_naive=K isa=I`` (I: the CPU's vector extensions, benchmarks/machine.py).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from machine import print_machine, result_line  # noqa: E402  (this folder is on sys.path)

from synthfactory_airflow.plugins.capacity.fit import (  # noqa: E402
    build_nodes,
    effective_requests,
    fit_wave,
    is_terminal,
)
from synthfactory_airflow.plugins.capacity.quantities import PODS, parse_resources  # noqa: E402
from synthfactory_airflow.plugins.capacity.wave import PodGroup, parse_wave  # noqa: E402

NODES, PODS_TOTAL, GPU_NODES = 1000, 20000, 250
WAVE = [
    {"pool": "gpu", "count": 100,
     "requests": {"cpu": "16", "memory": "128Gi", "nvidia.com/gpu": "2"},
     "node_selector": {"pool": "gpu"},
     "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}]},
    {"pool": "cpu", "count": 400, "requests": {"cpu": "4", "memory": "8Gi"},
     "node_selector": {"pool": "cpu"}},
]


def make_cluster(rng: random.Random, fragmentation: float) -> tuple[list[dict], list[dict]]:
    """250 GPU nodes (8 GPUs) and 750 CPU nodes; `fragmentation` of GPU nodes keep 1 GPU free."""
    nodes, pods = [], []
    for i in range(NODES):
        gpu = i < GPU_NODES
        allocatable = ({"cpu": "190", "memory": "1900Gi", "nvidia.com/gpu": "8", "pods": "110"}
                       if gpu else {"cpu": "63500m", "memory": "250Gi", "pods": "110"})
        nodes.append({
            "metadata": {"name": f"node-{i:04d}", "labels": {"pool": "gpu" if gpu else "cpu"}},
            "spec": {"taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}] if gpu else [],
                     "unschedulable": rng.random() < 0.01},
            "status": {"allocatable": allocatable,
                       "conditions": [{"type": "Ready", "status": "True"}]},
        })
    for i in range(GPU_NODES):
        fragmented = rng.random() < fragmentation
        busy_gpus = 7 if fragmented else rng.choice([0, 2, 4, 6])
        for g in range(busy_gpus):
            pods.append(_pod(f"train-{i}-{g}", f"node-{i:04d}", "8", "64Gi", gpus=1))
    while len(pods) < PODS_TOTAL:
        n = rng.randrange(GPU_NODES, NODES)
        phase = "Succeeded" if rng.random() < 0.1 else "Running"
        cpu = rng.choice(["250m", "500m", "1", "2"])
        pods.append(_pod(f"svc-{len(pods)}", f"node-{n:04d}", cpu, rng.choice(["1Gi", "2Gi"]),
                         phase=phase, init=rng.random() < 0.2))
    return nodes, pods


def _pod(name, node, cpu, memory, gpus=0, phase="Running", init=False):
    limits = {"cpu": cpu, "memory": memory}
    if gpus:
        limits["nvidia.com/gpu"] = str(gpus)
    spec = {"nodeName": node, "containers": [
        {"name": "main", "resources": {"requests": {"cpu": cpu, "memory": memory},
                                       "limits": limits}},
        {"name": "sidecar", "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}}}]}
    if init:
        spec["initContainers"] = [{"name": "fetch", "resources": {
            "requests": {"cpu": "1", "memory": "512Mi"}}}]
    return {"metadata": {"name": name}, "spec": spec, "status": {"phase": phase}}


def naive_fits(groups: list[PodGroup], nodes: list[dict], pods: list[dict]) -> bool:
    """Per pool: total free over the pool's schedulable nodes >= total the wave requests."""
    pool_of = {n["metadata"]["name"]: n["metadata"]["labels"]["pool"] for n in nodes
               if not n["spec"].get("unschedulable")}
    free: dict[str, dict[str, int]] = {}
    for n in nodes:
        pool = pool_of.get(n["metadata"]["name"])
        if pool:
            for name, value in parse_resources(n["status"]["allocatable"]).items():
                free.setdefault(pool, {}).setdefault(name, 0)
                free[pool][name] += value
    for p in pods:
        pool = pool_of.get(p["spec"].get("nodeName", ""))
        if pool and not is_terminal(p):
            for name, value in effective_requests(p["spec"]).items():
                free[pool][name] = free[pool].get(name, 0) - value
    for g in groups:
        pool = g.node_selector["pool"]
        for name, value in g.requests.items():
            if name != PODS and free[pool].get(name, 0) < value * g.count:
                return False
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenarios", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    groups = parse_wave(WAVE)
    wave_pods = sum(g.count for g in groups)
    fit_times, naive_times, false_admits = [], [], 0
    print_machine()
    for s in range(args.scenarios):
        fragmentation = s / max(args.scenarios - 1, 1)
        nodes, pods = make_cluster(rng, fragmentation)
        t0 = time.perf_counter()
        fit = fit_wave(groups, build_nodes(nodes, pods))
        t1 = time.perf_counter()
        naive = naive_fits(groups, nodes, pods)
        t2 = time.perf_counter()
        fit_times.append((t1 - t0) * 1000)
        naive_times.append((t2 - t1) * 1000)
        if naive and not fit.fits:
            false_admits += 1
        if fit.fits and not naive:
            raise SystemExit("fit admitted a wave the totals cannot hold: the fit is wrong")
        gpu = fit.groups[0]
        print(f"scenario {s}: fragmentation={fragmentation:.2f} fit={fit.fits} naive={naive} "
              f"gpu_placed={gpu.placed}/{gpu.group.count} "
              f"fit_ms={fit_times[-1]:.1f} naive_ms={naive_times[-1]:.1f}")
    print_machine()
    fit_ms, naive_ms = statistics.median(fit_times), statistics.median(naive_times)
    print(f"median over {args.scenarios} scenarios; fit/naive time ratio "
          f"{fit_ms / naive_ms:.2f}; false admissions of the naive check: {false_admits}")
    print(result_line("capacity", nodes=NODES, pods=PODS_TOTAL, wave=wave_pods,
                      fit_ms=f"{fit_ms:.1f}", naive_ms=f"{naive_ms:.1f}",
                      false_admits_naive=false_admits))


if __name__ == "__main__":
    main()
