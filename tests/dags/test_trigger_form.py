"""The trigger form as a new user meets it: Params in sections, each described,
`templates` a multi-select of the shipped styles, URLs that must be URLs, and rules
between fields checked by the run's first task before any work starts."""

from __future__ import annotations

import json

import pytest

from synthfactory_airflow.operators.param_rules import problems
from tests.support.paths import ROOT

SECTIONS = ["Data", "Prompts and shards", "Model and engine", "Quality gate", "Catalog",
            "Smoke test", "Card and export"]
# every shipped *.json but routing.json, the routing table (ADR 0139)
SHIPPED_STYLES = sorted(p.stem for p in (ROOT / "synthfactory" / "templates").glob("*.json")
                        if p.name != "routing.json")


@pytest.fixture(scope="module")
def dag():
    from airflow.dag_processing.dagbag import DagBag

    return DagBag(dag_folder=str(ROOT / "dags")).dags["synthetic_rephrase"]


def _schemas(dag) -> dict[str, dict]:
    return {name: dag.params.get_param(name).schema for name in dag.params}


def _form_takes(dag, name: str, value, ok: bool, match: str | None = None) -> None:
    """Set one Param on a copy of the form, as the UI or a trigger's conf would, and check
    the form takes the value or refuses it naming the field (or ``match``)."""
    import copy

    params = copy.deepcopy(dag.params)  # setting a value writes through to the Param
    if ok:
        params[name] = value
        params.validate()
    else:
        with pytest.raises(Exception, match=match or name):
            params[name] = value
            params.validate()


def test_every_param_sits_in_a_section_and_is_described(dag):
    schemas = _schemas(dag)
    for name, schema in schemas.items():
        assert schema.get("section") in SECTIONS, name
        assert len(dag.params.get_param(name).description or "") > 15, name
    # the form shows sections in order of first appearance: the order a user fills them
    first_seen = list(dict.fromkeys(s["section"] for s in schemas.values()))
    assert first_seen == SECTIONS


def test_templates_is_a_multi_select_of_the_shipped_styles(dag):
    """Airflow's form renders an array with `examples` as a multi-select (a bare array
    is a free-text box, one value per line)."""
    schema = _schemas(dag)["templates"]
    assert schema["type"] == "array"
    assert sorted(schema["examples"]) == SHIPPED_STYLES and len(SHIPPED_STYLES) == 12


@pytest.mark.parametrize(("value", "ok"), [
    (["terse-v2"], True), (["qa", "my_style.3"], True),  # ids of a folder of one's own
    (["a,b"], False), (["../x"], False), ([""], False),  # would split or leave the folder
])
def test_the_form_takes_any_template_id_that_is_a_file_name(dag, value, ok):
    _form_takes(dag, "templates", value, ok, "templates|does not match")


@pytest.mark.parametrize(("value", "ok"), [
    (None, True), ("file:///team/templates", True), ("s3://lab/templates/v3", True),
    ("team/templates", False), ("gs://lab/templates", False),
])
def test_templates_url_is_empty_or_a_file_or_s3_url(dag, value, ok):
    assert dag.params["templates_url"] is None  # default: the shipped templates
    _form_takes(dag, "templates_url", value, ok, "templates_url|does not match")


@pytest.mark.parametrize(("value", "ok"), [
    (None, True), ("question", True), ("question,answer,choices", True),
    ("question, answer", True), ("", False), ("question,,answer", False), (" , ", False),
    ("question,", False),
])
def test_benchmark_columns_is_empty_or_comma_separated_names(dag, value, ok):
    assert dag.params["benchmark_columns"] is None  # default: every column of text
    _form_takes(dag, "benchmark_columns", value, ok, "benchmark_columns|does not match")


def _template_folder(tmp_path, *ids: str) -> str:
    for template_id in ids:
        (tmp_path / f"{template_id}.json").write_text("{}")  # the engine checks contents
    return f"file://{tmp_path}"


