"""What the Spark driver pod agrees on with the operator that launches it
(operators/spark_kubernetes.py builds the pod, synthfactory/stitch/spark_conf.py reads
it): its environment and the ports executors call back on (docs/adr/0090)."""

from __future__ import annotations

ENV_IMAGE = "SYNTHFACTORY_SPARK_IMAGE"
ENV_NAMESPACE = "SYNTHFACTORY_SPARK_NAMESPACE"
ENV_DRIVER_POD = "SYNTHFACTORY_SPARK_DRIVER_POD"
ENV_DRIVER_HOST = "SYNTHFACTORY_SPARK_DRIVER_HOST"
ENV_EXECUTOR_TEMPLATE = "SYNTHFACTORY_SPARK_EXECUTOR_TEMPLATE"
DRIVER_PORT = 7078
BLOCK_MANAGER_PORT = 7079
EXECUTOR_CONTAINER = "spark-executor"
