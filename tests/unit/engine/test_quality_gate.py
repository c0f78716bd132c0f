"""The quality gate: labelled pairs for every reason, clean rephrasings that must pass,
preamble stripping, and the command's table contract and RESULT line."""

from __future__ import annotations

import json
import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from synthfactory.quality.clean import clean_text
from synthfactory.quality.gate import Row, assess, counts
from synthfactory.quality.reasons import REASONS
from synthfactory.quality_bounds import Bounds, bounds_from
from tests.support.quality_texts import (
    CODE_COMMENTED,
    CODE_SOURCE,
    CODE_TUTORIAL,
    DISTILL,
    KNOWLEDGE_LIST,
    MATH_CHANGED,
    MATH_SOLUTION,
    MATH_SOURCE,
    MATH_TEXTBOOK,
    REWRITE,
    SOURCE,
    SUMMARY,
    WEB_SOURCE,
)

QA = ("Question: What does the cmd module offer? Answer: A small framework for building "
      "interpreters that take one command per line. Question: Where is it useful? Answer: "
      "In test harnesses, admin tools and prototypes that later get a richer front end.")
LONG_SOURCE = " ".join([SOURCE] * 6)

# (source, output, finish_reason, template) -> the one reason expected
LABELLED = {
    "empty": (SOURCE, "Sure! Here is the rewritten text:", "stop", "encyclopedic"),
    "truncated": (SOURCE, REWRITE, "length", "encyclopedic"),
    "refusal": (SOURCE, "I'm sorry, but I cannot rewrite this text as it may be copyrighted "
                        "and I do not want to cause any harm to its authors.",
                "stop", "encyclopedic"),
    "repetition": (SOURCE, "the framework helps the framework helps the framework helps the "
                           "framework helps the framework helps the framework helps the "
                           "framework helps", "stop", "encyclopedic"),
    "copy_of_source": (SOURCE, SOURCE, "stop", "encyclopedic"),
    "too_short": (SOURCE, "A framework for interpreters.", "stop", "encyclopedic"),
    "too_long": (SOURCE, REWRITE, "stop", "summary"),  # a summary as long as its source
    "language": (SOURCE, "Dieses Modul bietet ein einfaches Gerüst zum Schreiben "
                         "zeilenorientierter Befehlsinterpreter, die oft für Testumgebungen, "
                         "Verwaltungswerkzeuge und Prototypen nützlich sind.",
                 "stop", "encyclopedic"),
    # the checks a template declares (more pairs: test_quality_domain.py)
    "code_broken": (CODE_SOURCE, CODE_TUTORIAL.replace("merged.update(override)\n",
                                                       "merged.update(override\n"),
                    "stop", "code_tutorial"),  # the kept block no longer parses
    "numbers_lost": (MATH_SOURCE, MATH_CHANGED, "stop", "math_solution"),  # 2.5 h became 3
    "wrong_format": (SOURCE, REWRITE, "stop", "qa"),  # prose, not Question:/Answer: pairs
    # grounding (ADR 0148; the labelled rows of every kind: test_grounding.py)
    "ungrounded": (WEB_SOURCE, DISTILL + "\n\nVisitors often say the view from the top is "
                   "worth the long queue at the lifts. Many of them also buy small souvenirs "
                   "and postcards before they walk back along the river.", "stop",
                   "encyclopedic"),  # a paragraph the source never says
    "content_lost": (WEB_SOURCE, "Finished in 1889, the Eiffel Tower first served as the "
                     "entrance arch of the World's Fair held in Paris. It rises 330 metres and "
                     "weighs roughly 10,100 tonnes.", "stop", "encyclopedic"),  # stops halfway
    "invented": (WEB_SOURCE, DISTILL.replace("1889", "1887"), "stop",
                 "encyclopedic"),  # a changed date
    "repeated_block": (WEB_SOURCE, DISTILL + " " + DISTILL.split(". ")[0] + ".", "stop",
                       "encyclopedic"),  # a sentence written out twice
}
CLEAN = [
    (SOURCE, REWRITE, "stop", "encyclopedic"),
    (SOURCE, QA, "stop", "qa"),
    (SOURCE, SUMMARY, "stop", "summary"),
    (LONG_SOURCE, "A summary: the cmd module builds line-oriented interpreters for harnesses, "
                  "tools and prototypes.", "stop", "summary"),
    # a clean output of each template that declares a check
    (CODE_SOURCE, CODE_TUTORIAL, "stop", "code_tutorial"),
    (CODE_SOURCE, CODE_COMMENTED, "stop", "code_commented"),
    (MATH_SOURCE, MATH_SOLUTION, "stop", "math_solution"),
    (MATH_SOURCE, MATH_TEXTBOOK, "stop", "math_textbook"),
    (WEB_SOURCE, DISTILL, "stop", "distill"),
    (WEB_SOURCE, KNOWLEDGE_LIST, "stop", "knowledge_list"),
]


