"""Parts written beside the generation: the loop hands a part over and goes on polling
the engine while its requests (one conditional PUT per table) are on the wire.

Written one after the other, at most one in flight: a part's name is the next free
index (ShardParts.next_index), so the next write waits for the one before it, and the
parts land in completion order as before. At 200 ms a request the loop waited 600 ms a
part with the engine idle (benchmarks/storage_faults.py, slow storage). A write that
failed (another writer's part, storage that stayed down) raises at the next hand-over or
at ``close``, before anything is committed."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

import pyarrow as pa

from synthfactory.rephrase.checkpoint import ShardParts


class PartWriter:
    def __init__(self, parts: ShardParts, written: Callable[[], None] | None = None) -> None:
        self.parts = parts
        self.written = written  # after each part is on storage (the metrics' checkpoint)
        self._pool: ThreadPoolExecutor | None = None
        self._pending: Future | None = None

    def write(self, generated: pa.Table, quarantined: pa.Table, attempts: pa.Table) -> None:
        """Hand a part over: waits for the one before it, then returns at once."""
        self.wait()
        if self._pool is None:
            self._pool = ThreadPoolExecutor(1, thread_name_prefix="part-writer")
        self._pending = self._pool.submit(self._write, generated, quarantined, attempts)

    def _write(self, generated: pa.Table, quarantined: pa.Table, attempts: pa.Table) -> None:
        self.parts.write(generated, quarantined, attempts)
        if self.written:
            self.written()

    def wait(self) -> None:
        """Until the part in flight is on storage; its error, if it failed."""
        pending, self._pending = self._pending, None
        if pending is not None:
            pending.result()

    def close(self) -> None:
        """Every part handed over is on storage (or its error raised); the thread ends."""
        try:
            self.wait()
        finally:
            if self._pool is not None:
                self._pool.shutdown(wait=True)
                self._pool = None
