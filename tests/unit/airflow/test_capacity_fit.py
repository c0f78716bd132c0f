"""The wave fit on node and pod objects shaped as the Kubernetes API serves them."""

from __future__ import annotations

import re

import pytest

from synthfactory_airflow.plugins.capacity.fit import (
    build_nodes,
    effective_requests,
    fit_wave,
    tolerates,
)
from synthfactory_airflow.plugins.capacity.quantities import parse_resource, parse_resources
from synthfactory_airflow.plugins.capacity.report import group_row
from synthfactory_airflow.plugins.capacity.wave import WaveError, parse_wave

GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def node(name, cpu="16", memory="128Gi", gpus=0, pool="cpu", taints=(), ready=True,
         unschedulable=False, max_pods="110"):
    allocatable = {"cpu": cpu, "memory": memory, "pods": max_pods, "ephemeral-storage": "100Gi"}
    if gpus:
        allocatable["nvidia.com/gpu"] = str(gpus)
    spec = {"taints": list(taints)}
    if unschedulable:
        spec["unschedulable"] = True
    return {
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name,
                                              "synthfactory.io/pool": pool}},
        "spec": spec,
        "status": {
            "capacity": allocatable,
            "allocatable": allocatable,
            "conditions": [
                {"type": "MemoryPressure", "status": "False"},
                {"type": "Ready", "status": "True" if ready else "Unknown"},
            ],
        },
    }


def pod(name, node_name, cpu="1", memory="1Gi", gpus=0, phase="Running", init=(), **spec_extra):
    requests = {"cpu": cpu, "memory": memory}
    resources = {"requests": requests, "limits": dict(requests)}
    if gpus:
        resources["limits"]["nvidia.com/gpu"] = str(gpus)  # GPUs are set as limits only
    spec = {"nodeName": node_name, "containers": [{"name": "main", "image": "w:1",
                                                   "resources": resources}], **spec_extra}
    if init:
        spec["initContainers"] = list(init)
    return {"kind": "Pod", "metadata": {"name": name, "namespace": "team-a"}, "spec": spec,
            "status": {"phase": phase}}


def gpu_group(count=2, cpu="8", memory="64Gi", gpus="1", tolerations=(GPU_TOLERATION,)):
    return {"pool": "gpu", "count": count,
            "requests": {"cpu": cpu, "memory": memory, "nvidia.com/gpu": gpus},
            "node_selector": {"synthfactory.io/pool": "gpu"}, "tolerations": list(tolerations)}


def cpu_group(count=4, cpu="2", memory="4Gi"):
    return {"pool": "cpu", "count": count, "requests": {"cpu": cpu, "memory": memory},
            "node_selector": {"synthfactory.io/pool": "cpu"}}


def fit(wave, nodes, pods=()):
    return fit_wave(parse_wave(wave), build_nodes(nodes, pods))


def by_pool(result):
    return {g.group.name: g for g in result.groups}


def cluster():
    return [
        node("gpu-a", cpu="32", memory="256Gi", gpus=2, pool="gpu", taints=[GPU_TAINT]),
        node("gpu-b", cpu="32", memory="256Gi", gpus=2, pool="gpu", taints=[GPU_TAINT]),
        node("cpu-a", cpu="8", memory="32Gi"),
        node("cpu-b", cpu="8", memory="32Gi"),
    ]


def test_wave_that_fits_is_placed_pod_by_pod():
    result = fit([gpu_group(count=3), cpu_group(count=6)], cluster())
    assert result.fits
    groups = by_pool(result)
    assert groups["gpu"].placements == {"gpu-a": 2, "gpu-b": 1}
    assert groups["cpu"].placements == {"cpu-a": 4, "cpu-b": 2}


def test_gpu_only_shortage_blocks_the_whole_wave():
    pods = [pod(f"busy-{n}", n, cpu="2", gpus=2) for n in ("gpu-a", "gpu-b")]
    result = fit([gpu_group(count=1), cpu_group(count=2)], cluster(), pods)
    groups = by_pool(result)
    assert not result.fits
    assert groups["cpu"].fits and not groups["gpu"].fits
    assert groups["gpu"].why_not == (
        "0/4 nodes are available: 2 Insufficient nvidia.com/gpu, "
        "2 node(s) didn't match Pod's node affinity/selector")
    assert not groups["gpu"].never_fits  # busy, not impossible: keep waiting


def test_cpu_only_shortage_blocks_the_whole_wave():
    pods = [pod("etl-1", "cpu-a", cpu="7"), pod("etl-2", "cpu-b", cpu="7500m")]
    result = fit([gpu_group(count=4), cpu_group(count=1)], cluster(), pods)
    groups = by_pool(result)
    assert groups["gpu"].fits and not groups["cpu"].fits
    assert "2 Insufficient cpu" in groups["cpu"].why_not
    assert not result.fits


