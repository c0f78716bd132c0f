"""The kubernetes runner reads the engine's exit code like the local one: a pod whose
engine exited 2 or 3 (bad input, refused commit) fails its task without retries."""

from __future__ import annotations

import pytest
from airflow.providers.cncf.kubernetes.operators.pod import KubernetesPodOperator
from airflow.sdk.exceptions import AirflowException, AirflowFailException
from kubernetes.client import models as k8s

from synthfactory_airflow.operators.kubernetes import SynthfactoryPodOperator, pod_operator_kwargs
from synthfactory_airflow.operators.settings import Settings


def _pod_that_exited(code: int) -> k8s.V1Pod:
    state = k8s.V1ContainerState(terminated=k8s.V1ContainerStateTerminated(exit_code=code))
    status = k8s.V1ContainerStatus(name="base", state=state, image="i", image_id="",
                                   ready=False, restart_count=0)
    return k8s.V1Pod(metadata=k8s.V1ObjectMeta(name="p"),
                     status=k8s.V1PodStatus(phase="Failed", container_statuses=[status]))


@pytest.mark.parametrize(("code", "retried"), [(1, True), (2, False), (3, False)])
def test_exit_code_decides_whether_the_failure_is_retried(monkeypatch, code, retried):
    def failed_pod(self, pod, remote_pod, *args, **kwargs):  # what KPO does for a failed pod
        raise AirflowException(f"Pod {pod.metadata.name} returned a failure.")

    monkeypatch.setattr(KubernetesPodOperator, "cleanup", failed_pod)
    monkeypatch.setenv("SYNTHFACTORY_RUNNER", "kubernetes")
    task = SynthfactoryPodOperator(task_id="crawl_metadata", arguments=["crawl"],
                                   **pod_operator_kwargs("cpu", Settings(), "crawl_metadata"))
    pod = _pod_that_exited(code)
    with pytest.raises(AirflowException) as raised:
        task.cleanup(pod, pod)
    assert isinstance(raised.value, AirflowFailException) is not retried
