"""Pod faults the kubernetes runner must survive or report, through `airflow dags test`
against a real control plane whose node the node agent runs:

- a pod that no node can hold stays Pending past its schedule timeout: the task fails with
  the provider's clear message and the scheduler's reason is on the pod;
- the Airflow task process is killed (SIGKILL) while its pod runs, then the task runs again:
  it reattaches to the running pod (``durable``) instead of starting a second one.

(The rephrase pod killed mid-shard is in test_dag_on_kubernetes.py, on the whole DAG.)"""

from __future__ import annotations

import copy
import json
import os
import signal
import subprocess
import textwrap
import time

import pytest
from kubernetes import client

from tests.integration.kubernetes.e2e_support import (
    NAMESPACE,
    cpu_nodes,
    gpu_nodes,
    needs_worker,
    report,
    run_conf,
)

pytestmark = [pytest.mark.kubernetes_e2e, needs_worker]
# its own run (the whole-DAG test runs the day after in the same Airflow database)
REATTACH_DATE, REATTACH_DAY = "2026-11-29T00:00:00+00:00", "2026-11-28"
FORBIDDEN_DATE = "2026-11-27T00:00:00+00:00"  # k8s_pending's second run

PENDING_DAG = '''
"""One CPU step as the DAG builds it, with a short schedule timeout and no retries."""
import pendulum
from airflow.sdk import DAG

from synthfactory_airflow.operators.kubernetes import SynthfactoryPodOperator, pod_operator_kwargs
from synthfactory_airflow.operators.settings import Settings

with DAG("k8s_pending", schedule=None, start_date=pendulum.datetime(2026, 11, 1, tz="UTC")):
    SynthfactoryPodOperator(
        task_id="crawl_metadata", arguments=["crawl", "--help"],
        **{**pod_operator_kwargs("cpu", Settings(), "crawl_metadata"),
           "schedule_timeout_seconds": 4, "startup_check_interval_seconds": 1, "retries": 0})
'''


def test_a_pod_pending_past_its_schedule_timeout_fails_the_task_clearly(airflow_home, tmp_path,
                                                                         control_plane):
    dags = tmp_path / "dags"  # `dags test` wants the file inside the dags folder's bundle
    dags.mkdir()
    (dags / "k8s_pending.py").write_text(textwrap.dedent(PENDING_DAG))
    cpu = cpu_nodes(control_plane, tmp_path, cpu="1")  # the CPU policy requests 2 cores
    with cpu:
        started = time.monotonic()
        done = subprocess.run(
            airflow_home.dags_test("k8s_pending"), capture_output=True, text=True, timeout=300,
            env=airflow_home.env({"cpu": control_plane}, AIRFLOW__CORE__DAGS_FOLDER=str(dags)))
        seconds = time.monotonic() - started
        pods = control_plane.core().list_namespaced_pod(NAMESPACE).items
    log = done.stdout + done.stderr
    # the schedule timeout of the step (4 s here, not the pool's 900 s) ended the wait
    assert "Pod took too long to be scheduled on the cluster" in log, log[-4000:]
    assert "More than 4s" in log
    assert airflow_home.task_instances("k8s_pending")[-1][3] == "failed"
    assert len(pods) == 1 and not cpu.started_pods  # no retries: one pod, never started
    assert [p.status.phase for p in pods] == ["Pending"]
    condition = pods[0].status.conditions[0]
    # kube-scheduler's own words
    assert condition.reason == "Unschedulable" and "Insufficient cpu" in condition.message
    report(f"RESULT pending: task failed after {seconds:.0f} s of `dags test` (parse included)")


def _log_requests(agent, pod_name: str) -> int:
    """Log reads of the pod that reached its node through the apiserver."""
    return sum(1 for kind, name in list(agent.served)
               if kind == "containerLogs" and name == pod_name)


