"""Pod Security Standard "restricted" for every pod the kubernetes runner builds.

The worker image runs as ``WORKER_UID`` (docker/worker-gpu.Dockerfile: ``USER 1000``) and
its root filesystem is read-only in the pod, so every place the engine (or a library under
it) writes gets an ``emptyDir``: ``/tmp``, ``$HOME`` (which holds the Hugging Face, vLLM,
torch inductor, Triton, Numba and matplotlib caches), Spark's local dirs and, for GPU
pods, a memory-backed ``/dev/shm`` for vLLM/torch worker processes. The provider's xcom
sidecar (``/airflow/xcom``, its own emptyDir) gets the same container context.
"""

from __future__ import annotations

from kubernetes.client import models as k8s

WORKER_UID = 1000  # docker/worker-gpu.Dockerfile: USER 1000:1000
HOME = "/home/synthfactory"
CACHE = f"{HOME}/.cache"
SPARK_LOCAL = "/var/lib/synthfactory/spark"

# Where each writer looks, all inside the scratch volumes below (set in the image too).
SCRATCH_ENV = {
    "HOME": HOME,
    "TMPDIR": "/tmp",
    "XDG_CACHE_HOME": CACHE,
    "XDG_CONFIG_HOME": f"{HOME}/.config",
    "HF_HOME": f"{CACHE}/huggingface",
    "VLLM_CACHE_ROOT": f"{CACHE}/vllm",
    "TORCHINDUCTOR_CACHE_DIR": f"{CACHE}/torchinductor",
    "TRITON_CACHE_DIR": f"{CACHE}/triton",
    "NUMBA_CACHE_DIR": f"{CACHE}/numba",
    "MPLCONFIGDIR": f"{HOME}/.config/matplotlib",
    "SPARK_LOCAL_DIRS": SPARK_LOCAL,
}

# volume name -> (mount path, emptyDir medium)
_SCRATCH = {"tmp": ("/tmp", None), "home": (HOME, None), "spark-local": (SPARK_LOCAL, None)}
_GPU_SCRATCH = {"dshm": ("/dev/shm", "Memory")}  # vLLM/torch share tensors through it

_RUNTIME_DEFAULT = k8s.V1SeccompProfile(type="RuntimeDefault")


def pod_security_context() -> k8s.V1PodSecurityContext:
    return k8s.V1PodSecurityContext(
        run_as_non_root=True, run_as_user=WORKER_UID, run_as_group=WORKER_UID,
        fs_group=WORKER_UID, seccomp_profile=_RUNTIME_DEFAULT)


def container_security_context() -> k8s.V1SecurityContext:
    """For the step container and the xcom sidecar alike."""
    return k8s.V1SecurityContext(
        run_as_non_root=True, run_as_user=WORKER_UID, run_as_group=WORKER_UID,
        allow_privilege_escalation=False, privileged=False,
        capabilities=k8s.V1Capabilities(drop=["ALL"]),
        read_only_root_filesystem=True, seccomp_profile=_RUNTIME_DEFAULT)


def _mounts(kind: str) -> dict[str, tuple[str, str | None]]:
    return {**_SCRATCH, **(_GPU_SCRATCH if kind == "gpu" else {})}


def scratch_volumes(kind: str) -> list[k8s.V1Volume]:
    return [k8s.V1Volume(name=name, empty_dir=k8s.V1EmptyDirVolumeSource(medium=medium))
            for name, (_, medium) in _mounts(kind).items()]


def scratch_volume_mounts(kind: str) -> list[k8s.V1VolumeMount]:
    return [k8s.V1VolumeMount(name=name, mount_path=path)
            for name, (path, _) in _mounts(kind).items()]


def scratch_env() -> list[k8s.V1EnvVar]:
    return [k8s.V1EnvVar(name=name, value=value) for name, value in SCRATCH_ENV.items()]


def security_kwargs(kind: str) -> dict:
    """KubernetesPodOperator keyword arguments that make its pod "restricted"."""
    return {
        "security_context": pod_security_context(),
        "container_security_context": container_security_context(),
        "xcom_sidecar_container_security_context": container_security_context(),
        "volumes": scratch_volumes(kind),
        "volume_mounts": scratch_volume_mounts(kind),
    }