def templates_bounds(template: str | None) -> Bounds:
    from synthfactory.stitch.templates import load_template

    return bounds_from(load_template(template).quality, template) if template else Bounds()


def test_every_reason_has_a_labelled_pair():
    # contaminated needs a benchmark index: its labelled rows are test_decontaminate.py's
    assert set(LABELLED) | {"duplicate", "contaminated"} == set(REASONS)


@pytest.mark.parametrize("reason", sorted(LABELLED))
def test_labelled_pair_is_rejected_for_its_reason(reason):
    (verdict,) = assess([Row(*LABELLED[reason])], templates_bounds)
    assert not verdict.usable
    assert verdict.reasons == [reason]


@pytest.mark.parametrize("pair", CLEAN, ids=[c[3] + str(i) for i, c in enumerate(CLEAN)])
def test_clean_rephrasings_pass(pair):
    (verdict,) = assess([Row(*pair)], templates_bounds)
    assert verdict.reasons == []
    assert verdict.usable


def test_duplicates_keep_the_first_of_a_cluster():
    near = REWRITE.replace("arrives.", "arrives!")  # near-identical, not byte-identical
    other = QA
    rows = [Row(SOURCE, REWRITE, "stop", "encyclopedic"),
            Row(SOURCE, near, "stop", "encyclopedic"),
            Row(SOURCE, other, "stop", "qa"),
            Row(SOURCE, REWRITE.upper(), "stop", "encyclopedic")]
    verdicts = assess(rows, templates_bounds)
    assert [v.reasons for v in verdicts] == [[], ["duplicate"], [], ["duplicate"]]


def test_a_rejected_row_does_not_count_as_the_kept_copy():
    rows = [Row(SOURCE, REWRITE, "length", "encyclopedic"),  # truncated: not kept
            Row(SOURCE, REWRITE, "stop", "encyclopedic")]
    assert [v.reasons for v in assess(rows, templates_bounds)] == [["truncated"], []]


@pytest.mark.parametrize("raw,clean", [
    ("Sure! Here is the rewritten text:\n\nThe cat sat.", "The cat sat."),
    ("Certainly! Here's a summary of the passage: The cat sat.", "The cat sat."),
    ("Here are the questions and answers:\nQ: Who sat?", "Q: Who sat?"),
    ("The cat sat. I hope this helps!", "The cat sat."),
    ("The cat sat.\n\nLet me know if you would like another version.", "The cat sat."),
    # the document's own words are kept
    ("Here is how a parser works: it reads tokens.", "Here is how a parser works: it reads "
                                                     "tokens."),
    ("The module helps. If you need more, read the manual.",
     "The module helps. If you need more, read the manual."),
])
def test_preamble_and_offer_are_stripped_and_nothing_else(raw, clean):
    assert clean_text(raw) == clean


def test_verdict_carries_the_clean_text():
    (verdict,) = assess([Row(SOURCE, "Sure! Here is the rewritten text:\n" + REWRITE +
                             "\n\nLet me know if you need any more changes.", "stop",
                             "encyclopedic")], templates_bounds)
    assert verdict.usable and verdict.clean_text == REWRITE


def test_counts_list_every_reason():
    verdicts = assess([Row(*LABELLED["too_short"]), Row(*CLEAN[0])], templates_bounds)
    assert counts(verdicts) == {**dict.fromkeys(REASONS, 0), "too_short": 1}


