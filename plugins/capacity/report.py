"""The short table each capacity check logs: pool, needed, free, largest pod that fits, why not."""

from __future__ import annotations

from collections.abc import Sequence

from synthfactory_airflow.plugins.capacity.fit import GroupFit
from synthfactory_airflow.plugins.capacity.quantities import format_resources

_HEADER = ("pool", "pods", "needed", "free", "largest pod that fits", "why not")


def group_row(result: GroupFit) -> tuple[str, ...]:
    group = result.group
    shown = group.shown_resources
    needed = {n: group.requests[n] * group.count for n in shown}
    largest = "-"
    if result.largest_node is not None:
        largest = f"{format_resources(result.largest, shown)} ({result.largest_node})"
    if result.fits:
        why = "fits"
    elif result.never_fits:
        why = f"never: no node could hold one pod even empty; {result.why_not}"
    else:
        why = result.why_not
    label = group.pool if group.name == group.pool else f"{group.pool} ({group.name})"
    return (label, f"{result.placed}/{group.count}", format_resources(needed, shown),
            format_resources(result.free, shown), largest, why)


def render_table(rows: Sequence[Sequence[str]], header: Sequence[str] = _HEADER) -> str:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(str(cell).ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
             for row in [header, *rows]]
    return "\n".join(lines)