def test_fragmented_cluster_waits_although_the_totals_would_fit():
    nodes = [node(f"gpu-{i}", cpu="32", memory="256Gi", gpus=4, pool="gpu") for i in range(4)]
    # Each node has 1 of 4 GPUs free: 4 free in all, but no node has 2.
    pods = [pod(f"old-{i}", f"gpu-{i}", cpu="4", gpus=3) for i in range(4)]
    wave = [gpu_group(count=2, gpus="2", tolerations=())]
    result = fit(wave, nodes, pods)
    free_gpus = by_pool(result)["gpu"].free["nvidia.com/gpu"]
    assert free_gpus == 4 >= 2 * 2  # what a cluster-wide sum would admit
    assert not result.fits
    assert by_pool(result)["gpu"].largest["nvidia.com/gpu"] == 1
    assert "4 Insufficient nvidia.com/gpu" in by_pool(result)["gpu"].why_not


def test_untolerated_noschedule_and_noexecute_taints_keep_pods_off():
    nodes = [
        node("gpu-a", gpus=2, pool="gpu", taints=[GPU_TAINT]),
        node("gpu-b", gpus=2, pool="gpu",
             taints=[{"key": "maintenance", "effect": "NoExecute"}]),
        node("gpu-c", gpus=2, pool="gpu",
             taints=[{"key": "spot", "value": "true", "effect": "PreferNoSchedule"}]),
    ]
    untolerated = by_pool(fit([gpu_group(count=4, tolerations=())], nodes))["gpu"]
    assert untolerated.placements == {"gpu-c": 2}  # PreferNoSchedule does not block
    assert "1 node(s) had untolerated taint {nvidia.com/gpu: present}" in untolerated.why_not
    assert "1 node(s) had untolerated taint {maintenance}" in untolerated.why_not
    tolerated = fit([gpu_group(count=4, tolerations=[GPU_TOLERATION])], nodes)
    assert tolerated.fits
    assert by_pool(tolerated)["gpu"].placements == {"gpu-a": 2, "gpu-c": 2}


def test_toleration_matching_follows_kubernetes_rules():
    taint = {"key": "dedicated", "value": "llm", "effect": "NoSchedule"}
    assert tolerates([{"key": "dedicated", "value": "llm"}], taint)  # Equal, any effect
    assert not tolerates([{"key": "dedicated", "value": "etl"}], taint)
    assert not tolerates([{"key": "dedicated", "operator": "Exists", "effect": "NoExecute"}],
                         taint)
    assert tolerates([{"operator": "Exists"}], taint)  # empty key + Exists: everything
    assert not tolerates([{"value": "llm"}], taint)


def test_cordoned_and_not_ready_nodes_are_skipped():
    nodes = [
        node("gpu-a", cpu="32", memory="256Gi", gpus=2, pool="gpu", unschedulable=True),
        node("gpu-b", cpu="32", memory="256Gi", gpus=2, pool="gpu", ready=False),
        node("gpu-c", cpu="32", memory="256Gi", gpus=2, pool="gpu"),
    ]
    result = fit([gpu_group(count=3)], nodes)
    group = by_pool(result)["gpu"]
    assert group.placed == 2 and group.placements == {"gpu-c": 2}
    assert group.why_not == ("0/3 nodes are available: 1 Insufficient nvidia.com/gpu, "
                             "1 node(s) were not ready, 1 node(s) were unschedulable")
    assert dict(result.blocked) == {"unschedulable": 1, "not ready": 1}
    assert group.free["nvidia.com/gpu"] == 2  # free counts only nodes the pods may use


def test_init_containers_count_as_kubernetes_counts_them():
    spec = {
        "containers": [_container("2", "1Gi"), _container("1", "1Gi")],
        "initContainers": [_container("6", "1Gi"), _container("500m", "12Gi")],
        "overhead": {"cpu": "250m", "memory": "128Mi"},
    }
    # max(sum(containers)=3 cpu/2Gi, max(init)=6 cpu/12Gi) + overhead
    assert effective_requests(spec) == parse_resources({"cpu": "6250m", "memory": "12416Mi"})

    nodes = [node("gpu-a", cpu="16", gpus=2, pool="gpu")]
    busy = pod("loader", "gpu-a", cpu="1", init=[_container("10", "1Gi")])
    result = fit([gpu_group(count=1, cpu="8", tolerations=())], nodes, [busy])
    assert not result.fits  # 16 - max(1, 10) = 6 cpu left, the pod needs 8
    assert by_pool(result)["gpu"].largest["cpu"] == 6000


