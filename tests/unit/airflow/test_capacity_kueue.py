"""Kueue mode: the wave against a ClusterQueue's free quota, flavour by flavour."""

from __future__ import annotations

from synthfactory_airflow.plugins.capacity.kueue import admission_labels, fit_cluster_queue
from synthfactory_airflow.plugins.capacity.wave import parse_wave


def cluster_queue(h100_gpus_used="6", a100_gpus_used="0"):
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "ClusterQueue",
        "metadata": {"name": "synth"},
        "spec": {"resourceGroups": [
            {"coveredResources": ["cpu", "memory"],
             "flavors": [{"name": "default", "resources": [
                 {"name": "cpu", "nominalQuota": "64"},
                 {"name": "memory", "nominalQuota": "512Gi"}]}]},
            {"coveredResources": ["nvidia.com/gpu"],
             "flavors": [
                 {"name": "h100", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 8}]},
                 {"name": "a100", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 2}]},
             ]},
        ]},
        "status": {"flavorsReservation": [
            {"name": "default", "resources": [{"name": "cpu", "total": "40"},
                                              {"name": "memory", "total": "100Gi"}]},
            {"name": "h100", "resources": [{"name": "nvidia.com/gpu", "total": h100_gpus_used}]},
            {"name": "a100", "resources": [{"name": "nvidia.com/gpu", "total": a100_gpus_used}]},
        ]},
    }


def wave(gpu_pods=3, cpu_pods=2, flavor=None):
    gpu = {"pool": "gpu", "count": gpu_pods,
           "requests": {"cpu": "4", "memory": "32Gi", "nvidia.com/gpu": "1"}}
    if flavor:
        gpu["flavor"] = flavor
    return parse_wave([gpu, {"pool": "cpu", "count": cpu_pods,
                             "requests": {"cpu": "2", "memory": "4Gi"}}])


def test_wave_spills_over_flavours_in_queue_order():
    result = fit_cluster_queue(wave(gpu_pods=4), cluster_queue())
    assert result.fits
    gpu = result.groups[0]
    assert gpu.placements == {"default": 4, "h100": 2, "a100": 2}


def test_wave_waits_when_quota_is_reserved_by_other_workloads():
    result = fit_cluster_queue(wave(gpu_pods=3), cluster_queue(h100_gpus_used="8",
                                                               a100_gpus_used="1"))
    gpu, cpu = result.groups
    assert not result.fits and cpu.fits
    assert gpu.placed == 1
    assert gpu.why_not == "0/2 flavors have quota: 2 Insufficient nvidia.com/gpu"


def test_shared_cpu_quota_counts_both_pools():
    # 24 cpu free: 3 GPU pods x 4 + 7 CPU pods x 2 = 26 > 24
    result = fit_cluster_queue(wave(gpu_pods=3, cpu_pods=7), cluster_queue())
    assert not result.fits
    assert fit_cluster_queue(wave(gpu_pods=3, cpu_pods=6), cluster_queue()).fits


def test_pinned_flavour_is_honoured():
    result = fit_cluster_queue(wave(gpu_pods=3, flavor="a100"), cluster_queue())
    assert result.groups[0].placements == {"default": 3, "a100": 2}
    assert result.groups[0].placed == 2
    assert not result.fits


def test_resource_the_queue_does_not_cover_can_never_be_admitted():
    groups = parse_wave([{"pool": "tpu", "requests": {"google.com/tpu": "4"}}])
    result = fit_cluster_queue(groups, cluster_queue())
    assert result.groups[0].never_fits
    assert "google.com/tpu" in result.groups[0].why_not


def test_admission_labels_name_the_local_queue():
    assert admission_labels("synth-queue") == {"kueue.x-k8s.io/queue-name": "synth-queue"}
    assert admission_labels(None) == {}
