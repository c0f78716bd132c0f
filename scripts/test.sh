#!/usr/bin/env bash
# The whole suite, in the two environments it belongs to (see docs/adr/0001).
set -euo pipefail
cd "$(dirname "$0")/.."
export SYNTHFACTORY_HOME="$PWD"
export RAY_AUTH_MODE=disabled
export AIRFLOW_HOME="$(mktemp -d /tmp/synthfactory-test-airflow.XXXXXX)"
export AIRFLOW__CORE__LOAD_EXAMPLES=False
export AIRFLOW__CORE__DAGS_FOLDER="$PWD/dags"
trap 'rm -rf "$AIRFLOW_HOME"' EXIT

if [ -z "${SYNTHFACTORY_SKIP_ENGINE_TESTS:-}" ]; then
  echo "== engine tests (.venv-worker: Spark, vLLM, pyiceberg, torch)"
  .venv-worker/bin/pytest tests/unit/engine tests/integration/engine -q -p no:cacheprovider \
      --durations=15 "$@"
fi
echo "== Airflow tests (.venv: DAG parsing, operators, sensors, a whole DAG run; the kubernetes"
echo "   runner against real control planes and node agents, marker kubernetes_e2e)"
.venv/bin/pytest tests/unit/airflow tests/dags tests/integration/airflow \
    tests/integration/kubernetes -q -p no:cacheprovider --durations=15 "$@"
