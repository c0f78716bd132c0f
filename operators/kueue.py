"""Kueue admission for the pods of the kubernetes runner (``SYNTHFACTORY_KUEUE_QUEUE``).

Every pod carries the LocalQueue label, so Kueue's pod integration gates it until the
queue's ClusterQueue has quota. The pods of one wave (the rephrase pods of one DAG run)
also form a Kueue pod group: one name per run and wave, and the total count, which is the
number of shard groups in the plan XCom (rendered when the task runs). Kueue admits the
group only once all its pods exist and all fit, so a wave never holds half the GPUs while
the other half waits (docs/adr/0086).
"""

from __future__ import annotations

import hashlib
from typing import Any

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
POD_GROUP_LABEL = "kueue.x-k8s.io/pod-group-name"
POD_GROUP_TOTAL_ANNOTATION = "kueue.x-k8s.io/pod-group-total-count"


def pod_group_name(dag_id: str, run_id: str, wave: str) -> str:
    """A valid label value (and Workload name), the same for every pod and retry of one
    wave of one run, different for any other run or wave; run ids may hold ':' and '+'."""
    digest = hashlib.sha256(f"{dag_id}\0{run_id}\0{wave}".encode()).hexdigest()[:20]
    prefix = "".join(c if c.isascii() and c.isalnum() else "-"
                     for c in f"{dag_id}-{wave}".lower())[:40].strip("-")
    return f"{prefix or 'wave'}-{digest}"


def kueue_pod_kwargs(queue: str, step: str, gang_size: str | None) -> dict[str, Any]:
    """Labels and annotations (merged into the step's own) and ``pod_group`` (the wave's
    name, or None for a pod admitted alone) for SynthfactoryPodOperator.

    ``gang_size``: the template of the wave's pod count; None when the step is no wave.
    """
    if not queue:
        return {"labels": {}, "annotations": {}, "pod_group": None}
    if not gang_size:
        return {"labels": {QUEUE_LABEL: queue}, "annotations": {}, "pod_group": None}
    return {"labels": {QUEUE_LABEL: queue},
            "annotations": {POD_GROUP_TOTAL_ANNOTATION: gang_size}, "pod_group": step}