def test_without_templates_url_only_shipped_ids_pass(dag):
    params = {**_defaults(dag), "templates": ["qa", "terse", "wordy"]}
    assert problems(params, {}, dag.params.keys()) == [
        "templates=['terse', 'wordy']: not shipped templates (shipped: "
        f"{sorted(SHIPPED_STYLES)}); set templates_url to the folder that holds them"]


def test_with_templates_url_the_folders_ids_pass_and_others_are_named(dag, tmp_path):
    url = _template_folder(tmp_path, "terse", "wordy")
    (tmp_path / "notes.txt").write_text("not a template")
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "qa.json").write_text("{}")  # a subfolder's: not the folder's
    ok = {**_defaults(dag), "templates": ["terse", "wordy"], "templates_url": url}
    assert problems(ok, {}, dag.params.keys()) == []
    bad = {**ok, "templates": ["terse", "qa", "notes"]}
    assert problems(bad, {}, dag.params.keys()) == [
        f"templates=['notes', 'qa']: not in templates_url={url} (there: ['terse', 'wordy'])"]


def test_a_templates_url_that_cannot_be_listed_is_named(dag, tmp_path):
    url = f"file://{tmp_path}/missing"
    params = {**_defaults(dag), "templates_url": url}
    (problem,) = problems(params, {}, dag.params.keys())
    assert problem.startswith(f"templates_url={url}: cannot list the folder (")
    assert "No such file or directory" in problem


def test_a_templates_url_on_s3_is_listed_through_the_s3_hook(dag, monkeypatch):
    from tests.support.moto import moto_s3

    with moto_s3(monkeypatch) as s3:
        s3.create_bucket("prompts-lab")
        s3.seed("prompts-lab", ["team/v3/terse.json", "team/v3/wordy.json",
                                "team/v3/old/qa.json", "team/v30/qa.json"])
        params = {**_defaults(dag), "templates": ["terse", "qa"],
                  "templates_url": "s3://prompts-lab/team/v3"}
        assert problems(params, {}, dag.params.keys()) == [
            "templates=['qa']: not in templates_url=s3://prompts-lab/team/v3 "
            "(there: ['terse', 'wordy'])"]


@pytest.mark.parametrize("name", ["source", "output_root", "warehouse"])
@pytest.mark.parametrize(("value", "ok"), [
    ("file:///data/corpus", True), ("s3://bucket/corpus", True),
    ("var/corpus", False), ("/abs/path", False), ("gs://bucket/x", False), ("file://", False),
])
def test_locations_must_be_file_or_s3_urls(dag, name, value, ok):
    _form_takes(dag, name, value, ok)


def test_check_params_runs_first_and_is_never_retried(dag):
    check = dag.get_task("check_params")
    assert check.upstream_task_ids == set()
    assert "crawl_metadata" in check.downstream_task_ids
    assert check.retries == 0
    assert dag.get_task("crawl_metadata").upstream_task_ids == {"check_params"}


def _defaults(dag) -> dict:
    return {name: dag.params[name] for name in dag.params}


def test_defaults_pass_the_rules(dag):
    assert problems(_defaults(dag), {}, dag.params.keys()) == []


@pytest.mark.parametrize(("change", "named"), [
    ({"templates": ["qa", "faq"], "styles_per_doc": 3}, "styles_per_doc=3: more than the 2"),
    ({"templates": ["qa", "qa"], "styles_per_doc": 2}, "styles_per_doc=2: more than the 1"),
    ({"shard_tokens": 2048, "max_model_len": 4096}, "shard_tokens=2048: below max_model_len"),
    # one window: the engine's may be larger than stitch's, never smaller (rephrase fails)
    ({"engine_args": {"max_model_len": 1024}}, "engine_args max_model_len=1024: below "
                                               "max_model_len=2048"),
])
def test_rules_between_fields_name_the_field(dag, change, named):
    params = {**_defaults(dag), **change}
    (problem,) = problems(params, change, dag.params.keys())
    assert named in problem


def test_an_engine_window_at_least_stitchs_passes(dag):
    for window in (2048, 4096):
        change = {"engine_args": {"max_model_len": window}}
        assert problems({**_defaults(dag), **change}, change, dag.params.keys()) == []


