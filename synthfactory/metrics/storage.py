"""``synthfactory_storage_retries_total{step, cause}``: the storage requests a step tried
again, read live from the process's counts (synthfactory/storage_retries.py) at every
push or scrape, so throttling shows while the step still runs."""

from __future__ import annotations

from collections.abc import Mapping

from prometheus_client.core import CounterMetricFamily

from synthfactory import storage_retries
from synthfactory.metrics.export import PREFIX

NAME = PREFIX + "storage_retries"  # the client adds _total


class StorageRetries:
    """A collector for a step's registry: one series per cause, every cause from the
    start (0 until it happens), with the step's labels and ``step``."""

    def __init__(self, labels: Mapping[str, str], step: str) -> None:
        self.labels = {**labels, "step": step}
        self.before = storage_retries.counts()  # the step's own, from its start

    def collect(self):
        family = CounterMetricFamily(NAME, "storage requests tried again, by cause: "
                                           "throttled (503, 429), server_error (other "
                                           "5xx), connection (reset, timeout)",
                                     labels=[*self.labels, "cause"])
        counts = storage_retries.since(self.before)
        for cause in storage_retries.CAUSES:
            family.add_metric([*self.labels.values(), cause], counts.get(cause, 0))
        yield family
