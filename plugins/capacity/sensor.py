"""WaveCapacitySensor: wait until every pod of a wave fits the cluster at one moment."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseSensorOperator, PokeReturnValue
from airflow.sdk.configuration import conf
from airflow.sdk.exceptions import AirflowException, AirflowFailException, AirflowSkipException

from synthfactory_airflow.plugins.capacity.check import CapacityCheck
from synthfactory_airflow.plugins.capacity.metrics import push_wave, wave_metrics
from synthfactory_airflow.plugins.capacity.trigger import WaveCapacityTrigger

if TYPE_CHECKING:
    from airflow.sdk import Context


class WaveCapacitySensor(BaseSensorOperator):
    """Succeed when, in one snapshot, every pod of ``wave`` fits a node (and pool slots are open).

    :param wave: pod groups, ``[{"pool", "count", "requests", "node_selector", "tolerations"}]``
        (a list, an XComArg or a template); see docs/capacity.md.
    :param cluster: ``"local"`` (this machine as one node) or ``"kubernetes"``.
    :param namespace: namespace of the wave's pods (returned with the placements; pods of all
        namespaces count against node capacity).
    :param kubernetes_conn_id: Kubernetes connection; ``None`` uses ``config_file`` or the
        default kubeconfig / in-cluster config.
    :param config_file: kubeconfig path, when no connection is used.
    :param cluster_context: kubeconfig context.
    :param pool_connections: ``{pool: kubernetes_conn_id}`` when pools live in different
        clusters (a CPU and a GPU cluster): one poke reads every cluster and the wave is
        admitted only when each pool's pods fit its own cluster at once.
    :param airflow_pools: ``{pool: slots}`` the wave's tasks take; also wait for open slots,
        read through the REST API of ``airflow_api_conn_id``.
    :param kueue_cluster_queue: fit against this Kueue ClusterQueue's free quota instead of
        nodes; ``kueue_local_queue`` gives the queue-name label returned for the pods.
    :param fail_when_impossible: fail (or skip with ``soft_fail``) at once when a pod could
        not fit even an empty node; default: yes locally, no on Kubernetes (autoscaling).
    :param deferrable: wait in the triggerer instead of a worker slot.
    Returns (XCom) ``{"fits", "placements": {group: {node: pods}}, "pod_labels", "namespace"}``.
    """

    template_fields: Sequence[str] = (
        "wave", "namespace", "airflow_pools", "kueue_cluster_queue", "kueue_local_queue",
    )
    ui_color = "#d9f0e3"

    def __init__(
        self,
        *,
        wave: Any,
        cluster: str = "local",
        namespace: str | None = None,
        kubernetes_conn_id: str | None = "kubernetes_default",
        config_file: str | None = None,
        cluster_context: str | None = None,
        airflow_pools: dict[str, int] | None = None,
        airflow_api_conn_id: str = "airflow_api",
        kueue_cluster_queue: str | None = None,
        kueue_local_queue: str | None = None,
        fail_when_impossible: bool | None = None,
        pool_connections: dict[str, str] | None = None,
        deferrable: bool = conf.getboolean("operators", "default_deferrable", fallback=False),
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.wave = wave
        self.cluster = cluster
        self.namespace = namespace
        self.kubernetes_conn_id = kubernetes_conn_id
        self.config_file = config_file
        self.cluster_context = cluster_context
        self.airflow_pools = airflow_pools
        self.airflow_api_conn_id = airflow_api_conn_id
        self.kueue_cluster_queue = kueue_cluster_queue
        self.kueue_local_queue = kueue_local_queue
        self.fail_when_impossible = fail_when_impossible
        self.pool_connections = pool_connections
        self.deferrable = deferrable
        if isinstance(wave, list) and "{{" not in json.dumps(wave, default=str):
            self._check()  # a literal wave with a typo fails at DAG parse time, not at 3 a.m.

    def _check(self) -> CapacityCheck:
        return CapacityCheck(
            wave=self.wave,
            cluster=self.cluster,
            namespace=self.namespace,
            kubernetes_conn_id=self.kubernetes_conn_id,
            config_file=self.config_file,
            cluster_context=self.cluster_context,
            airflow_pools=self.airflow_pools,
            airflow_api_conn_id=self.airflow_api_conn_id,
            kueue_cluster_queue=self.kueue_cluster_queue,
            kueue_local_queue=self.kueue_local_queue,
            fail_when_impossible=self.fail_when_impossible,
            pool_connections=self.pool_connections,
        )

    def poke(self, context: Context) -> PokeReturnValue:
        result = self._check().run()
        self.log.info("capacity check\n%s", result.table)
        # if a Pushgateway is configured (plugins/capacity/metrics.py)
        push_wave(result, context, lambda: self._wait_started(context))
        if result.never:
            raise AirflowFailException(result.never)
        return PokeReturnValue(is_done=result.fits, xcom_value=result.xcom if result.fits else None)

    def _wait_started(self, context: Context) -> float:
        """When this wait began (epoch seconds): the first poke of the task's try; in
        reschedule mode, each poke a new process, the first reschedule's date."""
        started = getattr(self, "_waiting_since", None)
        if started is None:
            first = None
            if self.reschedule:
                try:
                    first = context["ti"].get_first_reschedule_date(context)
                except Exception:  # no task instance (a test, a dry run): from now
                    first = None
            started = first.timestamp() if first is not None else time.time()
            self._waiting_since = started
        return started

    def execute(self, context: Context) -> Any:
        if not self.deferrable:
            return super().execute(context)
        # Check once here: a wave that fits now should not pay a round trip to the triggerer.
        try:
            first = self.poke(context)
        except AirflowFailException as exc:
            if self.soft_fail or self.never_fail:
                raise AirflowSkipException(str(exc)) from exc
            raise
        if first:
            return first.xcom_value
        self.defer(
            trigger=WaveCapacityTrigger(self._check().to_kwargs(), self.poke_interval,
                                        wave_metrics(context, self._wait_started(context))),
            method_name="execute_complete",
            timeout=timedelta(seconds=self.timeout),
        )

    def execute_complete(self, context: Context, event: dict[str, Any]) -> Any:
        status = event.get("status")
        if status == "success":
            self.log.info("capacity check\n%s", event.get("table", ""))
            return event.get("xcom")
        if status == "never":
            raise AirflowFailException(event.get("message"))
        raise AirflowException(f"capacity trigger failed: {event.get('message', event)}")
