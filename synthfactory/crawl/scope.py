"""Which listed objects belong in the manifest, and which prefixes to list at all.

With a partition template and an interval, only the interval's partition prefixes are
listed (one request for a small partition instead of relisting the whole source). The
same rules are applied again to every listed object, so a fan-out over the whole
source gives the same manifest.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import pyarrow as pa

from synthfactory.crawl.interval import Interval, PartitionTemplate
from synthfactory.crawl.listing import ListPage, ListTask
from synthfactory.crawl.manifest_writer import build_batch

# Past this many interval partitions, one fan-out over the source is cheaper than a
# request per (mostly empty) partition prefix.
MAX_TARGETED_PREFIXES = 5000


@dataclass
class ScopedPage:
    batch: pa.RecordBatch
    bytes: int
    partitions: set[tuple[str, ...]]
    skipped: Counter = field(default_factory=Counter)
    unmatched_example: str | None = None


@dataclass
class CrawlScope:
    root_prefix: str
    schema: pa.Schema
    template: PartitionTemplate | None = None
    interval: Interval | None = None
    by_partition: bool = False
    by_last_modified: bool = False
    suffix: str = ""

    def initial_tasks(self, fanout_depth: int) -> list[ListTask]:
        if self.by_partition and self.template and self.interval:
            spans = self.template.spans(self.interval)
            if len(spans) <= MAX_TARGETED_PREFIXES:
                prefixes = dict.fromkeys(self.root_prefix + self.template.render(s) for s in spans)
                return [ListTask(p, delimited=False) for p in prefixes]
        return [ListTask(self.root_prefix, delimited=fanout_depth > 0)]

    def apply(self, page: ListPage, url_of: Callable[[str], str]) -> ScopedPage:
        keys, sizes, etags, modified, values = [], [], [], [], []
        skipped: Counter = Counter()
        partitions: set[tuple[str, ...]] = set()
        unmatched = None
        total_bytes = 0
        for obj in page.objects:
            if self.suffix and not obj.key.endswith(self.suffix):
                skipped["not_suffix"] += 1
                continue
            relative = obj.key[len(self.root_prefix) :]
            if self.template is not None:
                found = self.template.match(relative)
                if found is None:
                    skipped["unmatched_template"] += 1
                    unmatched = unmatched or url_of(obj.key)
                    continue
                partition, span_start = found
                if (
                    self.by_partition
                    and self.interval
                    and not self.interval.overlaps(span_start, span_start + self.template.step)
                ):
                    skipped["outside_interval"] += 1
                    continue
            else:
                partition = ()
            if self.by_last_modified and self.interval and not self.interval.contains(
                obj.last_modified
            ):
                skipped["outside_modified_window"] += 1
                continue
            keys.append(url_of(obj.key))
            sizes.append(obj.size)
            etags.append(obj.etag)
            modified.append(obj.last_modified)
            values.append(partition)
            total_bytes += obj.size
            # without a template, a partition is the object's folder
            partitions.add(partition if self.template else (relative.rpartition("/")[0],))
        batch = build_batch(self.schema, keys, sizes, etags, modified, values)
        return ScopedPage(batch, total_bytes, partitions, skipped, unmatched)
