"""synthfactory.contract, the one package both sides of the wall import: standard
library only, one password rule, the shipped styles, and docs/contracts.md's key lists
equal to its TypedDicts."""

from __future__ import annotations

import ast
import json
import re
import sys
from pathlib import Path

import pytest

import synthfactory.contract as contract
from synthfactory.contract import NO_PASSWORD_PATTERN, STYLES, RunFolder, has_password
from synthfactory.errors import PermanentError, RetryableError, SynthfactoryError, same_kind
from synthfactory.report_figures import build_report, reason_kind, shard_figures
from tests.support.contract_shapes import CONTRACTS_MD, documented_keys, shape_paths
from tests.support.paths import ROOT

CONTRACT = ROOT / "synthfactory" / "contract"
TEMPLATES = ROOT / "synthfactory" / "templates"
JSON_SHAPES = ("ManifestSummary", "ShardsJson", "CommittedJson", "ValidationJson",
               "PlanGroup", "ReportJson")


def _imported(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    return names


def test_the_contract_imports_only_the_standard_library():
    files = sorted(CONTRACT.glob("*.py"))
    assert files
    outside = {str(p.relative_to(ROOT)): sorted(
        n for n in _imported(p) if n.split(".")[0] not in sys.stdlib_module_names
        and n != "synthfactory.contract" and not n.startswith("synthfactory.contract."))
        for p in files}
    assert {k: v for k, v in outside.items() if v} == {}


@pytest.mark.parametrize("reason, kind", [
    ("too long for the context window (1900 prompt + 128 new tokens > 2048)",
     "too long for the context window"),
    ("engine rejected the request: prompt too long", "engine rejected the request"),
    ("duplicate id", "duplicate id"),
    ("empty output", "empty output"),
    ("", "unknown"),
    (None, "unknown"),
    (": nothing before the colon", "unknown"),
])
def test_a_reason_is_counted_by_its_kind(reason, kind):
    assert reason_kind(reason) == kind


URIS = {  # uri -> holds a password
    "sqlite:////abs/var/catalog/catalog.db": False,
    "": False,
    "postgresql+psycopg2://sf@db:5432/catalog": False,
    "postgresql+psycopg2://sf:@db:5432/catalog": False,  # an empty password is none
    "postgresql://db/catalog?sslmode=require&application_name=sf": False,
    "postgresql://db/catalog?password=": False,
    "postgresql://db/catalog?password=#fragment": False,
    "postgresql+psycopg2://sf:hunter2@db:5432/catalog": True,
    "postgresql://u:p%40ss@h/db": True,
    "sf:hunter2@db/catalog": True,  # no scheme: urlsplit would misread it
    "postgresql://db/catalog?user=sf&password=hunter2": True,
    "postgresql://db/catalog?PASSWORD=x": True,
    "postgresql://db/catalog?sslmode=require&Pwd=x": True,
    "mysql://db/c?passwd=x&user=sf": True,
}


@pytest.mark.parametrize("uri", sorted(URIS))
def test_the_param_pattern_and_has_password_are_one_rule(uri):
    assert has_password(uri) is URIS[uri]
    # The DAG's Param validates with JSON schema `pattern` (a search): the same answer.
    assert (re.search(NO_PASSWORD_PATTERN, uri) is None) is URIS[uri]


def test_the_pattern_stays_usable_as_a_json_schema_pattern():
    # ECMAScript has neither inline flags nor Python's named groups
    assert "(?i" not in NO_PASSWORD_PATTERN and "(?P" not in NO_PASSWORD_PATTERN


def test_styles_are_the_shipped_templates():
    files = {p.stem: json.loads(p.read_text()) for p in TEMPLATES.glob("*.json")
             if p.name != "routing.json"}  # the routing table, not a template (ADR 0139)
    assert len(set(STYLES)) == len(STYLES)
    assert sorted(STYLES) == sorted(files)
    assert {name: t["style"] for name, t in files.items()} == {s: s for s in STYLES}


def test_an_error_is_not_retried_unless_it_is_retryable():
    assert SynthfactoryError("x").exit_code == contract.EXIT_PERMANENT  # the default
    assert PermanentError("x").exit_code == contract.EXIT_PERMANENT  # the old spelling
    assert RetryableError("x").exit_code == contract.EXIT_RETRYABLE
    assert contract.EXIT_PERMANENT in contract.NOT_RETRYABLE
    assert contract.EXIT_RETRYABLE not in contract.NOT_RETRYABLE
    assert contract.EXIT_USAGE in contract.NOT_RETRYABLE
    assert isinstance(RetryableError("x"), SynthfactoryError)  # every except clause sees it
    assert not isinstance(SynthfactoryError("x"), PermanentError)  # its except stays narrow


def test_a_wrapper_keeps_the_retry_class():
    assert type(same_kind(RetryableError("timed out"), "spec: timed out")) is RetryableError
    assert type(same_kind(PermanentError("bad"), "spec: bad")) is SynthfactoryError
    assert str(same_kind(SynthfactoryError("bad"), "spec: bad")) == "spec: bad"


@pytest.mark.parametrize("name", JSON_SHAPES)
def test_contracts_md_lists_each_shapes_keys(name):
    documented = documented_keys()
    assert name in documented, f"{CONTRACTS_MD.name}: no <!-- keys: {name} --> block"
    shape = shape_paths(getattr(contract, name))
    assert sorted(documented[name] - shape) == [], (
        f"{CONTRACTS_MD.name} lists these keys for {name}, which synthfactory.contract "
        "does not have")
    assert sorted(shape - documented[name]) == [], (
        f"synthfactory.contract's {name} has these keys, which {CONTRACTS_MD.name} "
        "does not list")


def test_the_docs_parser_sees_a_missing_and_an_extra_key():
    text = ("<!-- keys: X -->\n- `a`, `b`: two\n  - `c`: under each\n- `d`\n"
            "  continued: `e` is prose\n<!-- /keys -->\n")
    assert documented_keys(text) == {"X": {"a", "b", "a.c", "b.c", "d"}}


def _reader(files: dict[str, dict]):
    return lambda url: files.get(url.removeprefix("mem://run/"))


def test_a_run_without_commits_reads_as_missing_and_counts_nothing():
    plan = {"shards": [{"name": "shard-00000", "url": "mem://p0", "rows": 4, "tokens": 9}],
            "templates": [{"id": "qa", "version": 1, "style": "qa"}], "rows_in": 5,
            "prompt_rows": 4, "quarantined": 1, "styles_per_doc": 1, "shard_tokens": 8192,
            "quarantine_reasons": {"too long for the context window (9 > 8)": 1}}
    files = RunFolder("mem://run/", _reader({"prompts/shards.json": plan})).read()
    assert files.missing == (
        "manifest/_SUMMARY.json: not written (crawl_metadata has not finished)",
        "generated/shard-00000/_COMMITTED.json: not written (shard.rephrase is running or "
        "failed)",
        "validation/shard-00000.json: not written (shard.validate has not finished)",
        "joined/_JOINED.json: not written (join_chunks has not finished)")
    report = build_report("mem://run", files, [shard_figures(s) for s in files.shards])
    assert report["complete"] is False and report["cost"] is None
    assert report["stitch"]["quarantined_by_reason"] == {"too long for the context window": 1}
    assert report["shards"][0]["rows_in"] == 4 and report["shards"][0]["committed"] is False
    assert report["rephrase"]["rows_generated"] == 0 == report["tokens"]["output"]


def test_the_report_figures_import_only_the_standard_library_and_the_contract():
    """The Airflow image carries synthfactory/report_figures/ beside the contract and
    nothing else of the engine (docs/adr/0146): an import of anything else would fail
    in the API server."""
    files = sorted((ROOT / "synthfactory" / "report_figures").glob("*.py"))
    assert files
    ours = ("synthfactory.contract", "synthfactory.report_figures")
    outside = {str(p.relative_to(ROOT)): sorted(
        n for n in _imported(p) if n.split(".")[0] not in sys.stdlib_module_names
        and n not in ours and not n.startswith(tuple(f"{o}." for o in ours)))
        for p in files}
    assert {k: v for k, v in outside.items() if v} == {}
