"""deploy/: every manifest is valid for the API it targets, and the kit fits together.

Core kinds: kubernetes-validate in strict mode (unknown fields are errors). Kueue kinds
and the Prometheus Operator's PodMonitor: the openAPIV3Schema of their own CRDs
(tests/schemas/crds/), made strict the way the
API server's strict field validation is (no unknown fields where the schema lists them).
Then the cross-references a platform engineer would otherwise find one `kubectl apply`
at a time: names, namespaces, quotas, pools and the Helm values' settings.
"""

from __future__ import annotations

import copy
import json
import os
import sqlite3
import subprocess
import sys
from functools import cache
from pathlib import Path

import jsonschema
import kubernetes_validate
import pytest
import yaml

from synthfactory_airflow.operators.kubernetes import POLICIES, pod_operator_kwargs
from synthfactory_airflow.operators.settings import Settings
from synthfactory_airflow.plugins.capacity.kueue import fit_cluster_queue
from synthfactory_airflow.plugins.capacity.wave import parse_wave
from tests.support.paths import ROOT

DEPLOY = ROOT / "deploy"
CRDS = ROOT / "tests" / "schemas" / "crds"
K8S_VERSION = "1.33.0"
VALUES = DEPLOY / "airflow-values.yaml"  # Helm values, not a manifest
MANIFEST_FILES = sorted(p for p in DEPLOY.glob("*.yaml") if p != VALUES)


def documents(path: Path) -> list[dict]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


@cache
def all_objects() -> tuple[tuple[str, dict], ...]:
    return tuple((p.name, d) for p in MANIFEST_FILES for d in documents(p))


def find(kind: str, name: str | None = None) -> list[dict]:
    return [d for _, d in all_objects()
            if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]


def strict(schema: dict) -> dict:
    """Forbid fields the schema does not list, except where it preserves unknown fields."""
    schema = copy.deepcopy(schema)

    def walk(node):
        if isinstance(node, dict):
            if ("properties" in node and "additionalProperties" not in node
                    and not node.get("x-kubernetes-preserve-unknown-fields")):
                node["additionalProperties"] = False
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(schema)
    return schema


@cache
def crd_schemas() -> dict[tuple[str, str], dict]:
    """(apiVersion, kind) -> strict JSON schema, from every CRD in tests/schemas/crds."""
    schemas = {}
    # the Prometheus Operator's PodMonitor sits in a subfolder: not installed by the e2e
    # control plane (tests/support/kube_control_plane.py), only validated against here
    for path in [*CRDS.glob("*.yaml"), *CRDS.glob("prometheus-operator/*.yaml")]:
        crd = yaml.safe_load(path.read_text())
        for version in crd["spec"]["versions"]:
            key = (f"{crd['spec']['group']}/{version['name']}", crd["spec"]["names"]["kind"])
            schemas[key] = strict(version["schema"]["openAPIV3Schema"])
    return schemas


def validate(obj: dict) -> None:
    """Raise if ``obj`` is not valid for its apiVersion and kind."""
    key = (obj["apiVersion"], obj["kind"])
    if "." in obj["apiVersion"].split("/")[0] and not obj["apiVersion"].startswith(
            ("rbac.authorization.k8s.io/", "scheduling.k8s.io/")):
        assert key in crd_schemas(), f"no CRD schema for {key} in {CRDS}"
        jsonschema.validate(obj, crd_schemas()[key])
    else:
        kubernetes_validate.validate(obj, K8S_VERSION, strict=True)


def values() -> dict:
    return yaml.safe_load(VALUES.read_text())


def values_env() -> dict[str, str]:
    return {e["name"]: e["value"] for e in values()["env"]}


# -- every manifest is valid --------------------------------------------------------------

def test_the_kit_has_every_kind_a_platform_engineer_needs():
    kinds = {d["kind"] for _, d in all_objects()}
    assert kinds >= {"Namespace", "ServiceAccount", "Role", "RoleBinding", "ClusterRole",
                     "ClusterRoleBinding", "Secret", "PriorityClass", "ResourceFlavor",
                     "ClusterQueue", "LocalQueue", "PodMonitor"}
    assert {d["metadata"]["name"] for d in find("ResourceFlavor")} == {"cpu", "gpu"}


