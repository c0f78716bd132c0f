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
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

from synthfactory.errors import SynthfactoryError


@dataclass(frozen=True)
class Bounds:
    min_ratio: float = 0.2
    max_ratio: float = 4.0
    max_copy: float = 0.8
    copy_ngram: int = 6
    max_repetition: float = 0.5
    language_min_words: int = 8
    language_confidence: float = 0.8

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


KEYS = {f.name: f.type for f in fields(Bounds)}


def bounds_from(declared: object, source: str, base: Bounds | None = None) -> Bounds:
    """``base`` (the defaults) with a template file's ``"quality"`` object applied."""
    base = base or Bounds()
    if declared is None:
        return base
    if not isinstance(declared, dict):
        raise SynthfactoryError(f"{source}: 'quality' must be a JSON object")
    unknown = sorted(set(declared) - set(KEYS))
    if unknown:
        raise SynthfactoryError(f"{source}: unknown quality key(s) {unknown} "
                                f"(known: {sorted(KEYS)})")
    for key, value in declared.items():
        wanted = int if KEYS[key] in ("int", int) else (int, float)
        if isinstance(value, bool) or not isinstance(value, wanted):
            raise SynthfactoryError(f"{source}: quality {key} must be a number, got {value!r}")
    bounds = replace(base, **declared)
    bounds.check(source)
    return bounds
