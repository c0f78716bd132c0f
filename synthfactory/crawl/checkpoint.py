"""The crawl's checkpoint: finished prefixes and continuation tokens, saved after each part.

Written right after a part file lands, so every token it records points past rows that
are already durable. On resume, parts numbered at or above ``parts_written`` are
orphans (written after the last checkpoint) and are deleted, and each unfinished task
restarts from its recorded token: nothing is listed twice into the manifest, nothing
is lost. The fingerprint ties a checkpoint to the crawl's arguments; a checkpoint from
other arguments is ignored (and the folder rewritten).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from synthfactory import storage
from synthfactory.crawl.listing import ListTask

CHECKPOINT_NAME = "_CHECKPOINT.json"
VERSION = 1


@dataclass
class TaskState:
    delimited: bool
    depth: int
    token: str | None = None
    done: bool = False

    def task(self, prefix: str) -> ListTask:
        return ListTask(prefix, self.delimited, self.depth)


@dataclass
class CrawlCheckpoint:
    fingerprint: dict
    parts_written: int = 0
    tasks: dict[str, TaskState] = field(default_factory=dict)
    totals: dict = field(default_factory=dict)
    partitions: list[list[str]] = field(default_factory=list)

    def to_json(self) -> dict:
        return {"version": VERSION, **asdict(self)}

    @classmethod
    def from_json(cls, data: dict) -> CrawlCheckpoint:
        return cls(
            fingerprint=data["fingerprint"],
            parts_written=int(data["parts_written"]),
            tasks={prefix: TaskState(**state) for prefix, state in data["tasks"].items()},
            totals=dict(data.get("totals", {})),
            partitions=[list(p) for p in data.get("partitions", [])],
        )


def checkpoint_url(out_url: str) -> str:
    return storage.join(out_url, CHECKPOINT_NAME)


def load(out_url: str, fingerprint: dict) -> CrawlCheckpoint | None:
    """The checkpoint of an unfinished crawl with the same arguments, else None."""
    url = checkpoint_url(out_url)
    if not storage.exists(url):
        return None
    data = storage.read_json(url)
    if data.get("version") != VERSION or data.get("fingerprint") != fingerprint:
        return None
    return CrawlCheckpoint.from_json(data)


def save(out_url: str, checkpoint: CrawlCheckpoint) -> None:
    storage.write_json(checkpoint_url(out_url), checkpoint.to_json())


def clear(out_url: str) -> None:
    storage.delete(checkpoint_url(out_url))
