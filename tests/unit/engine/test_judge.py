"""The model judge (docs/judge.md): its replies read as verdicts, the rule that rejects
a row, the loop over an engine, and ``synthfactory judge``'s table, RESULT line and bad
inputs. The decisions are checked with a scripted engine (canned replies,
tests/support/scripted_engine.py); what a real small model makes of them is
benchmarks/judge_agreement.py's to measure."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from synthfactory import cli
from synthfactory.errors import PermanentError, SynthfactoryError
from synthfactory.quality.judge import (
    FAITHFUL,
    UNFAITHFUL,
    UNPARSED,
    Pair,
    judge,
    load_judge_template,
    parse_reply,
)
from synthfactory.rephrase.engine_spec import EngineSpec
from tests.support.paths import ROOT
from tests.support.scripted_engine import ScriptedEngine

SOURCE = "The cmd module provides a framework for line-oriented command interpreters."
KEPT = '{"unsupported": [], "missing": [], "faithful": true}'
INVENTED = ('{"unsupported": ["cmd was added in Python 1.0"], "missing": [], '
            '"faithful": true}')  # says faithful, names an unsupported claim


# -- a reply read as a verdict ----------------------------------------------------------

def test_a_faithful_verdict_is_kept_with_its_missing_points():
    verdict = parse_reply('{"unsupported": [], "missing": ["test harnesses"], '
                          '"faithful": true}')
    assert verdict.outcome == FAITHFUL and verdict.faithful is True
    assert verdict.unsupported == [] and verdict.missing == ["test harnesses"]


def test_an_unsupported_claim_makes_the_row_unfaithful_even_when_called_faithful():
    verdict = parse_reply(INVENTED)
    assert verdict.outcome == UNFAITHFUL and verdict.faithful is False
    assert verdict.unsupported == ["cmd was added in Python 1.0"]


def test_faithful_false_is_unfaithful_without_a_listed_claim():
    assert parse_reply('{"unsupported": [], "missing": [], "faithful": false}').outcome \
        == UNFAITHFUL


def test_a_blank_unsupported_item_names_no_claim():
    assert parse_reply('{"unsupported": [" "], "missing": [], "faithful": true}').outcome \
        == FAITHFUL


@pytest.mark.parametrize("reply", [
    "The rewrite is faithful.",  # prose, no JSON
    '{"unsupported": [], "missing": [], "faithful": tru',  # cut mid-object
    "{'unsupported': [], 'missing': [], 'faithful': True}",  # a Python dict, not JSON
    "",
])
def test_a_reply_without_a_json_object_is_unparsed(reply):
    verdict = parse_reply(reply)
    assert verdict.outcome == UNPARSED and verdict.faithful is None
    assert verdict.unsupported is None and verdict.raw == reply and verdict.why


def test_fenced_json_after_prose_is_parsed():
    reply = f"Here is my verdict:\n```json\n{INVENTED}\n```\nI hope this helps."
    verdict = parse_reply(reply)
    assert verdict.outcome == UNFAITHFUL and verdict.raw == reply


def test_the_first_object_is_read_past_braces_that_are_no_json():
    assert parse_reply("Use {braces} like this: " + KEPT).outcome == FAITHFUL


@pytest.mark.parametrize("reply, why", [
    ('{"unsupported": [], "missing": [], "faithful": "true"}', "'faithful' is str"),
    ('{"unsupported": "none", "missing": [], "faithful": true}', "'unsupported' is str"),
    ('{"unsupported": [1, 2], "missing": [], "faithful": false}', "not a string"),
    ('{"unsupported": [], "faithful": true}', "no 'missing'"),
    ('["unsupported", "missing", "faithful"]', "no JSON object"),
])
def test_wrong_types_or_a_missing_key_are_unparsed_not_coerced(reply, why):
    verdict = parse_reply(reply)
    assert verdict.outcome == UNPARSED and why in verdict.why


def test_a_copied_example_is_no_verdict():
    """The shipped template shows placeholders; a model that hands them back judged
    nothing, and must not count as having caught an unsupported claim."""
    template = load_judge_template()
    assert template.example_texts and "{example}" not in template.system
    copied = ('{"unsupported": ["<a claim of the rewrite that the source does not support>"],'
              ' "missing": [], "faithful": true}')
    verdict = parse_reply(copied, "stop", template.example_texts)
    assert verdict.outcome == UNPARSED and "example" in verdict.why
    assert parse_reply(copied).outcome == UNFAITHFUL  # without the template's texts
    # a copy with a word changed inside the brackets (the embedded model's, verbatim)
    altered = ('{"unsupported": ["<a claim of the rewrite that the source does not support '
               'this claim>"], "missing": [], "faithful": false}')
    assert parse_reply(altered, "stop", template.example_texts).outcome == UNPARSED


# -- the template and the loop ------------------------------------------------------------

def test_the_conversation_fills_each_placeholder_once():
    template = load_judge_template()
    source = "print(f'{output}') and a stray { brace"
    system, user = template.conversation(source, "OUT")
    assert system["role"] == "system" and user["role"] == "user"
    assert source in user["content"] and user["content"].count("OUT") == 1


def test_a_bad_own_template_is_one_line(tmp_path):
    path = tmp_path / "judge.json"
    path.write_text(json.dumps({"id": "mine", "system": "s", "user": "Rewrite: {output}"}))
    with pytest.raises(PermanentError, match=r"'user' text lacks \{source\}"):
        load_judge_template(path)
    with pytest.raises(PermanentError, match="not found"):
        load_judge_template(tmp_path / "nope.json")


def test_the_loop_keeps_order_bounds_its_requests_and_spends_the_budget():
    outputs = [f"output number {i}" for i in range(7)]
    replies = {o: (INVENTED if i % 3 == 0 else KEPT) for i, o in enumerate(outputs)}
    engine = ScriptedEngine(replies, per_poll=2)
    verdicts = judge(engine, [Pair(SOURCE, o) for o in outputs], load_judge_template(),
                     max_tokens=64, max_in_flight=3)
    assert [v.outcome for v in verdicts] == [UNFAITHFUL if i % 3 == 0 else FAITHFUL
                                             for i in range(7)]
    assert engine.most_in_flight <= 3 and engine.budgets == [64] * 7
    assert all(SOURCE in c[-1]["content"] for c in engine.conversations)


def test_a_refused_request_and_a_cut_reply_are_unparsed():
    engine = ScriptedEngine({"long": KEPT, "cut": '{"unsupported": ["x"'},
                            refuse="long", finish_reason="length")
    refused, cut = judge(engine, [Pair(SOURCE, "long"), Pair(SOURCE, "cut")],
                         load_judge_template())
    assert refused.outcome == UNPARSED and refused.raw is None
    assert "context window" in refused.why
    assert cut.outcome == UNPARSED and "budget" in cut.why
    assert engine.budgets == [load_judge_template().max_tokens] * 2


def test_an_engine_that_loses_a_request_fails_instead_of_spinning():
    class Losing(ScriptedEngine):
        def poll(self):
            self._queue.clear()
            return []

    with pytest.raises(SynthfactoryError, match="returned nothing for rows"):
        judge(Losing({"x": KEPT}), [Pair(SOURCE, "x")], load_judge_template())


# -- synthfactory judge ---------------------------------------------------------------------

def _table(path, outputs, gated=False):
    columns = {"id": [f"r{i}" for i in range(len(outputs))],
               "source_text": [SOURCE] * len(outputs), "output_text": outputs,
               "finish_reason": ["stop"] * len(outputs)}
    if gated:
        columns |= {"usable": [True, False, True], "reasons": [[], ["too_short"], []]}
    pq.write_table(pa.table(columns), path)


@pytest.fixture
def scripted(monkeypatch):
    """``synthfactory judge`` builds the scripted engine, whatever --engine names."""
    engine = ScriptedEngine({"kept row": KEPT, "invented row": INVENTED,
                             "rambling row": "I think it is mostly fine."})
    monkeypatch.setattr(EngineSpec, "build", lambda spec: engine)
    return engine


def test_the_command_writes_the_verdict_columns_and_its_result_line(tmp_path, scripted,
                                                                   capsys):
    _table(tmp_path / "rows.parquet", ["kept row", "invented row", "rambling row"])
    code = cli.main(["judge", "--in", str(tmp_path / "rows.parquet"), "--out",
                     str(tmp_path / "judged.parquet"), "--engine", "echo", "--max-tokens",
                     "128"])
    out = capsys.readouterr().out.splitlines()
    assert code == 0
    assert out[-2] == "RESULT judge rows=3 faithful=1 unfaithful=1 unparsed=1"
    summary = json.loads(out[-1])
    assert (summary["rows"], summary["unparsed"], summary["max_tokens"]) == (3, 1, 128)
    table = pq.read_table(tmp_path / "judged.parquet")
    assert table.schema.field("judge_faithful").type == pa.bool_()
    assert table.schema.field("judge_unsupported").type == pa.list_(pa.string())
    rows = table.to_pylist()
    assert [r["judge_faithful"] for r in rows] == [True, False, None]
    assert [r["judge_unsupported"] for r in rows] == [[], ["cmd was added in Python 1.0"],
                                                      None]
    assert rows[2]["judge_raw"] == "I think it is mostly fine." and rows[0]["id"] == "r0"
    assert "usable" not in table.column_names  # an ungated table gets the judge's columns
    assert scripted.budgets == [128] * 3


def test_a_gated_tables_unfaithful_rows_are_rejected_with_their_reason(tmp_path, scripted,
                                                                       capsys):
    _table(tmp_path / "rows.parquet", ["invented row", "invented row", "rambling row"],
           gated=True)
    assert cli.main(["judge", "--in", str(tmp_path / "rows.parquet"), "--out",
                     str(tmp_path / "judged.parquet"), "--engine", "echo"]) == 0
    rows = pq.read_table(tmp_path / "judged.parquet").to_pylist()
    assert [r["usable"] for r in rows] == [False, False, True]  # unparsed: kept
    assert [r["reasons"] for r in rows] == [["unfaithful"], ["too_short", "unfaithful"], []]


def _judge_cli(tmp_path, *argv, env=None):
    """The real command in a fresh process: (exit code, stderr lines)."""
    done = subprocess.run(
        [sys.executable, "-m", "synthfactory.cli", "judge", *argv], cwd=tmp_path,
        capture_output=True, text=True, timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})})
    return done.returncode, [line for line in done.stderr.splitlines() if line.strip()]


@pytest.mark.parametrize("flags, expect", [
    (["--engine", "gpt"], "--engine 'gpt': expected one of ('vllm', 'echo', 'endpoint')"),
    (["--engine", "vllm", "--model", "{tmp}/no-model"], "no-model: not a model folder"),
    (["--engine", "endpoint"], "--engine endpoint: give --endpoint URL"),
    (["--engine", "vllm", "--model", "{model}", "--engine-args", '{"max_num_seq": 4}'],
     "'max_num_seq': not a vLLM engine argument"),
])
def test_a_bad_engine_or_model_is_one_line_and_exit_3_before_any_work(tmp_path, flags,
                                                                      expect):
    """--in names no file: the engine's check must come first, and no model loads."""
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    argv = [f.replace("{tmp}", str(tmp_path)).replace("{model}", str(model)) for f in flags]
    code, lines = _judge_cli(tmp_path, "--in", str(tmp_path / "none.parquet"), "--out",
                             str(tmp_path / "out.parquet"), *argv,
                             env={"SYNTHFACTORY_ENDPOINT_URL": ""})
    assert code == 3, lines
    assert len(lines) == 1 and lines[0].startswith("synthfactory judge: error: "), lines
    assert expect in lines[0]
    assert not (tmp_path / "out.parquet").exists()
