"""Argument types of the steps' flags (synthfactory/contract/steps.py): argparse calls
them on the raw string, so a bad value ends as argparse's own one-line error naming the
flag (exit 2), before any Spark, vLLM or storage work starts. Standard library only."""

from __future__ import annotations

import argparse
import math


def _number(text: str, kind: type) -> int | float:
    try:
        value = kind(text)
    except ValueError:
        what = "an integer" if kind is int else "a number"
        raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
    if kind is float and not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
    return value


def _bounded(kind: type, ok, requirement: str, doc: str):
    """An argparse type: ``kind`` parsed, then ``ok(value)`` or "must be {requirement}"."""

    def parse(text: str) -> int | float:
        value = _number(text, kind)
        if not ok(value):
            shown = value if kind is int else f"{value:g}"
            raise argparse.ArgumentTypeError(f"must be {requirement}, got {shown}")
        return value

    parse.__doc__ = doc
    return parse


# counts, sizes, limits where 0 would mean "never" or a hang
positive_int = _bounded(int, lambda v: v >= 1, "at least 1", "An integer >= 1.")
non_negative_int = _bounded(int, lambda v: v >= 0, "0 or more", "An integer >= 0.")
# timeouts, intervals
positive_float = _bounded(float, lambda v: v > 0, "greater than 0", "A finite number > 0.")
non_negative_float = _bounded(float, lambda v: v >= 0, "0 or more", "A finite number >= 0.")
fraction = _bounded(float, lambda v: 0 <= v <= 1, "between 0 and 1", "A number in [0, 1].")
# top-p: 0 would keep no token
probability = _bounded(float, lambda v: 0 < v <= 1, "in (0, 1]", "A number in (0, 1].")


# One type per concept, whichever step takes it
temperature = _bounded(float, lambda v: v >= 0, "0 or more",
                       "A sampling temperature >= 0 (0 is greedy).")
context_window = _bounded(int, lambda v: v >= 1, "at least 1",
                  "A context window in tokens (max_model_len), >= 1.")
token_count = _bounded(int, lambda v: v >= 1, "at least 1", "A number of tokens >= 1.")


def seed(text: str) -> int:
    """An integer seed."""
    return _number(text, int)


AUTO = "auto"


def budget(text: str) -> int | str:
    """``max_new_tokens``: a ``token_count``, or ``auto`` (each row's budget from its source's
    length and its template's ratio; synthfactory/stitch/budget.py)."""
    if text.strip().lower() == AUTO:
        return AUTO
    return token_count(text)


def yes_no(text: str) -> bool:
    """``true``/``false`` (any case; also yes/no, 1/0): a flag a DAG renders from a Param."""
    value = text.strip().lower()
    if value in ("true", "yes", "1"):
        return True
    if value in ("false", "no", "0"):
        return False
    raise argparse.ArgumentTypeError(f"{text!r} is not true or false")


def number_or_unset(text: str) -> float | None:
    """A finite number, or the empty string for unset (None): ``--min-quality=`` is what
    a DAG renders, as one argv item, for an optional Param left empty."""
    return None if text.strip() == "" else _number(text, float)


def price(text: str) -> float:
    """A price in USD >= 0."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a price in USD >= 0")
    return value


def optional_text(text: str) -> str | None:
    """Text, or the empty string for unset (None): ``--quality-column=`` is what a DAG
    renders for an optional Param left empty."""
    return text or None


def column_names(text: str) -> str | None:
    """Column names, comma-separated, or the empty string for unset (None): each name
    stripped of spaces, each once, joined by commas again (``question, answer`` ->
    ``question,answer``), so plan passes the value on as one ``--flag=VALUE`` item."""
    if text.strip() == "":
        return None
    names = [name.strip() for name in text.split(",")]
    if "" in names:
        raise argparse.ArgumentTypeError(
            f"{text!r}: an empty column name (expected NAME[,NAME...])")
    return ",".join(dict.fromkeys(names))


def routing_switch(text: str) -> str:
    """``on``/``off``; the empty string is ``off``."""
    return text or "off"
