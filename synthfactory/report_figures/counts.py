"""Reason kinds and the two ratios every section of the report uses."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping

_KIND_END = re.compile(r"\s*[(:]")
# Stitch's reasons for a seed left out by --min-quality (synthfactory/stitch/job.py):
# "quality below threshold 0.5" carries the threshold, so kinds are matched by prefix.
BELOW_MIN_QUALITY = "quality below threshold"
NO_QUALITY = "quality missing"


def reason_kind(reason: str | None) -> str:
    """``too long for the context window (900 prompt + ...)`` -> ``too long for the context
    window``: reasons carry per-row detail after ``(`` or ``:``; reports count kinds."""
    return _KIND_END.split(reason or "unknown", maxsplit=1)[0].strip() or "unknown"


def count_kinds(reasons: Mapping[str, int] | Iterable[str]) -> dict[str, int]:
    """Rows by reason kind, sorted: from {reason: rows} or from one reason per row."""
    kinds: Counter = Counter()
    if isinstance(reasons, Mapping):
        for reason, rows in reasons.items():
            kinds[reason_kind(reason)] += int(rows)
    else:
        kinds.update(reason_kind(r) for r in reasons)
    return dict(sorted(kinds.items()))


def per_second(tokens: int, seconds: float | None) -> float | None:
    return round(tokens / seconds, 2) if seconds else None


def share(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None
