"""Time intervals of task instances or runs, as the scheduler tests read them from the
metadata database: which overlapped, and how many ran at once."""

from __future__ import annotations


def overlaps(intervals) -> set[frozenset[str]]:
    """Pairs of runs whose intervals ((run_id, map_index, start, end)) overlap in time."""
    pairs = set()
    for i, (run_a, _, start_a, end_a) in enumerate(intervals):
        for run_b, _, start_b, end_b in intervals[i + 1:]:
            if run_a != run_b and start_a < end_b and start_b < end_a:
                pairs.add(frozenset((run_a, run_b)))
    return pairs


def most_at_once(intervals) -> int:
    """The most intervals ((run_id, map_index, start, end)) running at one instant."""
    events = sorted([(s, 1) for _, _, s, _ in intervals] + [(e, -1) for _, _, _, e in intervals],
                    key=lambda ev: (ev[0], ev[1]))  # an end before a start at the same instant
    running = most = 0
    for _, step in events:
        running += step
        most = max(most, running)
    return most
