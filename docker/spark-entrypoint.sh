#!/usr/bin/env bash
# The worker image's entrypoint. Spark on Kubernetes starts an executor pod of this image
# with the single argument "executor" and its settings in the environment (SPARK_DRIVER_URL,
# SPARK_EXECUTOR_ID, ...): that becomes the KubernetesExecutorBackend JVM, as in Spark's own
# images. Any other command runs as given (the KubernetesPodOperator sets its own command).
set -euo pipefail

if [[ "${1:-}" != "executor" ]]; then
  exec "$@"
fi

spark_home="${SPARK_HOME:-$(python -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))')}"
# SPARK_JAVA_OPT_0, _1, ...: the driver's executor JVM options, in their numeric order.
# Read from a pipe, not a file: the root filesystem is read-only.
mapfile -t java_opts < <(env | grep '^SPARK_JAVA_OPT_' | sort -t_ -k4 -n | sed 's/^[^=]*=//')
classpath="${SPARK_CONF_DIR:+$SPARK_CONF_DIR:}${spark_home}/jars/*${SPARK_CLASSPATH:+:$SPARK_CLASSPATH}"

exec "${JAVA_HOME:+$JAVA_HOME/bin/}java" "${java_opts[@]}" \
  -Xms"${SPARK_EXECUTOR_MEMORY}" -Xmx"${SPARK_EXECUTOR_MEMORY}" -cp "${classpath}" \
  org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend \
  --driver-url "${SPARK_DRIVER_URL}" --executor-id "${SPARK_EXECUTOR_ID}" \
  --cores "${SPARK_EXECUTOR_CORES}" --app-id "${SPARK_APPLICATION_ID}" \
  --hostname "${SPARK_EXECUTOR_POD_IP}" \
  --resourceProfileId "${SPARK_RESOURCE_PROFILE_ID:-0}" \
  --podName "${SPARK_EXECUTOR_POD_NAME}"