def test_an_unknown_conf_key_is_named_with_the_closest_param(dag):
    conf = {"shard_token": 4096, "zzz": 1}
    found = problems({**_defaults(dag), **conf}, conf, dag.params.keys())
    assert found == [
        "conf key 'shard_token': not a Param of this DAG (did you mean 'shard_tokens'?); "
        "it would be ignored",
        "conf key 'zzz': not a Param of this DAG; it would be ignored",
    ]


@pytest.mark.parametrize(("value", "ok"), [
    ("auto", True), (128, True), ("128", True), (8192, True),
    ("lots", False), (0, False), ("0", False), (9000, False), ("", False),
])
def test_max_new_tokens_is_auto_or_a_number(dag, value, ok):
    _form_takes(dag, "max_new_tokens", value, ok,
                "max_new_tokens|does not match|minimum|maximum")


def test_max_new_tokens_defaults_to_auto():
    from airflow.dag_processing.dagbag import DagBag

    dag = DagBag(dag_folder=str(ROOT / "dags")).dags["synthetic_rephrase"]
    assert dag.params["max_new_tokens"] == "auto"  # each row sized to its source


def test_routing_is_off_by_default_and_lists_the_shipped_routes(dag):
    """ADR 0139: the form shows the shipped table, read from its JSON file."""
    schema = _schemas(dag)
    assert _defaults(dag)["routing"] is False and _defaults(dag)["domain_column"] is None
    description = dag.params.get_param("routing").description
    table = json.loads((ROOT / "synthfactory" / "templates" / "routing.json").read_text())
    for domain, by in table["routes"].items():
        for bucket, ids in by.items():
            assert f"{domain} {bucket}: {', '.join(ids)}" in description
    assert schema["routing"]["type"] == "boolean"


def test_with_routing_the_templates_rules_step_aside(dag):
    params = {**_defaults(dag), "routing": True, "templates": ["encyclopedic"],
              "styles_per_doc": 3}
    assert problems(params, {}, dag.params.keys()) == []



@pytest.mark.parametrize(("name", "value", "ok"), [
    ("max_attempts", 1, True), ("max_attempts", 3, True), ("max_attempts", 5, True),
    ("max_attempts", 0, False), ("max_attempts", -1, False), ("max_attempts", "x", False),
    ("max_attempts", "", False), ("max_attempts", 2.5, False),
    ("repair", "trim", True), ("repair", "none", True), ("repair", "cut", False),
    ("repair", "", False),
])
def test_max_attempts_and_repair_are_refused_by_the_form(dag, name, value, ok):
    """max_attempts a whole number from 1 (1: one attempt a row, the behaviour before
    docs/adr/0141), repair trim or none: refused by the form (and by a trigger's conf)
    before any task runs."""
    assert (dag.params["max_attempts"], dag.params["repair"]) == (3, "trim")
    _form_takes(dag, name, value, ok)


def test_the_engine_values_are_the_registrys_and_former_ones_still_run(dag, caplog):
    """The form offers the registry's names (docs/adr/0144); a saved conf with a former
    value (offline, openai) still validates, and check_params logs one deprecation line
    naming the old and the new value."""
    import logging

    from synthfactory.contract import engine_names

    schema = _schemas(dag)["engine"]
    assert schema["enum"][:2] == ["vllm", "endpoint"] == list(engine_names.FORM_ENGINES)
    assert dag.params["engine"] == "vllm"
    for value in ("vllm", "endpoint", "offline", "openai"):
        _form_takes(dag, "engine", value, ok=True)
    _form_takes(dag, "engine", "gpt", ok=False)
    check = dag.get_task("check_params").python_callable
    with caplog.at_level(logging.WARNING):
        check(params={**_defaults(dag), "engine": "offline"}, dag_run=None)
        check(params=_defaults(dag), dag_run=None)
    lines = [r.getMessage() for r in caplog.records if "deprecated" in r.getMessage()]
    assert lines == ["engine='offline' is deprecated, use engine='vllm'"]
