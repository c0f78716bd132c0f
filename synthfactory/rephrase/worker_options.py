"""What a rephrase worker is told: one value, read by the worker (worker.py) and by the
attempt loop it drives (attempt_loop.py), each importing it from here and not from the
other."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from synthfactory.rephrase.replay.replayer import ReplayOptions

if TYPE_CHECKING:  # prometheus_client is loaded only by a task that pushes or serves
    from synthfactory.metrics import RephraseMetrics


@dataclass(frozen=True)
class WorkerOptions:
    model: str
    checkpoint_rows: int = 64
    max_in_flight: int = 256
    sampling: dict | None = None
    per_row_budgets: bool = False  # each row's max_new_tokens column caps its generation
    # attempts per row (1: no row is generated again) and trimming an output that ran on
    # to its budget (quality/repair.py); with neither, the worker judges nothing (the
    # attempts' reasons are null) and needs no template. The CLI: the steps table's
    # --max-attempts, repairs on.
    max_attempts: int = 1
    repairs: bool = False
    max_repetition: float | None = None  # the gate's; None: its default (validate's)
    # request keys on every attempt and the replay index written at each commit; with
    # lookup on, an attempt committed before under the same key is replayed, not
    # generated (docs/adr/0150). None: neither (attempts have no keys).
    replay: ReplayOptions | None = None
    # the task's Prometheus metrics (synthfactory/metrics/rephrase_task.py); in-process runs only: a
    # registry does not travel to Ray actors
    metrics: RephraseMetrics | None = field(default=None, compare=False, repr=False)
