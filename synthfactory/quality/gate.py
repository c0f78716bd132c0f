"""One verdict per row: ``usable``, ``reasons`` (in vocabulary order) and ``clean_text``.

The checks run on ``clean_text`` (the output without a chat preamble or closing
offer); the duplicate check runs last, over the rows every other check let through, so
of a cluster of identical outputs exactly one is kept.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from synthfactory.quality import checks, dedup
from synthfactory.quality.bounds import Bounds
from synthfactory.quality.clean import clean_text
from synthfactory.quality.reasons import REASONS


@dataclass(frozen=True)
class Row:
    source_text: str
    output_text: str
    finish_reason: str | None = None
    template: str | None = None


@dataclass
class Verdict:
    clean_text: str
    reasons: list[str] = field(default_factory=list)

    @property
    def usable(self) -> bool:
        return not self.reasons


def _row_reasons(row: Row, text: str, out_words: list[str], bounds: Bounds) -> set[str]:
    found: set[str] = set()
    if not text:
        return {"empty"}
    if row.finish_reason == "length":
        found.add("truncated")
    if checks.REFUSAL.match(text):
        found.add("refusal")
    if checks.repetition_ratio(text) > bounds.max_repetition:
        found.add("repetition")
    src_words = checks.words(row.source_text or "")
    if checks.copy_overlap(src_words, out_words, bounds.copy_ngram) > bounds.max_copy:
        found.add("copy_of_source")
    ratio = checks.length_ratio(src_words, out_words)
    if ratio is not None and ratio < bounds.min_ratio:
        found.add("too_short")
    if ratio is not None and ratio > bounds.max_ratio:
        found.add("too_long")
    if min(len(src_words), len(out_words)) >= bounds.language_min_words:
        src_lang, src_p = checks.language(row.source_text)
        out_lang, out_p = checks.language(text)
        if (src_lang != out_lang and min(src_p, out_p) >= bounds.language_confidence):
            found.add("language")
    return found


def assess(rows: Sequence[Row], bounds_for: Callable[[str | None], Bounds],
           duplicate_jaccard: float = dedup.JACCARD) -> list[Verdict]:
    texts = [clean_text(row.output_text or "") for row in rows]
    out_words = [checks.words(text) for text in texts]
    found = [_row_reasons(row, text, tokens, bounds_for(row.template))
             for row, text, tokens in zip(rows, texts, out_words, strict=True)]
    duplicate = dedup.duplicates(out_words, duplicate_jaccard,
                                 candidates=[not reasons for reasons in found])
    for reasons, is_duplicate in zip(found, duplicate, strict=True):
        if is_duplicate:
            reasons.add("duplicate")
    return [Verdict(text, [r for r in REASONS if r in reasons])
            for text, reasons in zip(texts, found, strict=True)]


def counts(verdicts: Sequence[Verdict]) -> dict[str, int]:
    """Rows per reason, every reason of the vocabulary listed (a row may have several)."""
    totals = dict.fromkeys(REASONS, 0)
    for verdict in verdicts:
        for reason in verdict.reasons:
            totals[reason] += 1
    return totals


def verdict_columns(rows: Sequence[tuple[str, str, str | None, str | None]],
                    max_repetition: float | None = None,
                    run_templates: str | None = None) -> dict[str, list]:
    """(user message, output, finish_reason, template id) per row -> the verdict columns
    ``usable``, ``reasons``, ``clean_text``, each row against its template's bounds and
    the source its user message holds (the pipeline's validate step). ``run_templates``:
    the run's copies of its templates (stitch writes them), found there before the
    shipped ones, so a run stitched from a folder of one's own is gated by its own."""
    from synthfactory.quality.bounds import bounds_from
    from synthfactory.quality.source import source_of
    from synthfactory.stitch.templates import load_template, load_used

    ids = {row[3] for row in rows if row[3]}
    templates = {t: load_used(t, run_templates) if run_templates else load_template(t)
                 for t in ids}
    bounds = {t: bounds_from(tpl.quality, f"template {t!r}").override(
        max_repetition=max_repetition) for t, tpl in templates.items()}
    default = Bounds().override(max_repetition=max_repetition)
    gated = [Row(source_of(user, templates[t]) if t in templates else user, output or "",
                 finish, t) for user, output, finish, t in rows]
    verdicts = assess(gated, lambda t: bounds.get(t, default))
    return {"usable": [v.usable for v in verdicts], "reasons": [v.reasons for v in verdicts],
            "clean_text": [v.clean_text for v in verdicts]}
