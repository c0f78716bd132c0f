"""Label and field selectors, the subset the API server grammar that clients here send:
``k=v``, ``k==v``, ``k!=v``, ``k``, ``!k`` and ``k in (a,b)`` / ``k notin (a,b)`` for labels;
``path=v``, ``path==v``, ``path!=v`` on dotted paths (``status.phase``,
``involvedObject.name``, ``metadata.name``, ``spec.nodeName``) for fields."""

from __future__ import annotations

import re
from typing import Any

_SET = re.compile(r"^\s*(!?)([^\s!=]+)\s+(in|notin)\s+\(([^)]*)\)\s*$")


def _clauses(selector: str) -> list[str]:
    # split on commas outside parentheses
    clauses, depth, current = [], 0, ""
    for char in selector:
        depth += char == "("
        depth -= char == ")"
        if char == "," and depth == 0:
            clauses.append(current)
            current = ""
        else:
            current += char
    clauses.append(current)
    return [c.strip() for c in clauses if c.strip()]


def _compare(clause: str, lookup: Any) -> bool:
    for op in ("!=", "==", "="):
        if op in clause:
            key, value = (s.strip() for s in clause.split(op, 1))
            actual = lookup(key)
            return (actual != value) if op == "!=" else (actual == value)
    raise ValueError(clause)


def label_matches(selector: str, labels: dict[str, str]) -> bool:
    for clause in _clauses(selector):
        in_set = _SET.match(clause)
        if in_set:
            values = {v.strip() for v in in_set.group(4).split(",")}
            inside = labels.get(in_set.group(2)) in values
            if inside != (in_set.group(3) == "in"):
                return False
        elif clause.startswith("!"):
            if clause[1:] in labels:
                return False
        elif not any(op in clause for op in ("=", "!=")):
            if clause not in labels:
                return False
        elif not _compare(clause, labels.get):
            return False
    return True


def _path(obj: dict, dotted: str) -> str | None:
    value: Any = obj
    for part in dotted.split("."):
        if not isinstance(value, dict):
            return None
        value = value.get(part)
    return None if value is None else str(value)


def field_matches(selector: str, obj: dict) -> bool:
    return all(_compare(c, lambda key: _path(obj, key)) for c in _clauses(selector))
