"""What happens to a document longer than the training context: an explicit choice.

Dropping keeps every surviving document whole but biases the length distribution
toward short documents; truncating keeps the count but piles mass at the context
length. Neither is silent: both are counted and reported in the summary.
"""

from __future__ import annotations

from enum import StrEnum

from synthfactory.errors import SynthfactoryError


class OverlongPolicy(StrEnum):
    DROP = "drop"
    TRUNCATE = "truncate"

    @classmethod
    def parse(cls, value: str | OverlongPolicy) -> OverlongPolicy:
        try:
            return cls(value)
        except ValueError as exc:
            raise SynthfactoryError(
                f"overlong policy {value!r}: use one of {[p.value for p in cls]}"
            ) from exc

