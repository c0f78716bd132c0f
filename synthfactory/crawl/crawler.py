"""Drives a crawl: a bounded pool lists prefixes; one thread writes parts and checkpoints.

Worker threads each run one ListTask to its end (continuation tokens are sequential by
nature) and put every page, already scoped into an Arrow batch, on a bounded queue. The
calling thread alone owns the writer and the task states, so there are no locks: it
appends batches, records each task's token, schedules child prefixes found by
delimited listings, and after each part writes the checkpoint. The bounded queue is
the back-pressure that keeps memory flat when listing is faster than writing.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from synthfactory.crawl import checkpoint as ckpt
from synthfactory.crawl.listing import Lister, ListTask
from synthfactory.crawl.manifest_writer import ManifestWriter, remove_parts
from synthfactory.crawl.scope import CrawlScope, ScopedPage

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CrawlSettings:
    workers: int = 8
    fanout_depth: int = 1  # levels of delimiter listing before flat listing
    rows_per_part: int = 100_000
    checkpoint_seconds: float = 30.0  # also flush a part this often, to bound lost work


@dataclass
class _Page:
    prefix: str
    scoped: ScopedPage
    children: list[str]
    next_token: str | None
    requests: int
    retries: int


class Crawler:
    def __init__(self, lister: Lister, scope: CrawlScope, out_url: str, settings: CrawlSettings,
                 fingerprint: dict):
        self.lister = lister
        self.scope = scope
        self.out_url = out_url
        self.settings = settings
        self.fingerprint = fingerprint
        self._queue: queue.Queue = queue.Queue(maxsize=max(4, 2 * settings.workers))
        self._stop = threading.Event()

    def run(self) -> dict:
        started = time.monotonic()
        state = ckpt.load(self.out_url, self.fingerprint)
        resumed = state is not None
        if state is None:
            state = ckpt.CrawlCheckpoint(self.fingerprint)
            remove_parts(self.out_url)  # a rerun rewrites the folder, no stale parts
            for task in self.scope.initial_tasks(self.settings.fanout_depth):
                state.tasks[task.prefix] = ckpt.TaskState(task.delimited, task.depth)
        else:
            orphans = remove_parts(self.out_url, state.parts_written)
            log.info("resuming %s: %d parts kept, %d orphan parts removed, %d of %d tasks done",
                     self.out_url, state.parts_written, orphans,
                     sum(t.done for t in state.tasks.values()), len(state.tasks))
        totals = Counter(state.totals)
        partitions = {tuple(p) for p in state.partitions}
        writer = ManifestWriter(self.out_url, self.scope.schema, self.settings.rows_per_part,
                                first_part=state.parts_written)
        unmatched_example = None
        this_run_requests = 0

        def checkpoint() -> None:
            writer.flush()
            state.parts_written = writer.parts_written
            state.totals = dict(totals)
            state.partitions = [list(p) for p in sorted(partitions)]
            ckpt.save(self.out_url, state)

        pool = ThreadPoolExecutor(self.settings.workers, thread_name_prefix="crawl")
        outstanding = 0
        try:
            for prefix, task_state in list(state.tasks.items()):
                if not task_state.done:
                    pool.submit(self._work, task_state.task(prefix), task_state.token)
                    outstanding += 1
            last_flush = time.monotonic()
            while outstanding:
                try:
                    page = self._queue.get(timeout=1.0)
                except queue.Empty:
                    page = None
                if isinstance(page, BaseException):
                    raise page
                if page is not None:
                    writer.add(page.scoped.batch)
                    totals["objects"] += page.scoped.batch.num_rows
                    totals["bytes"] += page.scoped.bytes
                    totals["requests"] += page.requests
                    totals["retries"] += page.retries
                    totals.update({f"skipped_{k}": v for k, v in page.scoped.skipped.items()})
                    this_run_requests += page.requests
                    partitions |= page.scoped.partitions
                    unmatched_example = unmatched_example or page.scoped.unmatched_example
                    task_state = state.tasks[page.prefix]
                    task_state.token = page.next_token
                    for child in page.children:
                        if child not in state.tasks:
                            child_state = ckpt.TaskState(
                                delimited=task_state.depth + 1 < self.settings.fanout_depth,
                                depth=task_state.depth + 1,
                            )
                            state.tasks[child] = child_state
                            pool.submit(self._work, child_state.task(child), None)
                            outstanding += 1
                    if page.next_token is None:
                        task_state.done = True
                        outstanding -= 1
                overdue = time.monotonic() - last_flush >= self.settings.checkpoint_seconds
                if writer.full or (overdue and writer.buffered_rows):
                    checkpoint()
                    last_flush = time.monotonic()
        finally:
            self._stop.set()
            pool.shutdown(wait=True, cancel_futures=True)
        writer.finish()
        checkpoint()  # the last word before the summary, in case writing that fails
        return {
            "objects": totals["objects"],
            "bytes": totals["bytes"],
            "partitions": len(partitions),
            "requests": totals["requests"],
            "requests_this_run": this_run_requests,
            "retries": totals["retries"],
            "parts": writer.parts_written,
            "tasks": len(state.tasks),
            "resumed": resumed,
            "skipped": {k[len("skipped_"):]: v for k, v in sorted(totals.items())
                        if k.startswith("skipped_")},
            "unmatched_example": unmatched_example,
            "wall_s": round(time.monotonic() - started, 3),
        }

    def _work(self, task: ListTask, token: str | None) -> None:
        try:
            for page in self.lister.pages(task, token):
                if self._stop.is_set():
                    return
                scoped = self.scope.apply(page, self.lister.url_of)
                self._put(_Page(task.prefix, scoped, page.children, page.next_token,
                                page.requests, page.retries))
        except BaseException as exc:  # handed to the writer thread, which raises it
            self._put(exc)

    def _put(self, item) -> None:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.5)
                return
            except queue.Full:
                continue
