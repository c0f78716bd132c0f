"""Your own corpus from the trigger form: its text, id and quality columns are Params
of the Data section, stitch and the audit get the same names, an optional Param left
empty reaches stitch as unset, and min_quality without quality_column is refused."""

from __future__ import annotations

import copy
import json
import subprocess

import pendulum
import pytest

from synthfactory_airflow.operators.param_rules import problems
from tests.support.paths import DAGS, ROOT, WORKER_PYTHON

CORPUS = {"text_column": "content", "id_column": "doc_id", "quality_column": "score",
          "min_quality": 0.35}
# The engine's argparse on the rendered argv: what stitch and audit would run with.
PARSE = """
import argparse, importlib, json, sys
from synthfactory.cli import build_parser
out = []
for argv in json.loads(sys.argv[1]):
    parser = build_parser(argv[0])
    args = vars(parser.parse_args(argv[1:]))
    out.append({k: args.get(k) for k in ("text_column", "id_column", "quality_column",
                                         "min_quality")})
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def dag():
    from airflow.dag_processing.dagbag import DagBag

    return DagBag(dag_folder=str(DAGS)).dags["synthetic_rephrase"]


def _argv(dag, task_id: str, conf: dict) -> list[str]:
    from airflow.sdk import ParamsDict

    params = ParamsDict(copy.deepcopy(dag.params))
    for name, value in conf.items():
        params[name] = value
    start = pendulum.datetime(2026, 11, 29, tz="UTC")
    task = copy.copy(dag.get_task(task_id))
    task.render_template_fields({"dag": dag, "params": params.validate(), "run_id": "r",
                                 "logical_date": start, "ds": start.to_date_string(),
                                 "data_interval_start": start,
                                 "data_interval_end": start.add(days=1)})
    return [str(a) for a in task.arguments]


def _parsed(argvs: list[list[str]]) -> list[dict]:
    if not WORKER_PYTHON.exists():
        pytest.skip(f"{WORKER_PYTHON} missing: run `make setup`")
    done = subprocess.run([str(WORKER_PYTHON), "-c", PARSE, json.dumps(argvs)], cwd=ROOT,
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def test_the_corpus_params_sit_in_the_data_section_with_defaults(dag):
    for name, default in {"text_column": "text", "id_column": "id", "quality_column": None,
                          "min_quality": None}.items():
        param = dag.params.get_param(name)
        assert param.schema["section"] == "Data", name
        assert dag.params[name] == default, name


def test_stitch_and_audit_get_the_columns_and_empty_means_unset(dag):
    argvs = [_argv(dag, "stitch_prompts", {}), _argv(dag, "audit_run", {}),
             _argv(dag, "stitch_prompts", CORPUS), _argv(dag, "audit_run", CORPUS)]
    assert "" not in argvs[0]  # an empty argv item would be a stray positional
    stitch, audit, own_stitch, own_audit = _parsed(argvs)
    assert stitch == {"text_column": "text", "id_column": "id", "quality_column": None,
                      "min_quality": None}
    assert own_stitch == CORPUS
    assert (audit["id_column"], own_audit["id_column"]) == ("id", "doc_id")


def test_a_min_quality_of_zero_is_passed_on(dag):
    (stitch,) = _parsed([_argv(dag, "stitch_prompts", {**CORPUS, "min_quality": 0})])
    assert stitch["min_quality"] == 0.0


@pytest.mark.parametrize("quality_column", [None, ""])
def test_min_quality_without_quality_column_is_refused_naming_both(dag, quality_column):
    conf = {"min_quality": 0.5, "quality_column": quality_column}
    params = {**{name: dag.params[name] for name in dag.params}, **conf}
    (problem,) = problems(params, conf, dag.params.keys())
    assert problem.startswith("min_quality=0.5: needs quality_column")
    assert problems({**params, "quality_column": "score"}, conf, dag.params.keys()) == []
