"""Every pod the package builds meets the Pod Security Standard "restricted", xcom sidecar
included, with a read-only root filesystem and scratch volumes where the engine writes.

The pods are the real ones: every KubernetesPodOperator of both DAGs parsed under
SYNTHFACTORY_RUNNER=kubernetes, built offline with ``build_pod_request_obj``.
"""

from __future__ import annotations

import copy

import kubernetes_validate
import pytest

from synthfactory_airflow.operators.pod_security import SCRATCH_ENV, WORKER_UID
from tests.support.dag_pods import built_pod, offline_kube, pod_tasks
from tests.support.paths import ROOT
from tests.support.pod_standards import restricted_violations

WRITABLE_PATHS = ("/tmp", "/airflow/xcom", *(v for v in SCRATCH_ENV.values() if v.startswith("/")))


def unwritable_paths(pod: dict) -> list[str]:
    """Writable paths of the step container that no emptyDir mount covers."""
    empty_dirs = {v["name"] for v in pod["spec"].get("volumes") or [] if "emptyDir" in v}
    container = pod["spec"]["containers"][0]
    mounted = [m["mountPath"] for m in container.get("volumeMounts") or []
               if m["name"] in empty_dirs and not m.get("readOnly")]
    return [p for p in WRITABLE_PATHS
            if not any(p == m or p.startswith(m.rstrip("/") + "/") for m in mounted)]


@pytest.fixture(scope="module")
def built_pods(tmp_path_factory):
    """{(dag_id, task_id): serialized pod} for every pod task of both DAGs."""
    with offline_kube(tmp_path_factory.mktemp("kube")):
        yield {key: built_pod(task) for key, task in pod_tasks({}).items()}


def test_every_pod_task_of_both_dags_is_built(built_pods):
    assert {task for _, task in built_pods} >= {
        "crawl_metadata", "stitch_prompts", "plan_shards", "shard.rephrase", "shard.validate",
        "join_chunks", "register_catalog", "smoke_test_training", "sweep_engine_args"}


def test_every_pod_is_restricted_sidecar_included(built_pods):
    for key, pod in built_pods.items():
        names = [c["name"] for c in pod["spec"]["containers"]]
        assert "airflow-xcom-sidecar" in names, key  # the sidecar is checked too
        assert restricted_violations(pod) == [], key
        assert pod["spec"]["securityContext"]["runAsUser"] == WORKER_UID


def test_engine_writes_only_to_scratch_volumes(built_pods):
    for key, pod in built_pods.items():
        assert unwritable_paths(pod) == [], key
        env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0]["env"]}
        assert {k: env.get(k) for k in SCRATCH_ENV} == SCRATCH_ENV, key


def test_gpu_pods_get_a_memory_backed_shm(built_pods):
    rephrase = built_pods[("synthetic_rephrase", "shard.rephrase")]
    shm = [v for v in rephrase["spec"]["volumes"] if v["name"] == "dshm"]
    assert shm == [{"name": "dshm", "emptyDir": {"medium": "Memory"}}]
    validate = built_pods[("synthetic_rephrase", "shard.validate")]
    assert "dshm" not in {v["name"] for v in validate["spec"]["volumes"]}


def test_every_pod_is_valid_in_strict_mode(built_pods):
    for key, pod in built_pods.items():
        try:
            kubernetes_validate.validate(pod, "1.33.0", strict=True)
        except kubernetes_validate.ValidationError as exc:
            pytest.fail(f"{key}: {exc}")


def test_the_checks_catch_a_root_pod_and_a_missing_scratch_mount(built_pods):
    pod = copy.deepcopy(built_pods[("synthetic_rephrase", "shard.rephrase")])
    sidecar = pod["spec"]["containers"][1]
    sidecar["securityContext"] = {"runAsUser": 0}
    pod["spec"]["volumes"].append({"name": "host", "hostPath": {"path": "/"}})
    found = restricted_violations(pod)
    assert "airflow-xcom-sidecar: no non-zero runAsUser" in found
    assert "airflow-xcom-sidecar: capabilities do not drop ALL" in found
    assert "volume host: ['hostPath']" in found
    main = pod["spec"]["containers"][0]
    main["volumeMounts"] = [m for m in main["volumeMounts"] if m["mountPath"] != "/tmp"]
    assert "/tmp" in unwritable_paths(pod)


def _last_user(dockerfile: str) -> str:
    return [line.split()[1] for line in dockerfile.splitlines() if line.startswith("USER ")][-1]


def test_images_run_as_the_pods_user_with_the_same_scratch_paths():
    worker = (ROOT / "docker" / "worker-gpu.Dockerfile").read_text()
    assert _last_user(worker).split(":")[0] == str(WORKER_UID)
    for name, value in SCRATCH_ENV.items():
        assert f"{name}={value}" in worker, name
    assert "chown -R 1000:1000 /home/synthfactory /var/lib/synthfactory" in worker
    airflow_user = _last_user((ROOT / "docker" / "airflow.Dockerfile").read_text())
    assert airflow_user.split(":")[0].isdigit() and int(airflow_user.split(":")[0]) != 0