def test_a_killed_task_reattaches_to_its_running_pod(airflow_home, corpus, tmp_path,
                                                     control_planes, control_plane):
    marker, release = tmp_path / "paused-crawl", tmp_path / "release-crawl"
    cpu = cpu_nodes(control_planes["cpu"], tmp_path, SYNTHFACTORY_PAUSE_AT="crawl:part-written",
                    SYNTHFACTORY_PAUSE_MARKER=str(marker),
                    SYNTHFACTORY_PAUSE_RELEASE=str(release))
    gpu = gpu_nodes(control_planes["gpu"], tmp_path)
    only_crawl = ["--conf", json.dumps(run_conf(corpus, tmp_path)),
                  "--mark-success-pattern", r"^(?!crawl_metadata$).*"]
    argv = airflow_home.dags_test("synthetic_rephrase", *only_crawl, logical_date=REATTACH_DATE)
    with cpu, gpu:
        env = airflow_home.env(control_planes)
        first = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            cpu.wait_for(marker.exists, timeout=240, what="the crawl pod pausing mid-step")
        finally:
            os.killpg(first.pid, signal.SIGKILL)  # the task process dies, its pod does not
            first.wait()
        with airflow_home.db() as db:  # what the scheduler does once the task's heartbeat stops
            db.execute("UPDATE task_instance SET state = 'up_for_retry' WHERE state = 'running' "
                       "AND dag_id = 'synthetic_rephrase' AND task_id = 'crawl_metadata'")
        (pod,) = cpu.started_pods
        created_by_first_run = len(cpu.started_pods)
        assert cpu.run_of(NAMESPACE, pod["name"]).containers[0].process.poll() is None
        followed = _log_requests(cpu, pod["name"])

        second = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True, start_new_session=True)
        try:
            # the second try follows the same pod's log: let the worker go on
            cpu.wait_for(lambda: _log_requests(cpu, pod["name"]) > followed, timeout=240,
                         what="the second try following the running pod")
            release.write_text("go")
            out, _ = second.communicate(timeout=300)
        finally:
            if second.poll() is None:
                os.killpg(second.pid, signal.SIGKILL)
        created_by_second_run = len(cpu.started_pods) - created_by_first_run
        left = [p.metadata.name for p in control_plane.core().list_namespaced_pod(
            NAMESPACE).items]
    (tmp_path / "second-run.log").write_text(out)
    crawl = airflow_home.task_instance("synthetic_rephrase", "crawl_metadata", REATTACH_DATE)
    report(f"RESULT reattach: pods created by the killed task run {created_by_first_run}, "
          f"by the task run after it {created_by_second_run}; crawl_metadata (try, state) "
          f"{crawl}")
    assert second.returncode == 0, out[-4000:]
    assert (created_by_first_run, created_by_second_run) == (1, 0)
    assert "Reusing existing pod" in out or "Reconnecting to pod" in out, out[-4000:]
    assert crawl[1] == "success" and "state=success" in out
    manifest = tmp_path / "data" / "synthetic_rephrase" / REATTACH_DAY / "manifest"
    assert any(manifest.rglob("*.parquet")), "the reattached crawl wrote no manifest"
    assert left == []  # it succeeded, so it was deleted


def test_a_role_missing_a_verb_fails_the_step_with_the_403(airflow_home, tmp_path, control_plane):
    """deploy/'s launcher Role without ``create`` on pods: the step fails with the apiserver's
    403, which names the ServiceAccount, the verb and the resource."""
    dags = tmp_path / "dags"
    dags.mkdir()
    (dags / "k8s_pending.py").write_text(textwrap.dedent(PENDING_DAG))
    rbac = client.RbacAuthorizationV1Api(control_plane.api())
    role = rbac.read_namespaced_role("synthfactory-pod-launcher", NAMESPACE)
    original = [copy.deepcopy(rule) for rule in role.rules]
    for rule in role.rules:
        if rule.resources == ["pods"]:
            rule.verbs = [v for v in rule.verbs if v != "create"]
    rbac.replace_namespaced_role("synthfactory-pod-launcher", NAMESPACE, role)
    try:
        with cpu_nodes(control_plane, tmp_path) as cpu:
            done = subprocess.run(
                airflow_home.dags_test("k8s_pending", logical_date=FORBIDDEN_DATE),
                capture_output=True, text=True, timeout=300,
                env=airflow_home.env({"cpu": control_plane},
                                     AIRFLOW__CORE__DAGS_FOLDER=str(dags)))
    finally:
        role = rbac.read_namespaced_role("synthfactory-pod-launcher", NAMESPACE)
        role.rules = original
        rbac.replace_namespaced_role("synthfactory-pod-launcher", NAMESPACE, role)
    log = done.stdout + done.stderr
    message = ('pods is forbidden: User \\"system:serviceaccount:synthfactory:'
               'synthfactory-launcher\\" cannot create resource \\"pods\\" in API group \\"\\" '
               'in the namespace \\"synthfactory\\"')
    assert "(403)" in log and message in log, log[-4000:]
    assert airflow_home.task_instances("k8s_pending", FORBIDDEN_DATE)[-1][3] == "failed"
    assert not cpu.started_pods
    report("RESULT forbidden: " + message.replace('\\"', '"'))
