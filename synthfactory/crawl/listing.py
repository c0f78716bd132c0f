"""What a lister hands the crawler: one page of objects per request, and the task shape."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol


@dataclass(frozen=True)
class ListTask:
    """One prefix to list: ``delimited`` lists one level (objects + child prefixes),
    otherwise everything below ``prefix`` is listed flat."""

    prefix: str
    delimited: bool
    depth: int = 0


@dataclass
class ObjectInfo:
    key: str  # the key inside the bucket, or the absolute local path
    size: int
    etag: str | None
    last_modified: datetime


@dataclass
class ListPage:
    objects: list[ObjectInfo]
    children: list[str] = field(default_factory=list)  # child prefixes (delimited tasks)
    next_token: str | None = None  # None: the task is finished
    requests: int = 1
    retries: int = 0


class Lister(Protocol):
    source_url: str
    root_prefix: str  # the source's own prefix, "" or ending in "/"

    def pages(self, task: ListTask, token: str | None) -> Iterator[ListPage]:
        """Pages of ``task`` from ``token`` (None: the start); always at least one page."""

    def url_of(self, key: str) -> str:
        """The full URL of an object key, as written to the manifest's ``key`` column."""