def test_sidecar_init_containers_add_to_the_running_pod():
    sidecar = {**_container("1", "1Gi"), "restartPolicy": "Always"}
    spec = {"containers": [_container("2", "2Gi")],
            "initContainers": [sidecar, _container("2500m", "1Gi")]}
    # The sidecar runs beside the app (1 + 2) and beside the later init container (1 + 2.5).
    assert effective_requests(spec) == parse_resources({"cpu": "3500m", "memory": "3Gi"})


def test_terminal_and_unbound_pods_hold_no_capacity():
    nodes = [node("gpu-a", cpu="16", gpus=2, pool="gpu")]
    pods = [
        pod("done", "gpu-a", cpu="8", gpus=1, phase="Succeeded"),
        pod("crashed", "gpu-a", cpu="8", gpus=1, phase="Failed"),
        pod("queued", "", cpu="8", gpus=1, phase="Pending"),
    ]
    assert fit([gpu_group(count=2, tolerations=())], nodes, pods).fits
    pods.append(pod("starting", "gpu-a", cpu="1", gpus=1, phase="Pending"))  # bound: counts
    assert not fit([gpu_group(count=2, tolerations=())], nodes, pods).fits


def test_gpu_pods_are_placed_before_cpu_pods_that_could_steal_their_node():
    nodes = [node("gpu-a", cpu="16", gpus=1, pool="gpu"), node("cpu-a", cpu="10")]
    anywhere = {"pool": "cpu", "count": 1, "requests": {"cpu": "10", "memory": "1Gi"}}
    result = fit([anywhere, gpu_group(count=1, tolerations=())], nodes)
    assert result.fits
    assert by_pool(result)["cpu"].placements == {"cpu-a": 1}


def test_a_full_node_pod_slot_limit_blocks_placement():
    nodes = [node("cpu-a", max_pods="3")]
    pods = [pod(f"p{i}", "cpu-a", cpu="100m") for i in range(3)]
    result = fit([cpu_group(count=1)], nodes, pods)
    assert by_pool(result)["cpu"].why_not == "0/1 nodes are available: 1 Too many pods"


def test_pod_that_no_empty_node_could_hold_is_reported_as_never_fitting():
    result = fit([gpu_group(count=1, gpus="8")], cluster())
    assert by_pool(result)["gpu"].never_fits
    assert not by_pool(fit([gpu_group(count=1, gpus="2")], cluster()))["gpu"].never_fits


def test_report_row_names_pool_need_free_largest_and_reason():
    pods = [pod("busy", "gpu-a", cpu="30", gpus=1)]
    result = fit([gpu_group(count=3)], cluster(), pods)
    row = group_row(by_pool(result)["gpu"])
    assert row[:5] == ("gpu", "2/3", "cpu=24 mem=192Gi gpu=3", "cpu=34 mem=511Gi gpu=3",
                       "cpu=32 mem=256Gi gpu=2 (gpu-b)")
    assert row[5].startswith("0/4 nodes are available: ")


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [("cpu", "500m", 500), ("cpu", "1.5", 1500), ("cpu", 2, 2000), ("cpu", "100u", 1),
     ("memory", "1Gi", 1 << 30), ("memory", "1G", 10**9), ("nvidia.com/gpu", "1", 1)],
)
def test_quantities_use_the_kubernetes_parser(name, value, expected):
    assert parse_resource(name, value) == expected


@pytest.mark.parametrize(
    ("wave", "message"),
    [
        ({"pool": "gpu", "requests": {"cpu": "eight"}}, "wave[0] (pool 'gpu').requests"),
        ([{"pool": "gpu", "count": -1}], "wave[0] (pool 'gpu').count"),
        ([{"pool": "cpu"}, {"pool": "gpu", "nodeSelector": {}}], "wave[1]: unknown keys"),
        ([{"count": 1}], "wave[0].pool"),
        ("gpu", "wave: expected a list"),
        ([{"pool": "gpu", "tolerations": [{"key": "a", "operator": "In"}]}], "operator"),
    ],
)
def test_bad_wave_is_rejected_naming_the_group_and_field(wave, message):
    with pytest.raises(WaveError, match=re.escape(message)):
        parse_wave(wave)


def test_unnamed_groups_on_one_pool_are_labelled_apart():
    groups = parse_wave([cpu_group(), cpu_group(cpu="1"), {**cpu_group(), "count": "3"}])
    assert [g.name for g in groups] == ["cpu", "cpu#1", "cpu#2"]
    assert groups[2].count == 3


def _container(cpu, memory):
    return {"name": f"c-{cpu}", "resources": {"requests": {"cpu": cpu, "memory": memory}}}
