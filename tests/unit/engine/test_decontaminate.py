"""The gate's decontamination check on made-up benchmark files: a planted verbatim
question, a paraphrase that keeps one 13-gram and a near miss that keeps only a 12-gram;
the source's contamination, several benchmarks, n, and the index's size."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from synthfactory.quality import decontaminate
from synthfactory.quality.gate import Row, assess
from synthfactory.quality_bounds import Bounds

# Made up for these tests, in the shape of a grade-school maths benchmark item.
QUESTION = ("A baker fills twelve trays with nine rolls each, and then gives away a third "
            "of the rolls to the shelter. How many rolls does the baker keep for the "
            "morning market?")
TRIVIA = "Which river carries the most water into the Sea of Okhotsk every single spring season?"
SOURCE = ("Bread has been baked in clay ovens for thousands of years. Early bakers ground "
          "grain between stones and mixed the flour with water and wild yeast, and the "
          "loaves they made were dense, dark and kept for many days.")
REWRITE = ("Bakers have used clay ovens for millennia. They ground their grain on stones, "
           "mixed it with water and wild yeast, and baked heavy dark loaves that lasted.")
# shares exactly "a baker fills twelve trays with nine rolls each and then gives away"
PARAPHRASE_13 = REWRITE + (" In this story, a baker fills twelve trays with nine rolls "
                           "each and then gives away some bread.")
# shares "baker fills twelve trays with nine rolls each and then gives away": 12 words
NEAR_MISS_12 = REWRITE + (" In this story, the baker fills twelve trays with nine rolls "
                          "each and then gives away some bread.")


@pytest.fixture
def benchmarks(tmp_path):
    folder = tmp_path / "benchmarks"
    folder.mkdir()
    (folder / "bakery_math.jsonl").write_text(
        json.dumps({"text": QUESTION + " Answer: 72"}) + "\n"
        + json.dumps({"text": "Two trains leave the same station an hour apart."}) + "\n")
    pq.write_table(pa.table({"text": [TRIVIA, None]}), folder / "river_trivia.parquet")
    return f"file://{folder}"


def judge(index, output, source=SOURCE):
    [verdict] = assess([Row(source, output, "stop", None)], lambda _t: Bounds(),
                       benchmarks=index)
    return verdict


def test_the_three_planted_rows(benchmarks):
    index = decontaminate.build(benchmarks)  # n = 13
    verbatim = judge(index, REWRITE + " " + QUESTION)
    assert "contaminated" in verbatim.reasons and verbatim.contaminated_by == ["bakery_math"]
    kept_13 = judge(index, PARAPHRASE_13)
    assert "contaminated" in kept_13.reasons and kept_13.contaminated_by == ["bakery_math"]
    near_miss = judge(index, NEAR_MISS_12)
    assert "contaminated" not in near_miss.reasons and near_miss.contaminated_by == []
    # n is the team's: at 12 the near miss is caught
    assert judge(decontaminate.build(benchmarks, 12), NEAR_MISS_12).contaminated_by == [
        "bakery_math"]


def test_words_are_normalised_as_the_gate_does(benchmarks):
    index = decontaminate.build(benchmarks)
    shouting = QUESTION.upper().replace(",", " ;").replace("?", "!!")
    assert judge(index, REWRITE + " " + shouting).contaminated_by == ["bakery_math"]


def test_a_contaminated_source_rejects_its_row(benchmarks):
    index = decontaminate.build(benchmarks)
    verdict = judge(index, REWRITE, source=TRIVIA + " " + SOURCE)
    assert verdict.reasons == ["contaminated"] and verdict.contaminated_by == ["river_trivia"]
    assert judge(index, REWRITE).reasons == []  # the same row, clean: usable


def test_an_ngram_in_two_benchmarks_names_both(benchmarks, tmp_path):
    folder = tmp_path / "benchmarks"
    (folder / "copy_of_trivia.jsonl").write_text(json.dumps({"text": TRIVIA}) + "\n")
    index = decontaminate.build(benchmarks)
    assert judge(index, REWRITE + " " + TRIVIA).contaminated_by == [
        "copy_of_trivia", "river_trivia"]
    assert judge(index, QUESTION).contaminated_by == ["bakery_math"]


def test_the_index_is_hashed_ngrams_and_says_its_size(benchmarks):
    index = decontaminate.build(benchmarks)
    question_words = len(decontaminate.words(QUESTION + " Answer: 72"))
    trivia_words = len(decontaminate.words(TRIVIA))
    distinct = (question_words - 12) + (trivia_words - 12)  # the trains text: 8 words, none
    assert index.stats.ngrams == distinct and index.keys.size == distinct
    assert index.stats.index_bytes == distinct * 12  # 8-byte hash + 4-byte benchmark
    assert index.stats.texts == 4 and index.stats.benchmarks == 2


def test_no_benchmarks_no_check():
    assert judge(None, REWRITE + " " + QUESTION).contaminated_by == []


def test_n_below_five_is_refused():
    with pytest.raises(decontaminate.SynthfactoryError, match="at least 5"):
        decontaminate.check_n(4)
