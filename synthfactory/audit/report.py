"""What one audit found: the counts of the RESULT line and every problem."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import pyarrow as pa

from synthfactory import storage
from synthfactory.errors import SynthfactoryError

MAX_SHOWN = 50  # problems printed, prompt ids named


@dataclass
class AuditReport:
    run_url: str
    docs_in: int = 0
    prompt_rows: int = 0
    generated: int = 0
    quarantined: int = 0
    rejected: int = 0  # generated rows the quality gate rejected
    registered: int | None = None
    lost: int = 0
    duplicated: int = 0
    stale: int = 0
    joined: int = 0  # joined rows found: one per document and template
    left_out: int = 0  # documents x templates with a chunk quarantined: nothing to join
    attempts: int = 0  # generations made, every attempt of every row
    usable_at: Counter = field(default_factory=Counter)  # attempt -> usable rows it made
    # attempts replayed from earlier commits (docs/adr/0150), each checked against its
    # origin; those whose origin is gone (its run deleted) could not be
    replayed: int = 0
    replay_origins_gone: int = 0
    problems: list[str] = field(default_factory=list)

    def result_line(self) -> str:
        registered = "unchecked" if self.registered is None else self.registered
        return (f"RESULT audit docs_in={self.docs_in} prompt_rows={self.prompt_rows} "
                f"generated={self.generated} quarantined={self.quarantined} "
                f"rejected={self.rejected} registered={registered} lost={self.lost} "
                f"duplicated={self.duplicated} stale={self.stale} joined={self.joined} "
                f"left_out={self.left_out} attempts={self.attempts} "
                f"usable_at={self.usable_at_text()}")

    def usable_at_text(self) -> str:
        return ",".join(f"{k}:{n}" for k, n in sorted(self.usable_at.items())) or "none"

    def summary(self) -> dict:
        keys = ("run_url", "docs_in", "prompt_rows", "generated", "quarantined", "rejected",
                "registered", "lost", "duplicated", "stale", "joined", "left_out")
        return {k: getattr(self, k) for k in keys} | {
            "attempts": self.attempts,
            "replayed": self.replayed, "replay_origins_gone": self.replay_origins_gone,
            "usable_at": {str(k): n for k, n in sorted(self.usable_at.items())},
            "problems": len(self.problems), "clean": not self.problems}


def read_part(url: str, report: AuditReport) -> pa.Table | None:
    try:
        return storage.read_table(url)
    except SynthfactoryError as exc:
        report.problems.append(str(exc))
        return None
