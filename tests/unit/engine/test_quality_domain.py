"""The checks a template declares (keep_code, keep_numbers, output_shape, target_language):
labelled pairs for each reason beyond test_quality_gate.py's one, clean outputs that
must pass, the parsers on their own, the pairs kept as a column through validate and
join, and the switch only the benchmark uses."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from synthfactory import storage
from synthfactory.errors import PermanentError, SynthfactoryError
from synthfactory.quality import domain
from synthfactory.quality.gate import Row, assess, verdict_columns
from synthfactory.quality_bounds import Bounds, bounds_from
from synthfactory.stitch.templates import DOMAINS, load_template, load_templates, parse_template
from tests.support.quality_texts import (
    CODE_COMMENTED,
    CODE_SOURCE,
    CODE_TUTORIAL,
    DISTILL,
    FENCE,
    GERMAN,
    KNOWLEDGE_LIST,
    MATH_CHANGED,
    MATH_SOLUTION,
    MATH_SOURCE,
    REWRITE,
    SOURCE,
    WEB_SOURCE,
)

NEW = ("code_tutorial", "code_commented", "math_solution", "math_textbook", "distill",
       "knowledge_list")
QA = ("Question: What does the cmd module offer? Answer: A small framework for building "
      "interpreters that take one command per line. Question: Where is it useful? Answer: "
      "In test harnesses, admin tools and prototypes that later get a richer front end.")


def shipped(template: str | None) -> Bounds:
    return bounds_from(load_template(template).quality, template) if template else Bounds()


def reasons(source: str, output: str, template: str, bounds_for=shipped, **kwargs) -> list[str]:
    (verdict,) = assess([Row(source, output, "stop", template)], bounds_for, **kwargs)
    return verdict.reasons


# -- templates: domains and declared checks ----------------------------------------------

def test_every_shipped_template_has_a_domain_and_the_new_ones_their_checks():
    templates = {t.id: t for t in load_templates(sorted(
        ["encyclopedic", "easy", "qa", "tutorial", "summary", "faq", *NEW]))}
    assert {t.domain for t in templates.values()} <= set(DOMAINS)
    assert {i: t.domain for i, t in templates.items() if t.domain != "web"} == {
        "code_tutorial": "code", "code_commented": "code", "math_solution": "math",
        "math_textbook": "math"}
    declared = {i: shipped(i) for i in templates}
    assert [i for i, b in declared.items() if b.keep_code] == ["code_commented", "code_tutorial"]
    assert {i: b.keep_numbers for i, b in declared.items() if b.keep_numbers is not None} == {
        "distill": 0.25, "math_solution": 0.1, "math_textbook": 0.2}
    assert {i: b.output_shape for i, b in declared.items() if b.output_shape} == {
        "knowledge_list": "list", "qa": "qa_pairs"}


def test_a_template_without_a_domain_is_any_and_hashes_as_one_that_says_so():
    base = {"id": "x", "version": 1, "style": "x", "system": "s", "user": "Rewrite: {document}"}
    silent = parse_template(base, "x.json")
    said = parse_template({**base, "domain": "any"}, "x.json")
    assert silent.domain == said.domain == "any"
    assert silent.hash == said.hash and "domain" not in silent.document()
    code = parse_template({**base, "domain": "code"}, "x.json")
    assert code.document()["domain"] == "code" and code.hash != silent.hash


@pytest.mark.parametrize(("change", "message"), [
    ({"domain": "prose"}, r"field 'domain' must be one of \['web', 'code', 'math', 'any'\], "
                          r"got 'prose'"),
    ({"quality": {"keep_code": "yes"}}, r"quality keep_code must be true or false"),
    ({"quality": {"keep_numbers": {"tolerance": 2}}}, r"quality keep_numbers must be true, "
                                                      r"false or \{\"tolerance\": T\}"),
    ({"quality": {"keep_numbers": {"tolerence": 0.1}}}, r"quality keep_numbers must be"),
    ({"quality": {"output_shape": "table"}}, r"quality output_shape must be one of "
                                             r"\['qa_pairs', 'list'\], got 'table'"),
    ({"quality": {"target_language": "english"}}, r"target_language must be an ISO 639-1"),
    ({"quality": {"keep_cod": True}}, r"unknown quality key\(s\) \['keep_cod'\]"),
])
def test_a_bad_domain_or_check_is_named_at_load(change, message):
    data = {"id": "x", "version": 1, "style": "x", "system": "s", "user": "{document}", **change}
    with pytest.raises(PermanentError, match=message):
        parse_template(data, "x.json")


def test_a_folder_of_ones_own_declares_checks_and_a_bad_one_fails_the_folder(tmp_path):
    own = {"id": "notes", "version": 1, "style": "notes", "system": "s",
           "user": "Notes on: {document}", "quality": {"output_shape": "list"}}
    (tmp_path / "notes.json").write_text(json.dumps(own))
    (notes,) = load_templates(["notes"], f"file://{tmp_path}")
    assert notes.domain == "any" and bounds_from(notes.quality, "n").output_shape == "list"
    (tmp_path / "bad.json").write_text(json.dumps({**own, "id": "bad", "domain": "maths"}))
    with pytest.raises(PermanentError, match=r"bad\.json: field 'domain' must be one of"):
        load_templates(["notes"], f"file://{tmp_path}")


def test_keep_numbers_true_is_no_tolerance():
    assert bounds_from({"keep_numbers": True}, "t").keep_numbers == 0.0
    assert bounds_from({"keep_numbers": False}, "t").keep_numbers is None
    with pytest.raises(SynthfactoryError, match="keep_numbers"):
        bounds_from({"keep_numbers": 0.1}, "t")


# -- code_broken ------------------------------------------------------------------------

BROKEN_CODE = {  # output of code_tutorial for CODE_SOURCE -> what went wrong
    "python no longer parses": CODE_TUTORIAL.replace("merged.update(override)\n",
                                                     "merged.update(override\n"),
    "json no longer parses": CODE_TUTORIAL.replace('"timeout_s": 30}', '"timeout_s": 30,}'),
    "python block missing": CODE_TUTORIAL.replace(
        CODE_TUTORIAL[CODE_TUTORIAL.index(FENCE + "python"):CODE_TUTORIAL.index("Recap")],
        "The function copies the base and updates it with the override.\n\n"),
    "python changed, still parses": CODE_TUTORIAL.replace("merged = dict(base)",
                                                          "merged = dict(override)"),
    "a statement dropped": CODE_TUTORIAL.replace("    merged.update(override)\n", ""),
}


@pytest.mark.parametrize("case", sorted(BROKEN_CODE))
def test_code_broken_when_a_kept_block_is_missing_changed_or_does_not_parse(case):
    assert reasons(CODE_SOURCE, BROKEN_CODE[case], "code_tutorial") == ["code_broken"]


@pytest.mark.parametrize("output", [
    CODE_TUTORIAL,
    CODE_COMMENTED,  # comments and a new docstring: the same tree
    CODE_COMMENTED.replace(FENCE + "python", FENCE).replace(FENCE + "json", FENCE),  # untagged
])
def test_code_kept_with_comments_docstrings_or_other_tags_passes(output):
    assert not domain.code_broken(CODE_SOURCE, output)


def test_a_block_split_at_its_top_level_statements_and_indented_is_kept():
    source = f"Paths:\n\n{FENCE}python\nimport os\nroot = os.sep\n{FENCE}\n"
    split = (f"First the import:\n\n{FENCE}python\nimport os\n{FENCE}\n\nThen:\n\n"
             f"{FENCE}python\n    root = os.sep\n{FENCE}\n")
    assert not domain.code_broken(source, split)
    assert domain.code_broken(source, split.replace("root = os.sep", "root = os.pathsep"))


def test_code_blocks_and_which_are_checked():
    text = (f"prose\n~~~py\nx = 1\n~~~\n{FENCE}\n[1, 2]\n{FENCE}\n{FENCE}bash\nls -l\n{FENCE}\n"
            f"{FENCE}python\n>>> 1 + 1\n2\n{FENCE}\n{FENCE}toml\n[tool]\nname = 'x'\n{FENCE}\n"
            f"{FENCE}python\ndef cut(")
    blocks = domain.code_blocks(text)
    assert [(b.lang, b.code) for b in blocks] == [
        ("py", "x = 1\n"), ("", "[1, 2]\n"), ("bash", "ls -l\n"), ("python", ">>> 1 + 1\n2\n"),
        ("toml", "[tool]\nname = 'x'\n"), ("python", "def cut(")]
    # a doctest, a shell line and a cut block do not parse: nothing to keep in them
    assert [lang for lang, _ in domain.source_code(text)] == ["python", "json", "toml"]
    assert domain.without_code(text) == "prose\n"
    assert not domain.code_broken("no code here", "nor here")


def test_a_toml_block_must_be_kept_too():
    source = f"Config:\n\n{FENCE}toml\n[server]\nport = 8080\n{FENCE}\n"
    commented = f"{FENCE}toml\n# the server\n[server]\nport = 8080  # its port\n{FENCE}\n"
    assert not domain.code_broken(source, commented)
    assert domain.code_broken(source, commented.replace("8080", "8081"))


# -- numbers_lost -----------------------------------------------------------------------

def test_numbers_lost_within_the_templates_tolerance():
    # 6 distinct numbers and formulae in MATH_SOURCE; MATH_CHANGED loses 3 of them
    assert domain.source_numbers(MATH_SOURCE) == (
        frozenset({"v=\\fracdt", "v=\\frac1502.5=60"}), frozenset({"150", "2.5", "420", "7"}))
    assert domain.numbers_lost(MATH_SOURCE, MATH_CHANGED, 0.1)
    assert not domain.numbers_lost(MATH_SOURCE, MATH_CHANGED, 0.5)
    one_lost = MATH_SOLUTION.replace("420", "400")  # 1 of 6: within 0.2, not within 0.1
    assert reasons(MATH_SOURCE, one_lost, "math_solution") == ["numbers_lost"]
    assert reasons(MATH_SOURCE, one_lost, "math_textbook") == []


@pytest.mark.parametrize(("source", "output", "lost"), [
    ("Built in 1889.", "It was built in 1,889.", False),  # a separator is not the number
    ("The values are 2.5 and 30.", "Values: 2.50 and 0030.", False),
    ("3 of them.", "Three of them.", False),  # a small number as a word
    ("It is $x^2 + 1$.", "Formula: $x ^ {2}+1$.", False),  # spaces and braces aside
    ("It is $x^2 + 1$.", "Formula: x^2 + 1, without markup.", False),
    ("It is $x^2 + 1$.", "Formula: $x^3+1$.", True),
    ("Built in 1889.", "Built in 1898.", True),
])
def test_numbers_and_formulae_compare_as_written_not_as_typed(source, output, lost):
    assert domain.numbers_lost(source, output, 0.0) is lost


def test_currency_is_not_a_formula_and_code_numbers_are_not_counted():
    formulae, numbers = domain.source_numbers(
        f"It costs $5 and $10 now.\n\n{FENCE}python\nx = 12345\n{FENCE}\n")
    assert formulae == frozenset() and numbers == frozenset({"5", "10"})


def test_distill_loses_numbers_past_its_tolerance():
    changed = DISTILL.replace("1889", "1887").replace("330", "300").replace("41", "forty")
    assert reasons(WEB_SOURCE, changed, "distill") == ["numbers_lost"]


# -- wrong_format and the pairs ----------------------------------------------------------

@pytest.mark.parametrize(("text", "pairs"), [
    (QA, 2),
    ("Q: Who sat?\nA: The cat.\n\nQ: Where?\nA: On the mat.", 2),
    ("**Question 1:** Who sat?\n**Answer:** The cat.", 1),
    ("1. Q: Who sat?\n   A: The cat.", 1),
    ("QUESTION: Who sat?\nANSWER: The cat.", 1),
])
def test_qa_pairs_parse(text, pairs):
    parsed = domain.qa_pairs(text)
    assert parsed is not None and len(parsed) == pairs
    assert parsed[0]["question"].endswith("?") and parsed[0]["answer"]


@pytest.mark.parametrize("text", [
    REWRITE,  # prose
    "Question: Who sat?\nQuestion: Where?\nAnswer: The cat.",  # a question left unanswered
    "Answer: The cat.\nQuestion: Who sat?",  # the wrong way round
    "Question: Who sat?\nAnswer:",  # an empty answer
    "Quick note: A: is a drive letter.",  # Q:/A: only at a line's start
])
def test_not_qa_pairs(text):
    assert domain.qa_pairs(text) is None


@pytest.mark.parametrize(("text", "ok"), [
    (KNOWLEDGE_LIST, True),
    ("1. First fact.\n2. Second fact,\n   continued.\n3) Third.", True),
    ("## Facts\n* one\n* two\n\nThat is all.", True),  # a heading, one line of prose
    ("- only one item", False),
    (REWRITE, False),
    ("- one\n- two\nSome prose.\nMore prose.", False),
])
def test_list_shape(text, ok):
    assert domain.is_list(text) is ok


def test_the_verdict_keeps_the_pairs_of_a_qa_template_only():
    verdicts = assess([Row(SOURCE, QA, "stop", "qa"), Row(SOURCE, REWRITE, "stop", "qa"),
                       Row(SOURCE, REWRITE, "stop", "encyclopedic"),
                       Row(SOURCE, "Sure! Here is the rewritten text:", "stop", "qa")], shipped)
    assert [v.reasons for v in verdicts] == [[], ["wrong_format"], [], ["empty"]]
    assert verdicts[0].qa_pairs == [
        {"question": "What does the cmd module offer?",
         "answer": "A small framework for building interpreters that take one command per "
                   "line."},
        {"question": "Where is it useful?",
         "answer": "In test harnesses, admin tools and prototypes that later get a richer "
                   "front end."}]
    assert [v.qa_pairs for v in verdicts[1:]] == [[], None, []]


def test_knowledge_list_prose_is_the_wrong_format():
    assert reasons(WEB_SOURCE, DISTILL, "knowledge_list") == ["wrong_format"]


# -- language: the source's unless the template names one ------------------------------

def test_a_target_language_replaces_the_sources():
    german = bounds_from({"target_language": "de", "max_copy": 1.0}, "t")
    assert reasons(SOURCE, GERMAN, "x", lambda _: german) == []
    assert reasons(SOURCE, REWRITE, "x", lambda _: german) == ["language"]
    assert reasons(SOURCE, GERMAN, "encyclopedic") == ["language"]  # follows the source


# -- the benchmark's switch ---------------------------------------------------------------

def test_without_domain_checks_the_gate_is_as_before():
    rows = [Row(*pair) for pair in [
        (CODE_SOURCE, BROKEN_CODE["python no longer parses"], "stop", "code_tutorial"),
        (MATH_SOURCE, MATH_CHANGED, "stop", "math_solution"),
        (SOURCE, REWRITE, "stop", "qa")]]
    assert [v.reasons for v in assess(rows, shipped)] == [
        ["code_broken"], ["numbers_lost"], ["wrong_format"]]
    off = assess(rows, shipped, domain_checks=False, grounding_checks=False)
    assert [v.reasons for v in off] == [[], [], []] and [v.qa_pairs for v in off] == [None] * 3


# -- the pairs through validate's columns and join ----------------------------------------

def test_verdict_columns_carry_the_pairs_from_the_rendered_prompt():
    qa = load_template("qa")
    columns = verdict_columns([(qa.render_user(SOURCE), QA, "stop", "qa"),
                               (qa.render_user(SOURCE), REWRITE, "stop", "qa")])
    assert columns["reasons"] == [[], ["wrong_format"]]
    assert len(columns["qa_pairs"][0]) == 2 and columns["qa_pairs"][1] == []


def _pairs(n: int, tag: str) -> list[dict]:
    return [{"question": f"{tag} q{i}?", "answer": f"{tag} a{i}."} for i in range(n)]


def test_join_concatenates_a_documents_pairs_in_chunk_order_and_reads_older_verdicts(tmp_path):
    from synthfactory.join import join_run
    from synthfactory.layout import RunLayout
    from tests.support.run_folders import build_run

    run = build_run(f"file://{tmp_path}/root", shard_rows=(4,), quarantined=0, join=False)
    layout = RunLayout(run.run_url)
    url = layout.shard_verdicts("shard-00000")
    verdicts = storage.read_table(url)
    rows = verdicts.to_pylist()
    for i, row in enumerate(rows):
        row["qa_pairs"] = _pairs(i + 1, row["id"]) if i % 2 == 0 else None
    storage.write_table(pa.Table.from_pylist(rows, schema=verdicts.schema), url)
    join_run(run.run_url)
    joined = pa.concat_tables(storage.read_table(u) for u in storage.list_files(
        storage.join(run.run_url, "joined"), suffix=".parquet"))
    assert joined.schema.field("qa_pairs").type == verdicts.schema.field("qa_pairs").type
    got = {(r["id"], r["template_id"]): r["qa_pairs"] for r in joined.to_pylist()}
    want = {(r["id"], r["template_id"]): r["qa_pairs"] for r in rows}
    assert got == want

    storage.write_table(verdicts.drop_columns(["qa_pairs"]), url)  # validated before pairs
    join_run(run.run_url)
    joined = storage.read_table(storage.list_files(storage.join(run.run_url, "joined"),
                                                   suffix=".parquet")[0])
    assert set(joined.column("qa_pairs").to_pylist()) == {None}


def test_a_chunked_documents_pairs_follow_its_chunks():
    from synthfactory.join import _Chunk, _joined_row, _Pending

    def chunk(index: int, pairs):
        return _Chunk(index, "shard-00000", f"out {index}", f"clean {index}", True, [], 1, 1, 1,
                      "stop", 1, "m", {}, pairs)

    doc = _Pending(3, {2: chunk(2, _pairs(1, "c")), 0: chunk(0, _pairs(2, "a")),
                       1: chunk(1, [])})
    row = _joined_row(("doc", "qa"), doc)
    assert row["qa_pairs"] == _pairs(2, "a") + _pairs(1, "c")
    plain = _Pending(2, {0: chunk(0, None), 1: chunk(1, None)})
    assert _joined_row(("doc", "summary"), plain)["qa_pairs"] is None


def test_the_docs_list_every_reason_and_every_shipped_templates_bounds():
    from synthfactory.quality.reasons import REASONS
    from synthfactory.stitch.templates import available
    from tests.support.paths import ROOT

    text = (ROOT / "docs" / "quality.md").read_text()
    assert [r for r in REASONS if f"| `{r}` |" not in text] == []
    assert [t for t in available() if f"| {t} |" not in text] == []
