"""Real Kubernetes control planes for the end-to-end tests, started and stopped through
scripts/kube-control-plane.sh, with the deploy kit applied and RBAC enforced.

``ControlPlane.up(folder, name)`` starts etcd, kube-apiserver, kube-scheduler and
kube-controller-manager on 127.0.0.1 and waits for ``/readyz``; ``install_crds()`` loads the
project's copies of KubeRay's and Kueue's CRDs (rewritten for 1.20: ``crds_for_1_20``);
``apply_deploy_kit()`` applies ``deploy/`` as an operator would; ``service_account_kubeconfig``
writes a kubeconfig holding a ServiceAccount's token, which is what Airflow's Kubernetes
connections use, never the admin's.
"""

from __future__ import annotations

import base64
import copy
import json
import os
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client, config, dynamic
from kubernetes.client.exceptions import ApiException

from tests.support.paths import ROOT

SCRIPT = ROOT / "scripts" / "kube-control-plane.sh"
CRDS = ROOT / "tests" / "schemas" / "crds"
DEPLOY = ROOT / "deploy"
NAMESPACE = "synthfactory"
# deploy/ files the tests apply; secret-airflow-connections.yaml belongs to the Airflow
# deployment's namespace, which these clusters do not run
DEPLOY_FILES = ("namespace.yaml", "serviceaccount.yaml", "rbac-launcher.yaml",
                "rbac-capacity.yaml", "spark-rbac.yaml", "priorityclass.yaml", "kueue.yaml",
                "secret-worker-env.yaml")


def control_plane_missing() -> str | None:
    """Why no control plane can start here, or None. Under CI=true the caller fails."""
    done = subprocess.run([str(SCRIPT), "built"], capture_output=True)
    if done.returncode != 0:
        return "the control plane is not built (make kube-control-plane)"
    return None


def require_control_plane() -> None:
    why = control_plane_missing()
    if why is None:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"{why}; under CI=true this is a failure, not a skip")
    pytest.skip(why)


