"""One verdict per row: ``usable``, ``reasons`` (in vocabulary order), ``clean_text`` and
``qa_pairs``.

The checks run on ``clean_text`` (the output without a chat preamble or closing
offer); the duplicate check runs last, over the rows every other check let through, so
of a cluster of identical outputs exactly one is kept. The checks a template declares
(keep_code, keep_numbers, output_shape: quality/domain.py) run where it declares them;
``assess(..., domain_checks=False)`` leaves them out (the benchmark's baseline only).
The grounding checks (quality/grounding.py: ungrounded, content_lost, invented,
repeated_block) judge what the output says against its source; their scores go with
every verdict, so a team can pick its own threshold later without gating again.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from synthfactory.quality import checks, dedup, domain, grounding
from synthfactory.quality.clean import clean_text
from synthfactory.quality.reasons import REASONS
from synthfactory.quality_bounds import Bounds

if TYPE_CHECKING:
    from synthfactory.quality.decontaminate import BenchmarkIndex


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
    # the parsed pairs of a template whose output_shape is qa_pairs ([] when the output
    # does not parse into them: wrong_format); None for every other template
    qa_pairs: list[dict[str, str]] | None = None
    # the benchmarks whose n-grams the output or its source holds (reason contaminated)
    contaminated_by: list[str] = field(default_factory=list)
    # the grounding scores (None: not scored: empty, a refusal, another language)
    grounding: grounding.Scores | None = None

    @property
    def usable(self) -> bool:
        return not self.reasons


# Reasons that say the output is no rephrasing in the source's language at all: its
# grounding is not scored (a refusal's words are not the source's, and word overlap
# across languages means nothing)
NOT_A_REPHRASING = frozenset({"empty", "refusal", "language"})


def _grounding(row: Row, text: str, bounds: Bounds, found: set[str]
               ) -> grounding.Scores | None:
    """The output's grounding scores, and its grounding reasons added to ``found``. Not
    scored for an output that is no rephrasing (NOT_A_REPHRASING), for a template that
    names another language for its outputs, nor for a source in another language than
    English (the stems, the word weights and the names are English ones).
    content_lost is not added to a row already too_short or in a loop (repetition):
    those name the same fault first."""
    if (found & NOT_A_REPHRASING or bounds.target_language is not None
            or not grounding.english(row.source_text or "", bounds.language_min_words,
                                     bounds.language_confidence)):
        return None
    scores = grounding.score(row.source_text or "", text,
                             numbers=bounds.keep_numbers is None)
    if scores.grounded < bounds.min_grounded or scores.drifts():
        found.add("ungrounded")
    lost = scores.kept < bounds.min_kept or scores.end_kept < grounding.END_KEPT
    if lost and not found & {"too_short", "repetition"}:
        found.add("content_lost")
    if len(scores.invented) > bounds.max_invented or scores.changed:
        found.add("invented")
    if scores.repeated:
        found.add("repeated_block")
    return scores


def _row_reasons(row: Row, text: str, out_words: list[str], bounds: Bounds,
                 domain_checks: bool = True) -> set[str]:
    found: set[str] = set()
    if not text:
        return {"empty"}
    if row.finish_reason == "length":
        found.add("truncated")
    if checks.REFUSAL.match(text):
        found.add("refusal")
    if checks.repetition_ratio(text) > bounds.max_repetition:
        found.add("repetition")
    source = row.source_text or ""
    src_words = checks.words(source)
    # a template that keeps code is judged for copying and language by its prose: the
    # code it must keep is not copying, nor a language
    prose = domain_checks and bounds.keep_code
    src_prose, out_prose = ((domain.without_code(source), domain.without_code(text)) if prose
                            else (source, text))
    src_prose_words = checks.words(src_prose) if prose else src_words
    out_prose_words = checks.words(out_prose) if prose else out_words
    if checks.copy_overlap(src_prose_words, out_prose_words, bounds.copy_ngram) > bounds.max_copy:
        found.add("copy_of_source")
    ratio = checks.length_ratio(src_words, out_words)
    if ratio is not None and ratio < bounds.min_ratio:
        found.add("too_short")
    if ratio is not None and ratio > bounds.max_ratio:
        found.add("too_long")
    if bounds.target_language is not None:  # the template names the output's language
        if len(out_prose_words) >= bounds.language_min_words:
            out_lang, out_p = checks.language(out_prose)
            if out_lang != bounds.target_language and out_p >= bounds.language_confidence:
                found.add("language")
    elif min(len(src_prose_words), len(out_prose_words)) >= bounds.language_min_words:
        src_lang, src_p = checks.language(src_prose)
        out_lang, out_p = checks.language(out_prose)
        if (src_lang != out_lang and min(src_p, out_p) >= bounds.language_confidence):
            found.add("language")
    if domain_checks:
        if bounds.keep_code and domain.code_broken(source, text):
            found.add("code_broken")
        if bounds.keep_numbers is not None and domain.numbers_lost(source, text,
                                                                   bounds.keep_numbers):
            found.add("numbers_lost")
        if bounds.output_shape == "list" and not domain.is_list(text):
            found.add("wrong_format")
    return found


def _qa_pairs(text: str, bounds: Bounds, domain_checks: bool) -> list[dict[str, str]] | None:
    if not domain_checks or bounds.output_shape != "qa_pairs":
        return None
    return (domain.qa_pairs(text) if text else None) or []


def _contaminated_by(rows: Sequence[Row], texts: Sequence[str],
                     benchmarks: BenchmarkIndex | None) -> list[list[str]]:
    """Per row, the benchmarks its output or its source shares an n-gram with (a source's
    matches looked up once: its templates' rows share it)."""
    if benchmarks is None:
        return [[] for _ in rows]
    by_source: dict[str, list[str]] = {}
    out = []
    for row, text in zip(rows, texts, strict=True):
        source = row.source_text or ""
        if source not in by_source:
            by_source[source] = benchmarks.matches(source)
        found = set(by_source[source]) | set(benchmarks.matches(text))
        out.append(sorted(found))
    return out


def assess(rows: Sequence[Row], bounds_for: Callable[[str | None], Bounds],
           duplicate_jaccard: float = dedup.JACCARD,
           domain_checks: bool = True,
           benchmarks: BenchmarkIndex | None = None,
           grounding_checks: bool = True) -> list[Verdict]:
    """``domain_checks=False``: without the checks templates declare (code_broken,
    numbers_lost, wrong_format, and judging copying and language by prose alone); only
    benchmarks/quality.py's baseline passes it. ``benchmarks``: the decontamination
    index (quality/decontaminate.py); None: no row is checked against one.
    ``grounding_checks=False``: without the grounding checks (benchmarks/grounding.py's
    baseline only)."""
    texts = [clean_text(row.output_text or "") for row in rows]
    out_words = [checks.words(text) for text in texts]
    bounds = [bounds_for(row.template) for row in rows]
    found = [_row_reasons(row, text, tokens, b, domain_checks)
             for row, text, tokens, b in zip(rows, texts, out_words, bounds, strict=True)]
    scores = [_grounding(row, text, b, reasons) if grounding_checks and text else None
              for row, text, b, reasons in zip(rows, texts, bounds, found, strict=True)]
    pairs = [_qa_pairs(text, b, domain_checks) for text, b in zip(texts, bounds, strict=True)]
    for reasons, parsed, b in zip(found, pairs, bounds, strict=True):
        if parsed == [] and b.output_shape == "qa_pairs" and "empty" not in reasons:
            reasons.add("wrong_format")
    contaminated = _contaminated_by(rows, texts, benchmarks)
    for reasons, names in zip(found, contaminated, strict=True):
        if names:
            reasons.add("contaminated")
    duplicate = dedup.duplicates(out_words, duplicate_jaccard,
                                 candidates=[not reasons for reasons in found])
    for reasons, is_duplicate in zip(found, duplicate, strict=True):
        if is_duplicate:
            reasons.add("duplicate")
    return [Verdict(text, [r for r in REASONS if r in reasons], parsed, names, score)
            for text, reasons, parsed, names, score in zip(texts, found, pairs, contaminated,
                                                           scores, strict=True)]


def counts(verdicts: Sequence[Verdict]) -> dict[str, int]:
    """Rows per reason, every reason of the vocabulary listed (a row may have several)."""
    totals = dict.fromkeys(REASONS, 0)
    for verdict in verdicts:
        for reason in verdict.reasons:
            totals[reason] += 1
    return totals


class Gate:
    """Each template's bounds and the source of each row, for a run: the templates are
    the run's copies (``run_templates``, stitch writes them) found before the shipped
    ones, so a run stitched from a folder of one's own is gated by its own. Loaded once
    per template, for validate's whole shard and for the rephrase worker's rows one at
    a time alike."""

    def __init__(self, max_repetition: float | None = None, run_templates: str | None = None,
                 benchmarks: BenchmarkIndex | None = None):
        self.max_repetition = max_repetition
        self.run_templates = run_templates
        self.benchmarks = benchmarks
        self._templates: dict[str, object] = {}
        self._bounds: dict[str, Bounds] = {}
        self.default = Bounds().override(max_repetition=max_repetition)

    def _load(self, template: str) -> None:
        from synthfactory.quality_bounds import bounds_from
        from synthfactory.stitch.templates import load_template, load_used

        tpl = (load_used(template, self.run_templates) if self.run_templates
               else load_template(template))
        self._templates[template] = tpl
        self._bounds[template] = bounds_from(tpl.quality, f"template {template!r}").override(
            max_repetition=self.max_repetition)

    def row(self, user: str, output: str | None, finish: str | None,
            template: str | None) -> Row:
        """The gate's row of a prompt row's user message and an output of it."""
        from synthfactory.quality.source import source_of

        if template and template not in self._templates:
            self._load(template)
        source = source_of(user, self._templates[template]) if template else user
        return Row(source, output or "", finish, template)

    def bounds(self, template: str | None) -> Bounds:
        return self._bounds.get(template, self.default) if template else self.default

    def assess(self, rows: Sequence[Row]) -> list[Verdict]:
        return assess(rows, self.bounds, benchmarks=self.benchmarks)


def verdict_columns(rows: Sequence[tuple[str, str, str | None, str | None]],
                    max_repetition: float | None = None,
                    run_templates: str | None = None,
                    benchmarks: BenchmarkIndex | None = None) -> dict[str, list]:
    """(user message, output, finish_reason, template id) per row -> the verdict columns
    ``usable``, ``reasons``, ``clean_text``, ``qa_pairs`` and ``contaminated_by``, each row
    against its template's bounds and the source its user message holds (the pipeline's
    validate step; the templates as ``Gate`` finds them)."""
    gate = Gate(max_repetition, run_templates, benchmarks)
    gated = [gate.row(*row) for row in rows]
    verdicts = gate.assess(gated)
    return {"usable": [v.usable for v in verdicts], "reasons": [v.reasons for v in verdicts],
            "clean_text": [v.clean_text for v in verdicts],
            "qa_pairs": [v.qa_pairs for v in verdicts],
            "contaminated_by": [v.contaminated_by for v in verdicts],
            **score_columns(gated, verdicts)}


def score_columns(rows: Sequence[Row], verdicts: Sequence[Verdict]) -> dict[str, list]:
    """Each verdict's grounding scores as columns (None where not scored: an empty
    output, a refusal, another language), and both texts' word counts (the length ratio
    a report's medians are taken of)."""
    columns: dict[str, list] = {name: [] for name in SCORE_COLUMNS}
    for row, verdict in zip(rows, verdicts, strict=True):
        scores = verdict.grounding.as_columns() if verdict.grounding else {}
        for name in grounding.SCORE_NAMES:
            columns[name].append(scores.get(name))
        columns["source_words"].append(len(checks.words(row.source_text or "")))
        columns["output_words"].append(len(checks.words(verdict.clean_text)))
    return columns


SCORE_COLUMNS = (*grounding.SCORE_NAMES, "source_words", "output_words")


# Made up, in English, with a name, a number and two sentences each: enough for every
# check the gate runs on a row of prose to load what it loads on first use.
_WARM_SOURCE = ("The Rhine flows for 1,230 kilometres from the Swiss Alps to the North Sea. "
                "Basel, Cologne and Rotterdam stand on its banks.")
_WARM_OUTPUT = ("From the Swiss Alps the Rhine runs 1,230 kilometres to the North Sea. "
                "Its banks hold Basel, Cologne and Rotterdam.")


def warm() -> None:
    """Load what the gate loads on first use (py3langid's model, the stemmer, wordfreq's
    lists, the sentence splitter, pandas under them) by judging one made-up row: a Ray
    replica started during a run does this before it says it is ready, so its first
    shard is judged as fast as its tenth (on two loaded cores the first shard took
    21.8 s against 3.7 s for the next)."""
    gate = Gate()
    gate.assess([gate.row(_WARM_SOURCE, _WARM_OUTPUT, "stop", None)])
