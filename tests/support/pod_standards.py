"""The Pod Security Standard "restricted" (plus a read-only root filesystem) as a check
of a serialized pod, shared by the pod tests of every runner."""

from __future__ import annotations

# https://kubernetes.io/docs/concepts/security/pod-security-standards/#restricted
RESTRICTED_VOLUME_TYPES = {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral",
                           "persistentVolumeClaim", "projected", "secret"}


def restricted_violations(pod: dict) -> list[str]:
    """What in a serialized pod breaks the "restricted" profile (or the read-only root)."""
    spec, found = pod["spec"], []
    pod_sc = spec.get("securityContext") or {}
    for flag in ("hostNetwork", "hostPID", "hostIPC"):
        if spec.get(flag):
            found.append(f"spec.{flag}")
    for volume in spec.get("volumes") or []:
        kinds = set(volume) - {"name"}
        if not kinds <= RESTRICTED_VOLUME_TYPES:
            found.append(f"volume {volume['name']}: {sorted(kinds)}")
    if pod_sc.get("runAsUser") == 0:
        found.append("pod runAsUser 0")
    for container in (spec.get("initContainers") or []) + spec["containers"]:
        name, sc = container["name"], container.get("securityContext") or {}
        if not sc.get("runAsNonRoot", pod_sc.get("runAsNonRoot")):
            found.append(f"{name}: runAsNonRoot not true")
        if sc.get("runAsUser", pod_sc.get("runAsUser")) in (0, None):
            found.append(f"{name}: no non-zero runAsUser")
        if sc.get("allowPrivilegeEscalation") is not False:
            found.append(f"{name}: allowPrivilegeEscalation not false")
        if sc.get("privileged"):
            found.append(f"{name}: privileged")
        caps = sc.get("capabilities") or {}
        if "ALL" not in (caps.get("drop") or []):
            found.append(f"{name}: capabilities do not drop ALL")
        if set(caps.get("add") or []) - {"NET_BIND_SERVICE"}:
            found.append(f"{name}: adds capabilities {caps['add']}")
        seccomp = (sc.get("seccompProfile") or pod_sc.get("seccompProfile") or {}).get("type")
        if seccomp not in ("RuntimeDefault", "Localhost"):
            found.append(f"{name}: seccompProfile {seccomp}")
        if not sc.get("readOnlyRootFilesystem"):
            found.append(f"{name}: root filesystem writable")
        if any(p.get("hostPort") for p in container.get("ports") or []):
            found.append(f"{name}: hostPort")
    return found