@dataclass
class ControlPlane:
    folder: Path
    name: str
    kubeconfig: Path
    start_seconds: float
    applied: list[str] = field(default_factory=list)

    @classmethod
    def up(cls, folder: Path, name: str) -> ControlPlane:
        started = time.monotonic()
        done = subprocess.run([str(SCRIPT), "up", str(folder), "--name", name],
                              capture_output=True, text=True, timeout=180)
        if done.returncode != 0:
            subprocess.run([str(SCRIPT), "down", str(folder)], capture_output=True, timeout=60)
            raise RuntimeError(f"control plane {name} did not start: {done.stderr[-3000:]}")
        last = done.stdout.strip().splitlines()[-1]
        assert last.startswith("KUBECONFIG="), done.stdout
        return cls(Path(folder), name, Path(last.split("=", 1)[1]),
                   time.monotonic() - started)

    def down(self) -> None:
        subprocess.run([str(SCRIPT), "down", str(self.folder)], check=True, timeout=120)

    @property
    def port(self) -> int:
        return int((self.folder / "port").read_text())

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @property
    def ca(self) -> Path:
        return self.folder / "pki" / "ca.crt"

    def api(self, kubeconfig: Path | None = None) -> client.ApiClient:
        return config.new_client_from_config(str(kubeconfig or self.kubeconfig))

    def core(self, kubeconfig: Path | None = None) -> client.CoreV1Api:
        return client.CoreV1Api(self.api(kubeconfig))

    # -- CRDs and the deploy kit -------------------------------------------------------------

    def install_crds(self) -> None:
        """KubeRay's RayJob and RayCluster and Kueue's kinds, established before returning."""
        ext = client.ApiextensionsV1Api(self.api())
        names = []
        for path in sorted(CRDS.glob("*.yaml")):
            crd = crds_for_1_20(yaml.safe_load(path.read_text()))
            try:
                ext.create_custom_resource_definition(crd)
            except ApiException as err:
                if err.status != 409:
                    raise RuntimeError(f"{path.name}: {err.body}") from err
            names.append(crd["metadata"]["name"])
        deadline = time.monotonic() + 60
        for name in names:
            while True:
                crd = ext.read_custom_resource_definition(name)
                if any(c.type == "Established" and c.status == "True"
                       for c in crd.status.conditions or []):
                    break
                if time.monotonic() > deadline:
                    raise TimeoutError(f"CRD {name} not established in 60 s")
                time.sleep(0.1)

    def apply(self, documents: list[dict]) -> None:
        """Create (or replace) each object, as `kubectl apply` would for new objects."""
        dyn = dynamic.DynamicClient(self.api())
        for doc in documents:
            resource = dyn.resources.get(api_version=doc["apiVersion"], kind=doc["kind"])
            namespace = doc["metadata"].get("namespace")
            try:
                resource.create(body=doc, namespace=namespace)
            except ApiException as err:
                if err.status != 409:
                    raise RuntimeError(f"{doc['kind']}/{doc['metadata']['name']}: "
                                       f"{err.body}") from err
                current = resource.get(name=doc["metadata"]["name"], namespace=namespace)
                doc = copy.deepcopy(doc)
                doc["metadata"]["resourceVersion"] = current.metadata.resourceVersion
                resource.replace(body=doc, namespace=namespace)
            self.applied.append(f"{doc['kind']}/{doc['metadata']['name']}")

    def apply_deploy_kit(self, worker_env: dict[str, str] | None = None) -> None:
        """deploy/ as written, but for the worker Secret's values, which an operator fills in
        (empty ones are left out rather than set to "")."""
        documents = []
        for name in DEPLOY_FILES:
            for doc in yaml.safe_load_all((DEPLOY / name).read_text()):
                if not doc:
                    continue
                if doc["kind"] == "Secret" and "stringData" in doc:
                    doc["stringData"] = {k: v for k, v in {**doc["stringData"],
                                                           **(worker_env or {})}.items() if v}
                documents.append(doc)
        self.apply(documents)
        self.wait_service_account("default", NAMESPACE)

    def wait_service_account(self, name: str, namespace: str) -> None:
        """Pods are admitted only once the namespace's ServiceAccount and its token exist."""
        self.service_account_token(name, namespace)

    def create_pod(self, core: Any, namespace: str, pod: Any, timeout: float = 30) -> Any:
        """create_namespaced_pod, again while the ServiceAccount admission answers from a
        cache that has not seen the account's token yet: it reads its informers, not the
        apiserver, so under load a pod created just after ``wait_service_account`` may get a
        500 "No API token found ... retry" or a 403 "error looking up service account"."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                return core.create_namespaced_pod(namespace, pod)
            except ApiException as err:
                lagging = (err.status == 500 and "No API token found" in (err.body or "")) or (
                    err.status == 403 and "error looking up service account" in (err.body or ""))
                if not lagging or time.monotonic() > deadline:
                    raise
            time.sleep(0.5)

    def service_account_token(self, name: str, namespace: str = NAMESPACE) -> str:
        """The token the controller-manager put in the ServiceAccount's token Secret."""
        core = self.core()

        def token() -> str | None:
            account = core.read_namespaced_service_account(name, namespace)
            listed = core.list_namespaced_secret(
                namespace, field_selector="type=kubernetes.io/service-account-token")
            for secret in listed.items:
                # the controller stamps the account's uid on a token Secret it filled: one
                # left from an earlier account of the same name holds a dead token
                uid = (secret.metadata.annotations or {}).get("kubernetes.io/service-account.uid")
                if uid == account.metadata.uid and (secret.data or {}).get("token"):
                    return base64.b64decode(secret.data["token"]).decode()
            return None
        return self._wait(token, f"a token for ServiceAccount {namespace}/{name}")

    def service_account_kubeconfig(self, path: Path, name: str,
                                   namespace: str = NAMESPACE) -> Path:
        ca = base64.b64encode(self.ca.read_bytes()).decode()
        user = f"{namespace}-{name}"
        path.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": self.name,
            "clusters": [{"name": self.name, "cluster": {
                "server": self.url, "certificate-authority-data": ca}}],
            "users": [{"name": user, "user": {"token": self.service_account_token(name,
                                                                                  namespace)}}],
            "contexts": [{"name": self.name, "context": {"cluster": self.name, "user": user,
                                                         "namespace": namespace}}]}))
        path.chmod(0o600)
        return path

    @staticmethod
    def _wait(probe: Any, what: str, timeout: float = 60) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            try:
                value = probe()
                if value:
                    return value
            except ApiException as err:
                if err.status != 404:
                    raise
            if time.monotonic() > deadline:
                raise TimeoutError(f"{what}: not there after {timeout:.0f} s")
            time.sleep(0.2)

    def service_account_calls(self) -> dict[tuple[str, str, str], set[int]]:
        """(ServiceAccount, verb, resource) -> the response codes, from the apiserver's
        audit log (the synthfactory namespace's ServiceAccounts: scripts/kube-control-plane.sh).
        What each account really needed, next to what deploy/ grants it."""
        calls: dict[tuple[str, str, str], set[int]] = {}
        log = self.folder / "logs" / "audit.log"
        if not log.exists():
            return calls
        for line in log.read_text().splitlines():
            event = json.loads(line)
            ref = event.get("objectRef") or {}
            if not ref.get("resource"):
                continue  # discovery, /version...
            group = f".{ref['apiGroup']}" if ref.get("apiGroup") else ""
            resource = ref["resource"] + group + (f"/{ref['subresource']}"
                                                   if ref.get("subresource") else "")
            user = event["user"]["username"].removeprefix("system:serviceaccount:")
            code = (event.get("responseStatus") or {}).get("code", 0)
            calls.setdefault((user, event["verb"], resource), set()).add(code)
        return calls

    def clear_namespace(self, namespace: str = NAMESPACE) -> None:
        """Delete what a test left in the namespace (pods at once: their nodes are gone)."""
        core = self.core()
        for pod in core.list_namespaced_pod(namespace).items:
            try:
                core.delete_namespaced_pod(pod.metadata.name, namespace, grace_period_seconds=0)
            except ApiException as err:
                if err.status != 404:
                    raise
        for service in core.list_namespaced_service(namespace).items:
            core.delete_namespaced_service(service.metadata.name, namespace)


