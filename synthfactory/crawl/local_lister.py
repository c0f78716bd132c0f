"""``file://`` sources: the embedded default, same task and page shape as S3.

Pages walk the tree in a deterministic order (sorted path components) so that a page's
last key is a valid continuation token, as S3's are.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import UTC, datetime

from synthfactory import storage
from synthfactory.contract.names import MAX_KEYS_CAP
from synthfactory.crawl.listing import ListPage, ListTask, ObjectInfo
from synthfactory.errors import SynthfactoryError


class LocalLister:
    def __init__(self, source_url: str, page_size: int = MAX_KEYS_CAP):
        self.source_url = storage.normalize(source_url).rstrip("/")
        root = storage.local_path(self.source_url)
        if not os.path.isdir(root):
            what = "is a file, not a folder" if os.path.exists(root) else "no such folder"
            raise SynthfactoryError(f"{self.source_url}: {what}")
        if not os.access(root, os.R_OK | os.X_OK):
            raise SynthfactoryError(f"{self.source_url}: permission denied")
        self.root_prefix = root.rstrip("/") + "/"
        self.page_size = min(page_size, MAX_KEYS_CAP)

    def url_of(self, key: str) -> str:
        return "file://" + key

    def pages(self, task: ListTask, token: str | None) -> Iterator[ListPage]:
        if task.delimited:
            yield self._one_level(task.prefix)
            return
        resume_after = tuple(token.split("/")) if token else None
        batch: list[ObjectInfo] = []
        for path in _walk_sorted(task.prefix.rstrip("/")):
            if resume_after is not None and tuple(path.split("/")) <= resume_after:
                continue
            batch.append(_info(path))
            if len(batch) == self.page_size:
                # the token is only known to be final once the next key exists
                yield ListPage(batch, next_token=batch[-1].key)
                batch = []
        yield ListPage(batch, next_token=None)

    def _one_level(self, prefix: str) -> ListPage:
        objects, children = [], []
        try:
            entries = sorted(os.scandir(prefix.rstrip("/")), key=lambda e: e.name)
        except FileNotFoundError:
            entries = []
        for entry in entries:
            if entry.is_dir():
                children.append(entry.path + "/")
            elif entry.is_file():
                objects.append(_info(entry.path))
        return ListPage(objects, children=children)


def _walk_sorted(directory: str) -> Iterator[str]:
    try:
        entries = sorted(os.scandir(directory), key=lambda e: e.name)
    except FileNotFoundError:
        return  # a partition that does not exist is an empty listing, as on S3
    except PermissionError as exc:
        raise SynthfactoryError(f"file://{directory}: permission denied") from exc
    for entry in entries:
        if entry.is_dir():
            yield from _walk_sorted(entry.path)
        elif entry.is_file():
            yield entry.path


def _info(path: str) -> ObjectInfo:
    stat = os.stat(path)
    return ObjectInfo(
        key=path,
        size=stat.st_size,
        etag=None,  # local files have no ETag; null rather than an invented one
        last_modified=datetime.fromtimestamp(stat.st_mtime, tz=UTC),
    )
