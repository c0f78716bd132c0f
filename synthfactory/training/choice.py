"""A choice read from a flag or a spec file, as a StrEnum: an unknown value is one line
naming the value and the choices (exit 3), never a ValueError's traceback."""

from __future__ import annotations

from enum import StrEnum

from synthfactory.errors import SynthfactoryError


class Choice(StrEnum):
    """Subclass with ``what=`` naming the choice in the error: ``class Packing(Choice,
    what="packing")``."""

    def __init_subclass__(cls, what: str = "", **kwargs):
        super().__init_subclass__(**kwargs)
        cls._what = what

    @classmethod
    def parse(cls, value: str | Choice) -> Choice:
        try:
            return cls(value)
        except ValueError as exc:
            raise SynthfactoryError(
                f"{cls._what} {value!r}: use one of {[p.value for p in cls]}") from exc
