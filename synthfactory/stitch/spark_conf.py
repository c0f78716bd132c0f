"""Spark settings for the stitch job by master: ``local[*]``, a standalone cluster
(``spark://``) or Kubernetes (``k8s://``, client mode: this process is the driver).

Executor sizing comes from the command line (the DAG's Params); where the executors run
on Kubernetes (namespace, image, the driver's Service and pod, the executor pod
template) comes from the driver pod's environment, which the Airflow side
(operators/spark_kubernetes.py) fills from its settings. The names below are that
contract (docs/stitch.md, docs/adr/0090).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path

from synthfactory.contract import spark_driver as driver
from synthfactory.errors import PermanentError

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
# Where the data is, not who may read it: executors must agree with the driver.
# Credentials never travel in Spark's configuration; executors hold their own.
STORAGE_ENV = ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_REGION", "AWS_DEFAULT_REGION")


def is_local(master: str) -> bool:
    return master == "local" or master.startswith("local[")


def executor_conf(master: str, executors: int | None, cores: int | None,
                  memory: str | None) -> dict[str, str]:
    """Executor count and size on a cluster master (local mode has one JVM: nothing)."""
    if is_local(master):
        return {}
    conf = {}
    if executors:
        conf["spark.executor.instances"] = str(executors)
    if cores:
        conf["spark.executor.cores"] = str(cores)
    if memory:
        conf["spark.executor.memory"] = memory
    if master.startswith("spark://") and executors and cores:
        conf["spark.cores.max"] = str(executors * cores)  # standalone: caps the executors
    # Start the job once every executor is there: the read stage is spread over all of
    # them instead of landing on the first to register.
    conf["spark.scheduler.minRegisteredResourcesRatio"] = "1.0"
    conf["spark.scheduler.maxRegisteredResourcesWaitingTime"] = (
        "600s" if master.startswith("k8s://") else "60s")
    return conf


def storage_conf(master: str, env: Mapping[str, str]) -> dict[str, str]:
    """The driver's S3 endpoint and region, passed on to the executors."""
    if is_local(master):
        return {}
    return {f"spark.executorEnv.{k}": env[k] for k in STORAGE_ENV if env.get(k)}


def kubernetes_conf(env: Mapping[str, str], scratch: str | None = None) -> dict[str, str]:
    """Client mode in a pod: executors are pods of ``$SYNTHFACTORY_SPARK_IMAGE`` built from
    the executor pod template, reaching the driver through its headless Service."""
    missing = [k for k in (driver.ENV_IMAGE, driver.ENV_NAMESPACE, driver.ENV_DRIVER_POD,
                           driver.ENV_DRIVER_HOST, driver.ENV_EXECUTOR_TEMPLATE)
               if not env.get(k)]
    if missing:
        raise PermanentError(
            f"--master k8s://...: the driver pod's environment lacks {', '.join(missing)} "
            "(the kubernetes runner sets them: operators/spark_kubernetes.py)")
    try:
        template = json.loads(env[driver.ENV_EXECUTOR_TEMPLATE])
    except json.JSONDecodeError as exc:
        raise PermanentError(f"{driver.ENV_EXECUTOR_TEMPLATE}: not JSON ({exc})") from exc
    # Spark reads the template from a file; the root filesystem is read-only, so the
    # file goes to the pod's scratch volume (JSON is YAML to Spark's loader).
    folder = Path(tempfile.mkdtemp(prefix="spark-template-", dir=scratch))
    template_file = folder / "executor-pod-template.json"
    template_file.write_text(json.dumps(template))
    conf = {
        "spark.kubernetes.container.image": env[driver.ENV_IMAGE],
        "spark.kubernetes.namespace": env[driver.ENV_NAMESPACE],
        # executors are owned by the driver pod: deleting it deletes them
        "spark.kubernetes.driver.pod.name": env[driver.ENV_DRIVER_POD],
        "spark.kubernetes.executor.podTemplateFile": str(template_file),
        "spark.kubernetes.executor.podTemplateContainerName": driver.EXECUTOR_CONTAINER,
        "spark.driver.host": env[driver.ENV_DRIVER_HOST],
        "spark.driver.bindAddress": "0.0.0.0",
        "spark.driver.port": str(driver.DRIVER_PORT),
        "spark.driver.blockManager.port": str(driver.BLOCK_MANAGER_PORT),
    }
    if (SERVICE_ACCOUNT_DIR / "token").is_file():  # the driver's own ServiceAccount
        conf["spark.kubernetes.authenticate.caCertFile"] = str(SERVICE_ACCOUNT_DIR / "ca.crt")
        conf["spark.kubernetes.authenticate.oauthTokenFile"] = str(SERVICE_ACCOUNT_DIR / "token")
    return conf


def session_conf(master: str, executors: int | None = None, cores: int | None = None,
                 memory: str | None = None, env: Mapping[str, str] | None = None,
                 scratch: str | None = None) -> dict[str, str]:
    """Every master-specific setting ``spark_session`` applies on top of its own."""
    env = os.environ if env is None else env
    conf = {**executor_conf(master, executors, cores, memory), **storage_conf(master, env)}
    if master.startswith("k8s://"):
        conf.update(kubernetes_conf(env, scratch))
    return conf
