"""A long document cut into chunks that fit (synthfactory/stitch/chunks.py), counted with
the prepared model's own tokenizer."""

from __future__ import annotations

import math
import random
from functools import partial

import pytest

from synthfactory.model import default_model_dir, is_ready
from synthfactory.stitch import chunks, tokens

pytestmark = pytest.mark.skipif(not is_ready(default_model_dir()),
                                reason="run `synthfactory model prepare` (make setup) first")

LIMIT = 120
WORDS_SENTENCE = "The parser reads each line of the file and keeps the fields it needs."
WORDS = ("the parser reads each line of the file and keeps the fields it needs while the "
         "writer turns records into rows that a later step can load again").split()


@pytest.fixture(scope="module")
def count():
    return partial(tokens.count_tokens, tokens.tokenizer_json(str(default_model_dir())))


def _prose(seed: int, sentences: int) -> str:
    rng = random.Random(seed)
    return " ".join(" ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 18))).capitalize()
                    + "." for _ in range(sentences))


CODE = ("```python\n"
        + "".join(f"def step_{i}(rows):\n    return [r * {i} for r in rows]\n\n" for i in range(4))
        + "```\n")
MATH = "$$\n\\sum_{i=1}^{n} x_i^2 = \\frac{n(n+1)(2n+1)}{6}\n$$\n"


def _guide() -> str:
    return (f"# Reading files\n\n{_prose(1, 5)}\n\n"
            f"## Opening\n\n{_prose(2, 4)}\n\n{CODE}\n{_prose(3, 6)}\n\n"
            f"### From a path\n\n{_prose(4, 7)}\n\n{MATH}\n{_prose(5, 3)}\n\n"
            f"Closing the file\n----------------\n\n{_prose(6, 8)}\n"
            f"## Writing\n\n{_prose(7, 9)}\n\n{_prose(8, 4)}\n")


DOCUMENTS = {
    "guide": _guide(),
    "prose": "\n\n".join(_prose(10 + i, 6) for i in range(6)),
    "one long paragraph": _prose(30, 40),
    "one long line of words": " ".join(random.Random(5).choice(WORDS) for _ in range(900)),
    "crlf lines": "\r\n".join(_prose(40 + i, 2) for i in range(30)) + "\r\n",
    "a code block longer than a chunk": "Intro.\n\n```\n" + "".join(
        f"value_{i} = compute({i}, {i + 1})\n" for i in range(120)) + "```\nAfter.\n",
}


@pytest.mark.parametrize("name", sorted(DOCUMENTS))
def test_the_chunks_joined_are_the_document(count, name):
    text = DOCUMENTS[name]
    assert count([text])[0] > 2 * LIMIT  # the test needs a document that does not fit
    result = chunks.split_document(text, count, LIMIT)
    assert result.unsplittable is None
    assert len(result.chunks) >= 2
    assert "".join(c.text for c in result.chunks) == text
    assert [(c.start, c.end) for c in result.chunks] == list(zip(
        [0, *[c.end for c in result.chunks[:-1]]], [c.end for c in result.chunks], strict=True))


@pytest.mark.parametrize("name", sorted(DOCUMENTS))
def test_no_chunk_is_over_the_size(count, name):
    result = chunks.split_document(DOCUMENTS[name], count, LIMIT)
    counted = count([c.text for c in result.chunks])
    assert counted == [c.tokens for c in result.chunks]  # each counted again after the cut
    assert max(counted) <= LIMIT


def test_chunks_are_packed_not_one_per_sentence(count):
    result = chunks.split_document(DOCUMENTS["one long paragraph"], count, LIMIT)
    total = count([DOCUMENTS["one long paragraph"]])[0]
    assert len(result.chunks) <= math.ceil(total / (LIMIT / 2))
    assert all(c.text.rstrip().endswith(".") for c in result.chunks)  # cut after sentences


def test_a_fenced_code_block_that_fits_is_kept_whole(count):
    result = chunks.split_document(DOCUMENTS["guide"], count, LIMIT)
    assert count([CODE])[0] < LIMIT
    assert any(CODE in c.text for c in result.chunks)
    assert any(MATH in c.text for c in result.chunks)  # a display-math block too


def test_a_code_block_longer_than_a_chunk_is_cut_between_lines(count):
    result = chunks.split_document(DOCUMENTS["a code block longer than a chunk"], count, LIMIT)
    assert len(result.chunks) >= 3
    assert all(c.text.endswith("\n") for c in result.chunks[:-1])