@pytest.mark.parametrize("path", MANIFEST_FILES, ids=lambda p: p.name)
def test_manifest_is_valid(path):
    for obj in documents(path):
        try:
            validate(obj)
        except (kubernetes_validate.ValidationError, jsonschema.ValidationError) as exc:
            pytest.fail(f"{path.name}: {obj['kind']}/{obj['metadata']['name']}: {exc}")


@pytest.mark.parametrize("kind, break_it", [
    ("ClusterQueue", lambda o: o["spec"]["resourceGroups"][0]["flavors"][0].update(
        {"resource": []})),  # a typo: unknown field
    ("ClusterQueue", lambda o: o["spec"]["resourceGroups"][0].pop("coveredResources")),
    ("ResourceFlavor", lambda o: o["spec"].update({"nodeLabels": ["not", "a", "map"]})),
    ("LocalQueue", lambda o: o["spec"].update({"clusterQueu": "x"})),
    ("Role", lambda o: o["rules"][0].update({"verb": ["get"]})),
    ("PriorityClass", lambda o: o.update({"value": "high"})),
    ("Namespace", lambda o: o["metadata"].update({"label": {}})),
    ("PodMonitor", lambda o: o["spec"]["podMetricsEndpoints"][0].update({"prot": "metrics"})),
    ("PodMonitor", lambda o: o["spec"]["podMetricsEndpoints"][0].update({"interval": "15"})),
    ("PodMonitor", lambda o: o["spec"].pop("selector")),
])
def test_the_validators_reject_a_broken_manifest(kind, break_it):
    broken = copy.deepcopy(find(kind)[0])
    break_it(broken)
    with pytest.raises((kubernetes_validate.ValidationError, jsonschema.ValidationError)):
        validate(broken)


# -- the kit fits together ----------------------------------------------------------------

def test_namespaced_objects_live_in_the_step_namespace():
    (namespace,) = [d["metadata"]["name"] for d in find("Namespace")]
    assert namespace == values_env()["SYNTHFACTORY_NAMESPACE"]
    assert find("Namespace")[0]["metadata"]["labels"][
        "pod-security.kubernetes.io/enforce"] == "restricted"
    for name, obj in all_objects():
        if obj["kind"] in {"Namespace", "ClusterRole", "ClusterRoleBinding", "PriorityClass",
                           "ResourceFlavor", "ClusterQueue"}:
            assert "namespace" not in obj["metadata"], name
        elif obj["metadata"]["name"] != "synthfactory-airflow-connections":  # Airflow's side
            assert obj["metadata"]["namespace"] == namespace, (name, obj["kind"])


def _allowed(rules: list[dict], resource: str, verb: str) -> bool:
    return any(resource in r["resources"] and verb in r["verbs"] and "" in r["apiGroups"]
               for r in rules)


def test_the_launcher_role_allows_what_the_pod_operator_does():
    (role,) = find("Role", "synthfactory-pod-launcher")
    for resource, verbs in {"pods": ["create", "get", "list", "watch", "patch", "delete"],
                            "pods/log": ["get"], "pods/exec": ["create", "get"],
                            "events": ["list"]}.items():
        for verb in verbs:
            assert _allowed(role["rules"], resource, verb), (resource, verb)
    assert not _allowed(role["rules"], "secrets", "get")  # pods read them, not Airflow


def test_the_sensor_cluster_role_reads_nodes_and_pods_only():
    (role,) = find("ClusterRole", "synthfactory-capacity-reader")
    for resource in ("nodes", "pods"):
        for verb in ("get", "list", "watch"):
            assert _allowed(role["rules"], resource, verb)
    assert all(set(r["verbs"]) <= {"get", "list", "watch"} for r in role["rules"])


