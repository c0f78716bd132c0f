"""The environment a local step runs with: an allowlist, not the Airflow worker's.

The worker's environment holds Airflow's own secrets (metadata database URL, fernet
key, API secrets: ``AIRFLOW__*``) and whatever else the deployment set; a step needs
none of them. It gets what the engine and its libraries read (docs/adr/0071).
"""

from __future__ import annotations

from collections.abc import Mapping

from synthfactory.contract.names import METRICS_ADDR_ENV, METRICS_PORT_ENV

NAMES = frozenset({
    "PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "TZ", "TMPDIR", "TMP", "TEMP",
    "JAVA_HOME",  # Spark's JVM
    "KUBECONFIG",  # Spark on k8s:// masters
    "LD_LIBRARY_PATH", "LD_PRELOAD",  # vLLM CPU's tcmalloc / OpenMP preloads
    "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE",
    "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy",
    "XDG_CACHE_HOME", "TOKENIZERS_PARALLELISM",
})
PREFIXES = (
    "LC_", "SYNTHFACTORY_", "AWS_", "PYICEBERG_",
    "HF_", "VLLM_", "RAY_", "OMP_", "KMP_", "MKL_", "TORCH_", "CUDA_", "NVIDIA_", "NCCL_",
    "SPARK_", "PYSPARK_",
)
# Never from the worker: a port to serve /metrics on is a pod's (the kubernetes runner
# sets it); local steps share one host, so they push only and never contend for a port.
NEVER = frozenset({METRICS_PORT_ENV, METRICS_ADDR_ENV})


def allowed(name: str) -> bool:
    return name not in NEVER and (name in NAMES or name.startswith(PREFIXES))


def step_environment(inherited: Mapping[str, str]) -> dict[str, str]:
    """The allowlisted part of ``inherited`` (the worker's ``os.environ``)."""
    return {name: value for name, value in inherited.items() if allowed(name)}