def crds_for_1_20(crd: dict) -> dict:
    """A CRD of today's KubeRay or Kueue as Kubernetes 1.20 accepts it: CEL rules
    (``x-kubernetes-validations``, 1.25+) and ``selectableFields`` (1.30+) dropped, ``default:
    ""`` dropped, and the keys of every list-map made required. The structural schema, with
    its pruning and type checks, is kept."""
    crd = copy.deepcopy(crd)
    for version in crd["spec"]["versions"]:
        version.pop("selectableFields", None)
        schema = version.get("schema", {}).get("openAPIV3Schema")
        if schema is not None:
            _rewrite_schema(schema)
    return crd


def _rewrite_schema(node: Any) -> None:
    if isinstance(node, dict):
        node.pop("x-kubernetes-validations", None)
        if node.get("default") == "":
            node.pop("default")
        if node.get("x-kubernetes-list-type") == "map":
            keys = node.get("x-kubernetes-list-map-keys") or []
            items = node.get("items") or {}
            required = items.setdefault("required", [])
            required.extend(k for k in keys if k not in required)
            for key in keys:  # a defaulted key is not enough for 1.20's check
                (items.get("properties") or {}).get(key, {}).pop("default", None)
        for value in node.values():
            _rewrite_schema(value)
    elif isinstance(node, list):
        for value in node:
            _rewrite_schema(value)