def test_bindings_point_at_roles_and_accounts_that_exist():
    accounts = {(d["metadata"]["namespace"], d["metadata"]["name"])
                for d in find("ServiceAccount")}
    for kind, role_kind in (("RoleBinding", "Role"), ("ClusterRoleBinding", "ClusterRole")):
        for binding in find(kind):
            assert find(role_kind, binding["roleRef"]["name"]), binding["metadata"]["name"]
            assert binding["roleRef"]["kind"] == role_kind
            assert any((s["namespace"], s["name"]) in accounts for s in binding["subjects"])


def test_secret_templates_hold_keys_and_no_values():
    secrets = [d for d in find("Secret") if d["type"] == "Opaque"]
    assert {s["metadata"]["name"] for s in secrets} == {
        values_env()["SYNTHFACTORY_WORKER_SECRET"], "synthfactory-airflow-connections"}
    for secret in secrets:
        assert "data" not in secret
        assert secret["stringData"] and set(secret["stringData"].values()) == {""}
    (worker,) = find("Secret", values_env()["SYNTHFACTORY_WORKER_SECRET"])
    assert {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "SYNTHFACTORY_CATALOG_URI"} <= set(
        worker["stringData"])


def test_kueue_queues_and_flavours_match_the_pods():
    (local,) = find("LocalQueue", values_env()["SYNTHFACTORY_KUEUE_QUEUE"])
    (cluster,) = find("ClusterQueue", local["spec"]["clusterQueue"])
    assert cluster["spec"]["namespaceSelector"]["matchLabels"] == {
        "kubernetes.io/metadata.name": local["metadata"]["namespace"]}
    flavors = {d["metadata"]["name"]: d["spec"] for d in find("ResourceFlavor")}
    covered = set()
    for group in cluster["spec"]["resourceGroups"]:
        covered |= set(group["coveredResources"])
        for flavor in group["flavors"]:
            assert flavor["name"] in flavors
            assert {r["name"] for r in flavor["resources"]} == set(group["coveredResources"])
    for kind, policy in POLICIES.items():
        assert set(policy.requests) <= covered, kind
        assert flavors[kind]["nodeLabels"] == policy.node_selector, kind
    # a GPU flavour's taint is one the GPU pods tolerate
    taint = flavors["gpu"]["nodeTaints"][0]
    assert any(t["key"] == taint["key"] and t["effect"] == taint["effect"]
               for t in POLICIES["gpu"].tolerations)


def test_the_capacity_sensor_reads_the_cluster_queue_as_shipped():
    """The example quota holds a wave of 8 GPU pods with their validation pods, not 9."""
    (cluster,) = find("ClusterQueue")

    def fits(count: int) -> bool:
        wave = parse_wave([{"pool": kind, "count": count, "requests": policy.requests}
                           for kind, policy in POLICIES.items()])
        return all(g.placed == g.group.count for g in fit_cluster_queue(wave, cluster).groups)

    assert fits(8)
    assert not fits(9)


def test_the_priority_class_is_the_one_the_pods_name():
    (priority,) = find("PriorityClass")
    assert priority["metadata"]["name"] == values_env()["SYNTHFACTORY_PRIORITY_CLASS"]
    assert priority["preemptionPolicy"] == "Never" and not priority["globalDefault"]


# -- pools and the Helm values ------------------------------------------------------------

def test_pools_json_has_the_pools_the_tasks_run_in():
    pools = json.loads((DEPLOY / "pools.json").read_text())
    defaults = Settings(runner="kubernetes")
    assert set(pools) == {defaults.gpu_pool, defaults.cpu_pool}
    assert set(pools) == {values_env()["SYNTHFACTORY_GPU_POOL"],
                          values_env()["SYNTHFACTORY_CPU_POOL"]}
    for pool in pools.values():
        assert isinstance(pool["slots"], int) and pool["slots"] > 0 and pool["description"]
    # a whole wave runs at once under Kueue (docs/adr/0086)
    max_groups = pools[defaults.gpu_pool]["slots"]
    assert values()["config"]["core"]["max_active_tasks_per_dag"] >= 2 * max_groups


