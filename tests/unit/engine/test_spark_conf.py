"""Spark settings per master: executor sizing, what executors learn from the driver's
environment, and client mode on Kubernetes from the driver pod's environment."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from synthfactory.contract import spark_driver as driver
from synthfactory.errors import PermanentError
from synthfactory.stitch import spark_conf as sc

TEMPLATE = {"apiVersion": "v1", "kind": "Pod",
            "spec": {"containers": [{"name": driver.EXECUTOR_CONTAINER}]}}
POD_ENV = {
    driver.ENV_IMAGE: "registry.example/worker:1.2",
    driver.ENV_NAMESPACE: "synth",
    driver.ENV_DRIVER_POD: "synthfactory-stitch-prompts-x1y2",
    driver.ENV_DRIVER_HOST: "synthfactory-spark-0123.synth.svc",
    driver.ENV_EXECUTOR_TEMPLATE: json.dumps(TEMPLATE),
    "AWS_ENDPOINT_URL": "https://s3.example",
    "AWS_REGION": "eu-west-1",
    "AWS_SECRET_ACCESS_KEY": "do-not-leak-me",
    "AWS_ACCESS_KEY_ID": "AKIDONOTLEAK",
}


def test_local_mode_gets_nothing_extra():
    assert sc.session_conf("local[*]", 4, 2, "8g", env=POD_ENV) == {}
    assert sc.session_conf("local[2]", env=POD_ENV) == {}


def test_standalone_caps_cores_and_waits_for_every_executor():
    conf = sc.session_conf("spark://10.0.0.1:7077", 2, 1, "1g", env={})
    assert conf == {"spark.executor.instances": "2", "spark.executor.cores": "1",
                    "spark.executor.memory": "1g", "spark.cores.max": "2",
                    "spark.scheduler.minRegisteredResourcesRatio": "1.0",
                    "spark.scheduler.maxRegisteredResourcesWaitingTime": "60s"}


def test_executors_learn_where_the_data_is_never_the_credentials():
    conf = sc.session_conf("spark://10.0.0.1:7077", env=POD_ENV)
    assert conf["spark.executorEnv.AWS_ENDPOINT_URL"] == "https://s3.example"
    assert conf["spark.executorEnv.AWS_REGION"] == "eu-west-1"
    text = json.dumps(conf)
    assert "do-not-leak-me" not in text and "AKIDONOTLEAK" not in text


def test_kubernetes_client_mode_from_the_pod_environment(tmp_path):
    conf = sc.session_conf("k8s://https://kubernetes.default.svc", 100, 8, "24g",
                           env=POD_ENV, scratch=str(tmp_path))
    assert conf["spark.kubernetes.container.image"] == "registry.example/worker:1.2"
    assert conf["spark.kubernetes.namespace"] == "synth"
    assert conf["spark.kubernetes.driver.pod.name"] == "synthfactory-stitch-prompts-x1y2"
    assert conf["spark.driver.host"] == "synthfactory-spark-0123.synth.svc"
    assert (conf["spark.driver.port"], conf["spark.driver.blockManager.port"]) == ("7078", "7079")
    assert conf["spark.executor.instances"] == "100" and "spark.cores.max" not in conf
    assert conf["spark.kubernetes.executor.podTemplateContainerName"] == driver.EXECUTOR_CONTAINER
    template = Path(conf["spark.kubernetes.executor.podTemplateFile"])
    assert template.parent.parent == tmp_path  # the scratch volume, not the read-only root
    assert json.loads(template.read_text()) == TEMPLATE
    assert "do-not-leak-me" not in json.dumps(conf)


def test_kubernetes_without_the_pod_environment_names_what_is_missing(tmp_path):
    env = {k: v for k, v in POD_ENV.items() if k not in (driver.ENV_IMAGE, driver.ENV_DRIVER_HOST)}
    lacks = f"lacks {driver.ENV_IMAGE}, {driver.ENV_DRIVER_HOST} .*spark_kubernetes"
    with pytest.raises(PermanentError, match=lacks):
        sc.session_conf("k8s://https://kubernetes.default.svc", env=env, scratch=str(tmp_path))


def test_a_template_that_is_not_json_is_refused(tmp_path):
    env = {**POD_ENV, driver.ENV_EXECUTOR_TEMPLATE: "{not json"}
    with pytest.raises(PermanentError, match=f"{driver.ENV_EXECUTOR_TEMPLATE}: not JSON"):
        sc.session_conf("k8s://https://kubernetes.default.svc", env=env, scratch=str(tmp_path))
