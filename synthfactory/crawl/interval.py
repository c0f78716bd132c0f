"""The run's data interval and the partition template that maps it onto key prefixes.

A template such as ``dt={ds}`` or ``year={yyyy}/month={mm}/day={dd}`` names the path
segments under the source prefix. A partition covers one day (one hour when the
template has ``{hh}``); it is selected when that span overlaps [start, end). For a
daily run that is exactly "ds in [start, end)". Errors here are bad input, which a
retry cannot fix (PermanentError).
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from synthfactory.errors import PermanentError

# placeholder -> the regex its value must match
PLACEHOLDERS: dict[str, str] = {
    "ds": r"\d{4}-\d{2}-\d{2}",
    "ds_nodash": r"\d{8}",
    "yyyy": r"\d{4}",
    "mm": r"\d{2}",
    "dd": r"\d{2}",
    "hh": r"\d{2}",
}


def parse_instant(text: str, option: str) -> datetime:
    """An ISO-8601 instant; a naive one is taken as UTC (Airflow always sends an offset)."""
    try:
        value = datetime.fromisoformat(text)
    except ValueError as exc:
        raise PermanentError(f"{option} {text!r}: not an ISO-8601 timestamp") from exc
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


@dataclass(frozen=True)
class Interval:
    """A half-open data interval [start, end) in UTC."""

    start: datetime
    end: datetime

    @classmethod
    def parse(cls, start: str | None, end: str | None) -> Interval | None:
        if start is None and end is None:
            return None
        if start is None or end is None:
            raise PermanentError(
                "--interval-start and --interval-end go together: give both or neither"
            )
        interval = cls(
            parse_instant(start, "--interval-start"), parse_instant(end, "--interval-end")
        )
        if interval.end <= interval.start:
            raise PermanentError(
                f"interval [{start}, {end}): the end must come after the start"
            )
        return interval

    def contains(self, instant: datetime) -> bool:
        return self.start <= instant < self.end

    def overlaps(self, start: datetime, end: datetime) -> bool:
        return start < self.end and end > self.start


class PartitionTemplate:
    """Parses ``dt={ds}``-style templates; matches keys and renders interval prefixes."""

    def __init__(self, template: str):
        self.template = template.strip("/")
        if not self.template:
            raise PermanentError(f"partition template {template!r}: empty")
        self.columns: list[str] = []
        self.placeholders: list[str] = []
        patterns = [self._segment(i, seg) for i, seg in enumerate(self.template.split("/"))]
        self._regex = re.compile("/".join(patterns) + "/")
        names = set(self.placeholders)
        if not ({"ds"} <= names or {"ds_nodash"} <= names or {"yyyy", "mm", "dd"} <= names):
            raise PermanentError(
                f"partition template {template!r}: needs a full date "
                "({ds}, {ds_nodash}, or {yyyy}, {mm} and {dd})"
            )
        self.step = timedelta(hours=1) if "hh" in names else timedelta(days=1)

    def _segment(self, index: int, segment: str) -> str:
        if not self._fields(segment):
            return re.escape(segment)
        head, sep, body = segment.partition("=")
        if sep and "{" not in head:  # Hive style "name={...}": the column is "name"
            column, literal_head = head, re.escape(head + "=")
        else:
            column, literal_head, body = self._fields(segment)[0], "", segment
        if not column or column in self.columns:
            raise PermanentError(
                f"partition template {self.template!r}: bad or repeated column name {column!r}"
            )
        self.columns.append(column)
        parts: list[str] = []
        for literal, field, spec, conversion in string.Formatter().parse(body):
            parts.append(re.escape(literal))
            if field is None:
                continue
            if field not in PLACEHOLDERS or spec or conversion:
                raise PermanentError(
                    f"partition template {self.template!r}: unknown placeholder {{{field}}} "
                    f"(use {', '.join('{' + p + '}' for p in PLACEHOLDERS)})"
                )
            if field in self.placeholders:
                raise PermanentError(
                    f"partition template {self.template!r}: {{{field}}} appears twice"
                )
            self.placeholders.append(field)
            parts.append(f"(?P<{field}>{PLACEHOLDERS[field]})")
        return f"{literal_head}(?P<v{index}>{''.join(parts)})"

    def _fields(self, segment: str) -> list[str]:
        try:
            return [f for _, f, _, _ in string.Formatter().parse(segment) if f is not None]
        except ValueError as exc:  # "dt={ds" and the like
            raise PermanentError(f"partition template {self.template!r}: {exc}") from exc

    def match(self, relative_key: str) -> tuple[tuple[str, ...], datetime] | None:
        """(partition values, partition start) for a key relative to the source, or None."""
        found = self._regex.match(relative_key)
        if found is None:
            return None
        groups = found.groupdict()
        try:
            if groups.get("ds"):
                start = datetime.strptime(groups["ds"], "%Y-%m-%d")
            elif groups.get("ds_nodash"):
                start = datetime.strptime(groups["ds_nodash"], "%Y%m%d")
            else:
                start = datetime(int(groups["yyyy"]), int(groups["mm"]), int(groups["dd"]))
            if groups.get("hh"):
                start = start.replace(hour=int(groups["hh"]))
        except ValueError:
            return None  # dt=2026-13-45: not a date, reported as unmatched
        values = tuple(v for k, v in groups.items() if k.startswith("v"))
        return values, start.replace(tzinfo=UTC)

    def spans(self, interval: Interval) -> list[datetime]:
        """Start of every partition span overlapping the interval."""
        first = interval.start.replace(minute=0, second=0, microsecond=0)
        if self.step == timedelta(days=1):
            first = first.replace(hour=0)
        out = []
        current = first
        while current < interval.end:
            out.append(current)
            current += self.step
        return out

    def render(self, start: datetime) -> str:
        """The relative prefix (with trailing slash) of the partition starting at ``start``."""
        return self.template.format(
            ds=start.strftime("%Y-%m-%d"),
            ds_nodash=start.strftime("%Y%m%d"),
            yyyy=start.strftime("%Y"),
            mm=start.strftime("%m"),
            dd=start.strftime("%d"),
            hh=start.strftime("%H"),
        ) + "/"