@pytest.mark.parametrize("declared,message", [
    ({"min_ratio": 2, "max_ratio": 1}, "min_ratio < max_ratio"),
    ({"max_copy": 1.5}, "max_copy must be in (0, 1]"),
    ({"min_ratios": 0.1}, "unknown quality key(s) ['min_ratios']"),
    ({"max_ratio": "2"}, "max_ratio must be a number"),
])
def test_bad_template_bounds_name_the_problem(declared, message):
    from synthfactory.errors import SynthfactoryError

    with pytest.raises(SynthfactoryError, match=None) as info:
        bounds_from(declared, "template x.json")
    assert message in str(info.value) and "template x.json" in str(info.value)


def _table(tmp_path, **columns) -> str:
    path = tmp_path / "in.parquet"
    pq.write_table(pa.table(columns), path)
    return f"file://{path}"


def _quality(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "synthfactory.cli", "quality", *args],
                          capture_output=True, text=True, timeout=120)


def test_command_writes_verdict_columns_and_prints_result(tmp_path):
    pairs = [LABELLED["copy_of_source"], CLEAN[0], LABELLED["too_short"], CLEAN[0]]
    url = _table(tmp_path, id=[f"d{i}" for i in range(4)],
                 source_text=[p[0] for p in pairs], output_text=[p[1] for p in pairs],
                 finish_reason=[p[2] for p in pairs], template=[p[3] for p in pairs])
    out = tmp_path / "out.parquet"
    result = _quality("--in", url, "--out", f"file://{out}")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.strip().splitlines()
    assert lines[-2] == ("RESULT quality rows=4 usable=1 empty=0 truncated=0 refusal=0 "
                         "repetition=0 copy_of_source=1 too_short=1 too_long=0 language=0 "
                         "code_broken=0 numbers_lost=0 wrong_format=0 duplicate=1 "
                         "contaminated=0 ungrounded=0 content_lost=0 invented=0 "
                         "repeated_block=0")
    assert json.loads(lines[-1])["rejected"] == 3
    table = pq.read_table(out)
    assert table.column_names == ["id", "source_text", "output_text", "finish_reason",
                                  "template", "usable", "reasons", "clean_text", "qa_pairs",
                                  "grounded", "drift", "content_kept", "end_kept",
                                  "invented_terms", "repeated_sentences", "source_words",
                                  "output_words"]
    # every row scored: the copy is all source, the rewrite in other words half of it
    assert table.column("grounded").to_pylist()[0] == 1.0
    assert 0.3 < table.column("grounded").to_pylist()[1] < 1.0
    assert table.column("source_words").to_pylist()[1] == len(SOURCE.replace("-", " ").split())
    assert table.column("usable").to_pylist() == [False, True, False, False]
    assert table.column("reasons").to_pylist() == [["copy_of_source"], [], ["too_short"],
                                                   ["duplicate"]]


def test_command_override_beats_the_template(tmp_path):
    pair = LABELLED["too_short"]
    url = _table(tmp_path, id=["a"], source_text=[pair[0]], output_text=[pair[1]],
                 finish_reason=["stop"], template=["encyclopedic"])
    result = _quality("--in", url, "--out", f"file://{tmp_path}/o.parquet", "--min-ratio", "0.1")
    # no longer too_short: what it lost of its source is now named instead
    assert "RESULT quality rows=1 usable=0 " in result.stdout, result.stderr
    assert " too_short=0 " in result.stdout and " content_lost=1 " in result.stdout
    result = _quality("--in", url, "--out", f"file://{tmp_path}/o.parquet", "--min-ratio", "0.1",
                      "--min-kept", "0.05")
    assert "RESULT quality rows=1 usable=1 " in result.stdout, result.stderr


@pytest.mark.parametrize("columns,message", [
    ({"id": ["a"], "output_text": ["x"], "finish_reason": ["stop"]},
     "missing column 'source_text'"),
    ({"id": ["a"], "source_text": ["x"], "output_text": [3], "finish_reason": ["stop"]},
     "column 'output_text' must be string, got int64"),
    ({"id": ["a"], "source_text": ["x"], "output_text": ["y"], "finish_reason": ["stop"],
      "template": ["no_such_style"]}, "template 'no_such_style': not found"),
])
def test_bad_table_gets_one_line_naming_the_column(tmp_path, columns, message):
    result = _quality("--in", _table(tmp_path, **columns), "--out", f"file://{tmp_path}/o.parquet")
    assert result.returncode == 3
    errors = [line for line in result.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1 and message in errors[0], result.stderr
    assert "Traceback" not in result.stderr