@pytest.mark.slow
def test_airflow_pools_import_accepts_pools_json(tmp_path):
    """The real command, against a fresh metadata database."""
    airflow = Path(sys.executable).parent / "airflow"
    env = {**os.environ, "AIRFLOW_HOME": str(tmp_path),
           "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{tmp_path}/airflow.db"}

    def run(*args: str) -> str:
        done = subprocess.run([str(airflow), *args], env=env, capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        return done.stdout

    run("db", "migrate")
    assert "Uploaded 2 pool(s)" in run("pools", "import", str(DEPLOY / "pools.json"))
    with sqlite3.connect(tmp_path / "airflow.db") as db:  # a third CLI start costs ~7 s
        listed = {row[0]: row[1:] for row in db.execute(
            "SELECT pool, slots, description, include_deferred FROM slot_pool")}
    for name, pool in json.loads((DEPLOY / "pools.json").read_text()).items():
        assert listed[name] == (pool["slots"], pool["description"], pool["include_deferred"])


def test_helm_values_set_only_settings_the_package_reads():
    settings_source = (ROOT / "operators" / "settings.py").read_text()
    names = [n for n in values_env() if n.startswith("SYNTHFACTORY_")]
    assert "SYNTHFACTORY_RUNNER" in names
    for name in names:
        assert f'"{name}"' in settings_source, f"{name} is read nowhere in operators/settings.py"
    with pytest.MonkeyPatch.context() as mp:  # the values parse as the DAGs would read them
        for name, value in values_env().items():
            mp.setenv(name, value)
        settings = Settings()
    assert settings.runner == "kubernetes"
    assert settings.kueue_queue == find("LocalQueue")[0]["metadata"]["name"]


def test_helm_values_take_connections_from_the_secret_template():
    (secret,) = find("Secret", "synthfactory-airflow-connections")
    # every connection the settings name comes from the Secret
    env = values_env()
    conn_ids = {env[n] for n in env if n.endswith("KUBERNETES_CONN_ID")}
    assert {f"AIRFLOW_CONN_{c.upper()}" for c in conn_ids} == {
        e["envName"] for e in values()["secret"]}
    for entry in values()["secret"]:
        assert entry["secretName"] == "synthfactory-airflow-connections"
        assert entry["secretKey"] in secret["stringData"]
        assert entry["envName"].startswith("AIRFLOW_CONN_")
    assert {e["secretKey"] for e in values()["secret"]} == set(secret["stringData"])


def test_helm_values_image_and_pool_import_match_the_airflow_image():
    dockerfile = (ROOT / "docker" / "airflow.Dockerfile").read_text()
    assert values()["airflowVersion"] in dockerfile.splitlines()[2]  # FROM apache/airflow:X
    (init,) = values()["scheduler"]["extraInitContainers"]
    pools_path = init["command"][-1]
    assert f"deploy/pools.json {pools_path}" in dockerfile
    assert init["image"] == "{repository}:{tag}".format(**values()["images"]["airflow"])
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "import-pools"},
           "spec": {"initContainers": [init], "containers": [{**init, "name": "main"}]}}
    kubernetes_validate.validate(pod, K8S_VERSION, strict=True)


def test_the_pod_monitor_selects_the_step_pods_on_a_named_port():
    (monitor,) = find("PodMonitor")
    labels = pod_operator_kwargs("gpu", Settings(), "rephrase")["labels"]
    assert monitor["spec"]["selector"]["matchLabels"].items() <= labels.items()
    (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
    assert endpoint["port"] == "metrics" and endpoint["honorLabels"] is True


def test_prometheus_scrapes_the_pushgateway_the_deployment_pushes_to():
    config = yaml.safe_load((DEPLOY / "prometheus" / "prometheus.yml").read_text())
    (job,) = [j for j in config["scrape_configs"]
              if j["job_name"] == "synthfactory-pushgateway"]
    (targets,) = [c["targets"] for c in job["static_configs"]]
    assert values_env()["SYNTHFACTORY_PUSHGATEWAY"] in targets
