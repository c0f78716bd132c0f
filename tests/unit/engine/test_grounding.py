"""The gate's grounding checks (docs/adr/0148) on the labelled rows of
tests/support/grounding_rows.py: every faithful rephrasing (reworded ones included) is
kept, the unfaithful kinds are rejected for the reason that names them, and the trim
cuts a run-on where it stops being grounded."""

from __future__ import annotations

from collections import Counter
from functools import cache

import pytest

from synthfactory.quality import grounding
from synthfactory.quality.gate import Row, assess
from synthfactory.quality.reasons import GROUNDING, REASONS, RETRYABLE
from synthfactory.quality.repair import TRIMMED, trim
from synthfactory.quality_bounds import Bounds, bounds_from
from synthfactory.stitch.templates import load_template
from tests.support.grounding_rows import KINDS, ROWS, UNFAITHFUL


@cache
def bounds_for(template: str | None) -> Bounds:
    return bounds_from(load_template(template).quality, template) if template else Bounds()


@cache
def verdicts() -> dict[str, list[str]]:
    """Each labelled row's reasons, gated alone (the duplicate check is table-wide)."""
    return {r.name: assess([Row(r.source, r.output, "stop", r.template)], bounds_for)[0].reasons
            for r in ROWS}


def test_the_labelled_set_is_the_one_the_issue_asks_for():
    assert len(ROWS) >= 60
    assert len({r.name for r in ROWS}) == len(ROWS)
    assert {r.register for r in ROWS} >= {"web", "docs", "code", "math"}
    kinds = Counter(r.kind for r in ROWS)
    assert set(kinds) == set(KINDS) and min(kinds[k] for k in UNFAITHFUL) >= 5


@pytest.mark.parametrize("row", [r for r in ROWS if r.faithful], ids=lambda r: r.name)
def test_every_faithful_rephrasing_is_kept(row):
    assert verdicts()[row.name] == []


def _caught(kinds: tuple[str, ...], reason: str | None = None) -> tuple[int, int]:
    rows = [r for r in ROWS if r.kind in kinds]
    hit = [r for r in rows if (reason in verdicts()[r.name] if reason
                               else verdicts()[r.name])]
    return len(hit), len(rows)


def test_precision_and_recall_over_the_labelled_rows():
    kept = [r for r in ROWS if not verdicts()[r.name]]
    precision = sum(r.faithful for r in kept) / len(kept)
    caught, unfaithful = _caught(UNFAITHFUL)
    assert precision >= 0.9
    assert caught / unfaithful >= 0.8


@pytest.mark.parametrize("kind,reason,share", [
    ("other_document", "ungrounded", 1.0),  # almost nothing of it is in the source
    ("other_document", None, 1.0),  # content_lost too, where no domain check came first
    ("added_paragraph", "ungrounded", 0.7),  # a tail whose support drops
    ("added_paragraph", None, 0.8),  # the rest name people and versions: invented
    ("first_half", "content_lost", 0.8),  # the source's last third is gone
    ("doubled_paragraph", "repeated_block", 1.0),
])
def test_each_unfaithful_kind_is_rejected_for_the_reason_that_names_it(kind, reason, share):
    caught, rows = _caught((kind,), reason)
    assert caught >= share * rows, (kind, reason, caught, rows)


@pytest.mark.parametrize("reason", GROUNDING)
def test_no_grounding_reason_is_given_to_a_faithful_row(reason):
    assert not [r.name for r in ROWS if r.faithful and reason in verdicts()[r.name]]


def test_a_changed_number_is_invented():
    caught = [r.name for r in ROWS if r.kind == "changed_facts"
              and "invented" in verdicts()[r.name]]
    assert caught  # the changed dates and counts; a swapped relation is the judge's


def test_the_grounding_reasons_are_in_the_vocabulary_and_retried():
    assert list(REASONS)[-len(GROUNDING):] == list(GROUNDING)  # appended: RESULT columns
    assert set(GROUNDING) <= set(RETRYABLE)


def test_scores_go_with_every_verdict_of_a_rephrasing():
    row = next(r for r in ROWS if r.kind == "other_document")
    (verdict,) = assess([Row(row.source, row.output, "stop", row.template)], bounds_for)
    scores = verdict.grounding.as_columns()
    assert set(scores) == {"grounded", "drift", "content_kept", "end_kept", "invented_terms",
                           "repeated_sentences"}
    assert scores["grounded"] < 0.2 and scores["content_kept"] < 0.2
    # a refusal is no rephrasing: not scored
    (refusal,) = assess([Row(row.source, "I'm sorry, but I cannot help with that request.",
                             "stop", row.template)], bounds_for)
    assert refusal.grounding is None and refusal.reasons == ["refusal"]


def test_a_sentence_written_twice_is_found_word_for_word_and_nearly():
    text = ("The tower was finished in 1889 for the great fair in Paris. It is 330 metres "
            "tall. The tower was finished in 1889 for the great fair in Paris. It stands 330 "
            "metres high above the river today. It stands 330 metres high above the river, "
            "today!")
    found = grounding.repeats(grounding.sentences(text))
    assert len(found) == 2  # the exact copy and the near one (a comma apart)


# -- the trim ------------------------------------------------------------------------

def _pair(kind: str):
    """A labelled faithful output and the same source's unfaithful one of ``kind``."""
    for bad in ROWS:
        if bad.kind != kind:
            continue
        good = next((r for r in ROWS if r.source == bad.source and r.faithful
                     and r.template == bad.template and bad.output.startswith(r.output[:80])),
                    None)
        if good is not None:
            return good, bad
    pytest.skip(f"no faithful row shares its beginning with a {kind} row")


def _passes(row):
    def passes(candidate: str) -> bool:
        return not assess([Row(row.source, candidate, TRIMMED, row.template)],
                          bounds_for)[0].reasons
    return passes


@pytest.mark.parametrize("kind", ["added_paragraph", "doubled_paragraph"])
def test_the_trim_cuts_a_run_on_where_it_stops_being_grounded(kind):
    _, bad = _pair(kind)
    (verdict,) = assess([Row(bad.source, bad.output, "length", bad.template)], bounds_for)
    cut = trim(bad.output, verdict.reasons, "length", _passes(bad),
               allowed=grounding.cut_filter(bad.source, bad.output))
    assert cut is not None, verdict.reasons
    assert len(cut) < len(bad.output)
    # what is kept passes every check, the grounding ones included
    assert assess([Row(bad.source, cut, TRIMMED, bad.template)], bounds_for)[0].reasons == []
    after = grounding.score(bad.source, cut)
    assert after.repeated == 0 and not after.drifts()


def test_without_the_grounded_cut_the_trim_would_keep_the_drift():
    """The bound the trim used before: the longest prefix passing the form checks keeps
    an added paragraph whole (it is within every form bound)."""
    _, bad = _pair("added_paragraph")
    def form_only(candidate: str) -> bool:
        return not assess([Row(bad.source, candidate, TRIMMED, bad.template)], bounds_for,
                          grounding_checks=False)[0].reasons
    kept = trim(bad.output, ["truncated"], "length", form_only)
    assert kept is not None and grounding.score(bad.source, kept).drifts()
