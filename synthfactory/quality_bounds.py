"""The gate's thresholds: defaults, then what a template file declares under
``"quality"``, then the command line's overrides.

Why each default is what it is (docs/quality.md has the table):
- ``min_ratio`` 0.2 / ``max_ratio`` 4.0 (output words per source word): wide on
  purpose for a template that declares nothing; a template knows its shape better
  (a summary is short by design, a tutorial may be longer than its source).
- ``max_copy`` 0.8 of the output's word 6-grams found in the source: a faithful
  rewrite keeps names and terms, but 6 words in a row again and again is copying.
- ``max_repetition`` 0.5 of word 4-grams repeating an earlier one: the validation
  step's threshold, where degenerate loops sit well above and prose well below.
- ``language_min_words`` 8 and ``language_confidence`` 0.8: language identification
  of a few words is a guess; both texts must be that long and both verdicts that sure.
- The grounding bounds (synthfactory/quality/grounding.py; docs/adr/0148 has the
  labelled rows each was set on): ``min_grounded`` (the share of the output's content
  in sentences its source supports; under it: ``ungrounded``), ``min_kept`` (the share
  of the source's content the output keeps; under it: ``content_lost``; a summary's is
  lower than a tutorial's) and ``max_invented`` (names, identifiers and numbers the
  source does not have; over it, or one in place of one of the source's:
  ``invented``). A sentence repeated (``repeated_block``) has no bound: a faithful
  rephrase never writes one out twice.

A template may also declare what its outputs must keep or look like (the domain
checks, synthfactory/quality/domain.py; none by default, so a template that declares
none is gated as before):
- ``keep_code``: ``true``: every code block of the source that parses must be in the
  output and still parse (``code_broken``);
- ``keep_numbers``: ``true`` or ``{"tolerance": T}``: at most the share T (default 0)
  of the source's numbers and formulae may be missing from the output (``numbers_lost``);
- ``output_shape``: ``"qa_pairs"`` or ``"list"``: the output must parse into it
  (``wrong_format``);
- ``target_language``: an ISO 639-1 code: the output must be in that language, not
  the source's (``language``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields, replace

from synthfactory.errors import SynthfactoryError

SHAPES = ("qa_pairs", "list")
_LANGUAGE_CODE = re.compile(r"[a-z]{2}")


@dataclass(frozen=True)
class Bounds:
    min_ratio: float = 0.2
    max_ratio: float = 4.0
    max_copy: float = 0.8
    copy_ngram: int = 6
    max_repetition: float = 0.5
    language_min_words: int = 8
    language_confidence: float = 0.8
    # grounding (module docstring; docs/adr/0148)
    min_grounded: float = 0.2
    min_kept: float = 0.2
    max_invented: int = 2
    # the domain checks a template declares (module docstring); off by default
    keep_code: bool = False
    keep_numbers: float | None = None  # the tolerance: share of numbers that may go
    output_shape: str | None = None
    target_language: str | None = None

    def override(self, **values) -> Bounds:
        """These bounds with the given values (None: keep), checked."""
        merged = replace(self, **{k: v for k, v in values.items() if v is not None})
        merged.check("overrides")
        return merged

    def check(self, source: str) -> None:
        if not 0 <= self.min_ratio < self.max_ratio:
            raise SynthfactoryError(
                f"{source}: quality bounds need 0 <= min_ratio < max_ratio "
                f"(got {self.min_ratio} and {self.max_ratio})")
        for name in ("max_copy", "max_repetition", "language_confidence"):
            if not 0 < getattr(self, name) <= 1:
                raise SynthfactoryError(f"{source}: quality {name} must be in (0, 1], "
                                        f"got {getattr(self, name)}")
        for name in ("copy_ngram", "language_min_words"):
            if getattr(self, name) < 1:
                raise SynthfactoryError(f"{source}: quality {name} must be >= 1")
        for name in ("min_grounded", "min_kept"):
            if not 0 <= getattr(self, name) <= 1:
                raise SynthfactoryError(f"{source}: quality {name} must be in [0, 1], "
                                        f"got {getattr(self, name)}")
        if self.max_invented < 0:
            raise SynthfactoryError(f"{source}: quality max_invented must be >= 0")


# the numeric bounds (what the command line overrides), then the declared checks
CHECKS = ("keep_code", "keep_numbers", "output_shape", "target_language")
KEYS = {f.name: f.type for f in fields(Bounds) if f.name not in CHECKS}


def _check_value(key: str, value: object, source: str) -> object:
    """A declared check's JSON value as the Bounds field holds it."""
    if key == "keep_code":
        if not isinstance(value, bool):
            raise SynthfactoryError(f"{source}: quality keep_code must be true or false, "
                                    f"got {value!r}")
        return value
    if key == "keep_numbers":
        if value is False:
            return None
        if value is True:
            return 0.0
        tolerance = value.get("tolerance", 0.0) if isinstance(value, dict) else None
        if (not isinstance(value, dict) or set(value) - {"tolerance"}
                or isinstance(tolerance, bool) or not isinstance(tolerance, (int, float))
                or not 0 <= tolerance < 1):
            raise SynthfactoryError(f"{source}: quality keep_numbers must be true, false or "
                                    f'{{"tolerance": T}} with 0 <= T < 1, got {value!r}')
        return float(tolerance)
    if key == "output_shape":
        if value not in SHAPES:
            raise SynthfactoryError(f"{source}: quality output_shape must be one of "
                                    f"{list(SHAPES)}, got {value!r}")
        return value
    if not isinstance(value, str) or not _LANGUAGE_CODE.fullmatch(value):
        raise SynthfactoryError(f"{source}: quality target_language must be an ISO 639-1 "
                                f"code such as 'en' or 'de', got {value!r}")
    return value


def bounds_from(declared: object, source: str, base: Bounds | None = None) -> Bounds:
    """``base`` (the defaults) with a template file's ``"quality"`` object applied."""
    base = base or Bounds()
    if declared is None:
        return base
    if not isinstance(declared, dict):
        raise SynthfactoryError(f"{source}: 'quality' must be a JSON object")
    unknown = sorted(set(declared) - set(KEYS) - set(CHECKS))
    if unknown:
        raise SynthfactoryError(f"{source}: unknown quality key(s) {unknown} "
                                f"(known: {sorted([*KEYS, *CHECKS])})")
    values = {}
    for key, value in declared.items():
        if key in CHECKS:
            values[key] = _check_value(key, value, source)
            continue
        wanted = int if KEYS[key] in ("int", int) else (int, float)
        if isinstance(value, bool) or not isinstance(value, wanted):
            raise SynthfactoryError(f"{source}: quality {key} must be a number, got {value!r}")
        values[key] = value
    bounds = replace(base, **values)
    bounds.check(source)
    return bounds
