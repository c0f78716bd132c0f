"""The wave's RayJob: valid against KubeRay's CRD schema (copied from KubeRay into
tests/schemas/crds/), no field the schema does not know, pods "restricted", the head in
the CPU pool and one GPU worker group in the GPU pool, backoffLimit 0, Kueue's label."""

from __future__ import annotations

import shlex

import jsonschema
import kubernetes_validate
import pytest
import yaml

from synthfactory_airflow.operators.rayjob import rayjob_manifest, wave_entrypoint
from tests.support.paths import ROOT

CRD = ROOT / "tests" / "schemas" / "crds" / "ray.io_rayjobs.yaml"
PLAN = [
    {"rephrase": ["rephrase", "--shard", "s3://b/run/prompts/shard-00000.parquet",
                  "--shard", "s3://b/run/prompts/shard-00001.parquet", "--run", "s3://b/run",
                  "--model", "m", "--checkpoint-rows", "16", "--replicas", "1"]},
    {"rephrase": ["rephrase", "--shard", "s3://b/run/prompts/shard-00002.parquet",
                  "--run", "s3://b/run", "--model", "m", "--checkpoint-rows", "16",
                  "--replicas", "1"]},
]


@pytest.fixture(scope="module")
def schema() -> dict:
    crd = yaml.safe_load(CRD.read_text())
    version = next(v for v in crd["spec"]["versions"] if v["name"] == "v1")
    return version["schema"]["openAPIV3Schema"]


def unknown_fields(obj, schema: dict, path: str = "") -> list[str]:
    """Fields the structural schema does not declare (an API server would prune them
    silently: a typo would vanish rather than fail)."""
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        return []
    found = []
    if isinstance(obj, dict) and "properties" in schema:
        for key, value in obj.items():
            if key not in schema["properties"]:
                found.append(f"{path}.{key}")
            else:
                found += unknown_fields(value, schema["properties"][key], f"{path}.{key}")
    elif isinstance(obj, dict) and isinstance(schema.get("additionalProperties"), dict):
        for key, value in obj.items():
            found += unknown_fields(value, schema["additionalProperties"], f"{path}.{key}")
    elif isinstance(obj, list) and "items" in schema:
        for i, value in enumerate(obj):
            found += unknown_fields(value, schema["items"], f"{path}[{i}]")
    return found


def _manifest(**overrides) -> dict:
    kwargs = dict(name="synthfactory-wave-abc-1", namespace="synthfactory",
                  image="ghcr.io/synthfactory/worker-gpu:0.1.0",
                  entrypoint=wave_entrypoint(PLAN, replicas=16), workers=2, gpus_per_worker=8,
                  secret_name="synthfactory-worker-env")
    return rayjob_manifest(**{**kwargs, **overrides})


def test_two_node_wave_validates_against_the_crd(schema):
    manifest = _manifest()
    jsonschema.validate(manifest, schema)
    assert unknown_fields(manifest, schema) == []


