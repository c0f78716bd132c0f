"""Progress for a terminal (a tqdm bar) or a pod (a log line every
``$SYNTHFACTORY_PROGRESS_SECONDS``, 30 s by default)."""

from __future__ import annotations

import logging
import os
import sys
import time

from synthfactory.contract import PROGRESS_SECONDS_ENV as INTERVAL_ENV

log = logging.getLogger(__name__)


class Progress:
    def __init__(self, label: str, total: int, done: int = 0, interval: float | None = None):
        self.label, self.total, self.done = label, total, done
        self.tokens = 0
        self.started = self._last = time.monotonic()
        self.interval = float(os.environ.get(INTERVAL_ENV, 30)) if interval is None else interval
        self._bar = None
        if sys.stderr.isatty():
            from tqdm import tqdm

            self._bar = tqdm(total=total, initial=done, desc=label, unit="row")

    def update(self, rows: int, tokens: int) -> None:
        self.done += rows
        self.tokens += tokens
        if self._bar is not None:
            self._bar.update(rows)
            self._bar.set_postfix(tok_s=f"{self.rate():.0f}")
        elif time.monotonic() - self._last >= self.interval:
            self._last = time.monotonic()
            self.log()

    def rate(self) -> float:
        return self.tokens / max(time.monotonic() - self.started, 1e-9)

    def log(self) -> None:
        elapsed = time.monotonic() - self.started
        left = self.total - self.done
        per_row = elapsed / max(self.done, 1)
        log.info("%s: %d/%d rows, %.0f output tokens/s, ETA %.0fs",
                 self.label, self.done, self.total, self.rate(), left * per_row)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
        else:
            self.log()
