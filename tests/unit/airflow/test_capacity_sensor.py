"""WaveCapacitySensor in the local runner mode, and its Airflow-facing behaviour."""

from __future__ import annotations

import dataclasses
import os
import socket
import stat
from datetime import timedelta

import psutil
import pytest
from airflow.sdk.bases.operator import TRIGGER_FAIL_REPR, TriggerFailureReason
from airflow.sdk.exceptions import (
    AirflowException,
    AirflowFailException,
    AirflowSensorTimeout,
    AirflowSkipException,
)

from synthfactory_airflow.plugins.capacity.check import CapacityCheck
from synthfactory_airflow.plugins.capacity.cluster import local_snapshot
from synthfactory_airflow.plugins.capacity.sensor import WaveCapacitySensor
from synthfactory_airflow.plugins.capacity.wave import WaveError

CPUS = len(os.sched_getaffinity(0))
SMALL_WAVE = [
    # Written for the Kubernetes GPU pool; locally the selector and toleration do not apply.
    {"pool": "gpu", "count": 1, "requests": {"cpu": "100m", "memory": "64Mi"},
     "node_selector": {"synthfactory.io/pool": "gpu"},
     "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}]},
    {"pool": "cpu", "count": 2, "requests": {"cpu": "100m", "memory": "64Mi"}},
]


def sensor(wave, **kwargs):
    kwargs.setdefault("poke_interval", 0.05)
    kwargs.setdefault("timeout", 5)
    return WaveCapacitySensor(task_id="wait_for_capacity", wave=wave, cluster="local", **kwargs)


def test_local_snapshot_is_this_machine_as_one_node(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # no nvidia-smi
    snapshot = local_snapshot()
    (node,) = snapshot.nodes
    assert node["metadata"]["name"] == socket.gethostname()
    assert node["status"]["allocatable"]["cpu"] == str(CPUS)
    assert int(node["status"]["allocatable"]["memory"]) == psutil.virtual_memory().total
    assert "nvidia.com/gpu" not in node["status"]["allocatable"]


def test_local_snapshot_counts_gpus_that_nvidia_smi_lists(monkeypatch, tmp_path):
    fake = tmp_path / "nvidia-smi"
    fake.write_text("#!/bin/sh\nprintf '0\\n1\\n'\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    (node,) = local_snapshot().nodes
    assert node["status"]["allocatable"]["nvidia.com/gpu"] == "2"
    wave = [{"pool": "gpu", "count": 2, "requests": {"cpu": "100m", "nvidia.com/gpu": "1"}}]
    assert sensor(wave).poke({}).is_done
    assert not CapacityCheck(wave=[{**wave[0], "count": 3}]).run().fits


def test_local_memory_in_use_is_not_free():
    """A request between free and total memory waits: it would fit the machine, but not
    beside what its processes hold now. A sensor that counted in-use memory as free
    (total as allocatable, nothing subtracted) would admit it."""
    snapshot = local_snapshot()
    (node,) = snapshot.nodes
    (in_use_pod,) = snapshot.pods
    total = int(node["status"]["allocatable"]["memory"])
    in_use = int(in_use_pod["spec"]["containers"][0]["resources"]["requests"]["memory"])
    assert 0 < in_use < total  # some memory is always in use: the case can discriminate
    free = total - in_use
    check = CapacityCheck(wave=[_memory_group(free + in_use // 2)])

    result = check.run(snapshot)
    assert not result.fits and "Insufficient memory" in result.table
    assert result.never is None  # it fits an idle machine: wait, do not fail
    # the same request on a snapshot that forgets the memory in use is admitted
    assert check.run(dataclasses.replace(snapshot, pods=[])).fits
    # and half of what is free fits now
    assert CapacityCheck(wave=[_memory_group(free // 2)]).run(snapshot).fits


def _memory_group(memory: int) -> dict:
    return {"pool": "cpu", "requests": {"cpu": "100m", "memory": str(memory)}}


def test_poke_succeeds_and_returns_where_the_wave_goes():
    result = sensor(SMALL_WAVE).poke({})
    assert result.is_done
    host = socket.gethostname()
    assert result.xcom_value["placements"] == {"gpu": {host: 1}, "cpu": {host: 2}}


def test_wave_larger_than_the_machine_fails_at_once_instead_of_waiting():
    wave = [{"pool": "cpu", "count": 1, "requests": {"cpu": str(CPUS * 4)}}]
    with pytest.raises(AirflowFailException, match="can never fit"):
        sensor(wave, timeout=600).execute({})
    with pytest.raises(AirflowSkipException):
        sensor(wave, timeout=600, soft_fail=True).execute({})
    with pytest.raises(AirflowSkipException):
        sensor(wave, timeout=600, soft_fail=True, deferrable=True).execute({})


def test_deferrable_sensor_does_not_defer_when_the_wave_fits_now():
    assert sensor(SMALL_WAVE, deferrable=True).execute({})["fits"] is True


def test_literal_wave_with_a_typo_fails_when_the_dag_is_parsed():
    with pytest.raises(WaveError, match=r"wave\[0\] \(pool 'gpu'\)\.requests"):
        sensor([{"pool": "gpu", "requests": {"memory": "64GB"}}])
    with pytest.raises(ValueError, match="cluster"):
        WaveCapacitySensor(task_id="w", wave=SMALL_WAVE, cluster="slurm")


def test_wave_is_a_template_field():
    templated = [{"pool": "cpu", "count": "{{ params.pods }}", "requests": {"cpu": "100m"}}]
    task = sensor(templated)  # not validated before rendering
    assert "wave" in task.template_fields
    task.render_template_fields({"params": {"pods": 3}})
    assert task.wave[0]["count"] == "3"
    assert task.poke({}).xcom_value["placements"] == {"cpu": {socket.gethostname(): 3}}


def test_trigger_events_resume_the_sensor_as_airflow_users_expect():
    task = sensor(SMALL_WAVE)
    xcom = {"fits": True, "placements": {"cpu": {"n": 2}}}
    assert task.execute_complete({}, {"status": "success", "table": "t", "xcom": xcom}) == xcom
    with pytest.raises(AirflowFailException, match="never"):
        task.resume_execution("execute_complete", {"event": {"status": "never",
                                                             "message": "never fits"}}, {})
    with pytest.raises(AirflowException, match="capacity trigger failed: boom"):
        task.execute_complete({}, {"status": "error", "message": "boom"})
    with pytest.raises(AirflowSkipException):
        sensor(SMALL_WAVE, soft_fail=True).resume_execution(
            "execute_complete", {"event": {"status": "never", "message": "x"}}, {})


def test_deferral_timeout_is_a_sensor_timeout_or_a_skip_with_soft_fail():
    timeout = {"error": TriggerFailureReason.TRIGGER_TIMEOUT}
    with pytest.raises(AirflowSensorTimeout):
        sensor(SMALL_WAVE).resume_execution(TRIGGER_FAIL_REPR, timeout, {})
    with pytest.raises(AirflowSkipException):
        sensor(SMALL_WAVE, soft_fail=True).resume_execution(TRIGGER_FAIL_REPR, timeout, {})


def test_timeout_accepts_a_timedelta():
    assert sensor(SMALL_WAVE, timeout=timedelta(minutes=2)).timeout == 120