def test_structure_first_a_section_that_fits_is_not_cut(count):
    """Paragraph by paragraph, section 1 and half of section 2 would fill a chunk; the
    headings come first, so each section is a chunk of its own."""
    paragraph = " ".join([WORDS_SENTENCE] * 3)
    sections = [f"## Part {i}\n\n{paragraph}\n\n{paragraph}\n\n" for i in range(4)]
    size = max(count(sections))
    limit = int(1.6 * size)
    assert 2 * min(count(sections)) > limit  # two sections never fit one chunk
    result = chunks.split_document("".join(sections), count, limit)
    assert [c.text for c in result.chunks] == sections


def test_headings_give_the_heading_path_and_the_title(count):
    result = chunks.split_document(DOCUMENTS["guide"], count, 60)
    assert result.title == "Reading files"
    paths = {c.heading_path for c in result.chunks}
    assert ("Reading files", "Opening", "From a path") in paths
    assert ("Reading files", "Closing the file") in paths  # a setext heading: level 2
    assert ("Reading files", "Writing") in paths
    assert result.chunks[0].heading_path == ("Reading files",)


def test_a_heading_inside_a_code_block_is_not_a_heading(count):
    text = "Intro line.\n\n```\n# not a heading\nx = 1\n```\n\n" + _prose(60, 30)
    result = chunks.split_document(text, count, LIMIT)
    assert all("not a heading" not in c.heading_path for c in result.chunks)
    assert result.title == "Intro line."  # no heading: the first line


def test_the_same_text_gives_the_same_chunks(count):
    fresh = partial(tokens.count_tokens, tokens.tokenizer_json(str(default_model_dir())))
    for text in DOCUMENTS.values():
        assert chunks.split_document(text, count, LIMIT) == chunks.split_document(
            text, fresh, LIMIT)


def test_a_5000_token_line_without_a_break_is_a_unit_no_split_can_fit(count):
    rng = random.Random(7)
    line = "".join(rng.choice("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+/")
                   for _ in range(16000))
    text = f"# Data\n\nThe blob follows.\n\n{line}\n\nThe end.\n"
    n = count([line])[0]
    assert n >= 5000
    result = chunks.split_document(text, count, 400)
    assert result.chunks == ()
    assert n <= result.unsplittable <= n + 1  # the line, with its line break
    assert chunks.unsplittable_reason(n, 400, 2048) == (
        f"no split fits the context window (a unit of {n} tokens without a space or line "
        "break; a chunk holds at most 400 tokens at --max-model-len 2048)")


def test_a_document_in_one_chunk_when_it_fits(count):
    text = _prose(70, 3)
    result = chunks.split_document(text, count, 10 * LIMIT)
    assert [c.text for c in result.chunks] == [text]


@pytest.mark.parametrize("ratio", [0.5, 1.0, 2.5, 4.0])
def test_the_chunk_size_leaves_room_for_the_full_budget(ratio):
    window, overhead, margin = 2048, 180, 32
    t = chunks.max_chunk_tokens(window, overhead, ratio=ratio, margin=margin)
    room = window - overhead - chunks.DRIFT

    def need(n: int) -> int:
        return n + math.ceil(n * ratio) + margin

    assert need(t) <= room < need(t + 1)
    assert chunks.max_chunk_tokens(window, overhead, new_tokens=256) == room - 256


def test_the_context_says_which_part_of_what(count):
    first = chunks.context(0, 3, "Reading files", ("Reading files", "Opening"))
    middle = chunks.context(1, 3, "Reading files", ())
    last = chunks.context(2, 3, "", ())
    assert "part 1 of 3" in first and '"Reading files"' in first
    assert '"Reading files > Opening"' in first and "conclusion" in first
    assert "part 2 of 3" in middle and "introduction" in middle and "section" not in middle
    assert "part 3 of 3" in last and "titled" not in last
    reserve = chunks.context_reserve(count)
    title = " ".join(["lengthy"] * 60)
    result = chunks.split_document(f"# {title}\n\n## {title}\n\n{_prose(80, 40)}", count, 80)
    assert count([result.title])[0] <= chunks.TITLE_TOKENS
    for i, chunk in enumerate(result.chunks):
        text = chunks.context(i, len(result.chunks), result.title, chunk.heading_path)
        assert count([text])[0] <= reserve