def test_the_validator_catches_a_wrong_type_and_a_typo(schema):
    bad = _manifest()
    bad["spec"]["backoffLimit"] = "none"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schema)
    typo = _manifest()
    typo["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["replica"] = 2
    assert unknown_fields(typo, schema) == [".spec.rayClusterSpec.workerGroupSpecs[0].replica"]


def test_head_in_cpu_pool_workers_in_gpu_pool_one_replica_per_gpu():
    spec = _manifest()["spec"]
    head = spec["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]
    group = spec["rayClusterSpec"]["workerGroupSpecs"][0]
    worker = group["template"]["spec"]
    assert head["nodeSelector"] == {"synthfactory.io/pool": "cpu"}
    assert "nvidia.com/gpu" not in head["containers"][0]["resources"]["requests"]
    assert worker["nodeSelector"] == {"synthfactory.io/pool": "gpu"}
    assert group["replicas"] == group["minReplicas"] == group["maxReplicas"] == 2
    assert worker["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "8"
    argv = shlex.split(spec["entrypoint"])
    assert argv[:2] == ["synthfactory", "rephrase"]
    assert argv[argv.index("--ray-address") + 1] == "auto"
    assert argv[argv.index("--replicas") + 1] == "16"  # 2 nodes x 8 GPUs
    assert argv.count("--replicas") == 1 and argv.count("--run") == 1
    assert [argv[i + 1] for i, a in enumerate(argv) if a == "--shard"] == [
        f"s3://b/run/prompts/shard-{i:05d}.parquet" for i in range(3)]
    assert spec["backoffLimit"] == 0 and spec["shutdownAfterJobFinishes"] is True


@pytest.mark.parametrize("group", ["headGroupSpec", "workerGroupSpecs"])
def test_pod_templates_are_restricted_and_strictly_valid(group):
    cluster = _manifest()["spec"]["rayClusterSpec"]
    template = cluster[group] if group == "headGroupSpec" else cluster[group][0]
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
           "spec": template["template"]["spec"]}
    kubernetes_validate.validate(pod, "1.33.0", strict=True)
    container = pod["spec"]["containers"][0]
    context = container["securityContext"]
    assert pod["spec"]["securityContext"]["runAsNonRoot"] is True
    assert context["allowPrivilegeEscalation"] is False
    assert context["capabilities"]["drop"] == ["ALL"]
    assert context["readOnlyRootFilesystem"] is True
    assert context["seccompProfile"]["type"] == "RuntimeDefault"
    assert container["envFrom"] == [{"secretRef": {"name": "synthfactory-worker-env",
                                                   "optional": True}}]


def test_kueue_queue_labels_the_job_and_creates_it_suspended(schema):
    manifest = _manifest(kueue_queue="synthfactory-gpu")
    assert manifest["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "synthfactory-gpu"
    assert manifest["spec"]["suspend"] is True
    jsonschema.validate(manifest, schema)
    assert "suspend" not in _manifest()["spec"]


def test_the_dag_in_kuberay_mode_builds_a_valid_two_node_wave(schema, tmp_path):
    """Parsed with SYNTHFACTORY_REPHRASE_MODE=kuberay: the sensor's wave is the head plus
    every worker, and the RayJob built for a 2-group plan validates against the CRD."""
    import copy
    from types import SimpleNamespace

    from tests.support.dag_pods import offline_kube, pod_tasks

    with offline_kube(tmp_path):
        tasks = pod_tasks({"SYNTHFACTORY_REPHRASE_MODE": "kuberay",
                           "SYNTHFACTORY_KUEUE_QUEUE": "synthfactory-gpu"})
        dag = tasks[("synthetic_rephrase", "crawl_metadata")].dag
    assert ("synthetic_rephrase", "shard.rephrase") not in tasks
    operator = copy.copy(dag.get_task("rephrase_wave"))
    sensor = copy.copy(dag.get_task("wait_for_capacity"))
    ti = SimpleNamespace(dag_id=dag.dag_id, try_number=1, xcom_pull=lambda task_ids: PLAN)
    context = {"ti": ti, "run_id": "scheduled__1", "params": {**dag.params, "replicas": 8}}
    operator.render_template_fields(context)
    sensor.render_template_fields(context)
    manifest = operator.build_manifest(context)
    jsonschema.validate(manifest, schema)
    assert unknown_fields(manifest, schema) == []
    group = manifest["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]
    assert group["replicas"] == 2  # one GPU worker per plan group
    assert manifest["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "synthfactory-gpu"
    assert [(g["pool"], str(g["count"])) for g in sensor.wave] == [("cpu", "1"), ("gpu", "2")]
    assert sensor.wave[1]["requests"]["nvidia.com/gpu"] == "8"
    assert dag.get_task("join_chunks").upstream_task_ids == {"validate"}
    assert dag.get_task("register_catalog").upstream_task_ids == {"join_chunks"}
    assert "rephrase_wave" in dag.get_task("validate").upstream_task_ids


def test_the_wave_reads_flag_equals_value_and_keeps_the_engine_options():
    """Each group's argv is read with the steps table's parser: ``--shard=URL`` is a shard
    too, the last group's shards included; the engine's own options follow in order."""
    plan = [{"rephrase": ["rephrase", "--shard=s3://b/a", "--run=s3://b", "--replicas=2",
                          "--engine", "vllm", "--engine", "echo", "--echo-delay-s", "1"]},
            {"rephrase": ["rephrase", "--shard", "s3://b/c", "--run", "s3://b"]}]
    argv = wave_entrypoint(plan, replicas=4)
    assert [argv[i + 1] for i, a in enumerate(argv) if a == "--shard"] == ["s3://b/a",
                                                                          "s3://b/c"]
    assert argv.count("--replicas") == 1 and argv[argv.index("--replicas") + 1] == "4"
    assert not any(a.startswith("--replicas=") for a in argv)
    assert argv[-6:] == ["--engine", "vllm", "--engine", "echo", "--echo-delay-s", "1"]
