"""Engines are objects (docs/adr/0135): every behaviour that differs by engine is its
entry's in synthfactory/rephrase/engine_registry/, so no other module branches on an
engine's name. Read with ``ast``, not grep: a comparison or a ``match`` whose one side is
an engine's name ("vllm", "openai", "echo", "endpoint") and whose other side is an
engine's attribute or variable (a name, attribute or key holding "engine"), wherever it
is written and however it is spelt (``args.engine == "openai"``, ``"vllm" != spec.engine``,
``spec["engine"] in ("echo", "vllm")``, ``match args.engine: case "echo":``).
A planted branch is found, and the message says where and what to do instead."""

from __future__ import annotations

import argparse
import ast
import dataclasses
import pickle
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from synthfactory.errors import SynthfactoryError
from synthfactory.rephrase import engine_registry
from synthfactory.rephrase.engine_registry import (
    ALIASES,
    ENGINES,
    REGISTRY,
    EchoSettings,
    EndpointSettings,
    add_engine_arguments,
    engine_kind,
)
from synthfactory.rephrase.engine_spec import EngineSpec
from synthfactory.rephrase.engines import EchoEngine, SlowEcho
from tests.support.paths import ROOT

ENGINE_NAMES = frozenset({"vllm", "openai", "echo", "endpoint", "offline"})
PACKAGE = ROOT / "synthfactory"
REGISTRY_DIR = Path(engine_registry.__file__).resolve().parent
# every tree whose code runs an engine or renders its name: the engine, the Airflow layer
# and the benchmarks (docs/adr/0144)
SCANNED = ("synthfactory", "dags", "operators", "plugins", "benchmarks")
# the names' own home, beside the registry: the contract module both sides read
NAMES_MODULE = ROOT / "synthfactory/contract/engine_names.py"


def _names(node: ast.AST) -> set[str]:
    """The engine names among the string constants ``node`` is or holds (a tuple, list
    or set of them: ``in ("vllm", "echo")``)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value} & ENGINE_NAMES
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return set().union(*(_names(e) for e in node.elts)) if node.elts else set()
    return set()


def _is_engine(node: ast.AST) -> bool:
    """Looks like an engine's attribute or variable: ``engine``, ``args.engine``,
    ``spec.engine_name``, ``spec["engine"]``, ``spec.get("engine")``."""
    for part in ast.walk(node):
        text = (part.id if isinstance(part, ast.Name)
                else part.attr if isinstance(part, ast.Attribute)
                else part.value if isinstance(part, ast.Constant)
                and isinstance(part.value, str) else "")
        if "engine" in text.lower():
            return True
    return False


def _pattern_names(pattern: ast.AST) -> set[str]:
    """The engine names a ``case`` pattern matches (``case "echo" | "vllm":``)."""
    found: set[str] = set()
    for part in ast.walk(pattern):
        if isinstance(part, ast.MatchValue):
            found |= _names(part.value)
    return found


def _jinja_names(node) -> set[str]:
    from jinja2 import nodes

    if isinstance(node, nodes.Const) and isinstance(node.value, str):
        return {node.value} & ENGINE_NAMES
    if isinstance(node, nodes.Tuple | nodes.List):
        return set().union(*(_jinja_names(e) for e in node.items)) if node.items else set()
    return set()


def _jinja_is_engine(node) -> bool:
    from jinja2 import nodes

    return any("engine" in (part.name if isinstance(part, nodes.Name) else part.attr
                            if isinstance(part, nodes.Getattr) else "").lower()
               for part in [node, *node.find_all((nodes.Name, nodes.Getattr))])


def jinja_branches(template: str) -> list[tuple[str, set[str]]]:
    """(the comparison, the names) for each comparison of an engine's name in a Jinja
    template (``params.engine == 'endpoint'``, ``'vllm' != params.engine``)."""
    from jinja2 import Environment, TemplateSyntaxError, nodes

    try:
        parsed = Environment().parse(template)
    except TemplateSyntaxError:  # "{{" in a str.format pattern or a doc: not a template
        return []
    found = []
    for compare in parsed.find_all(nodes.Compare):
        sides = [compare.expr, *(op.expr for op in compare.ops)]
        for i, side in enumerate(sides):
            names = _jinja_names(side)
            others = sides[:i] + sides[i + 1:]
            if names and any(_jinja_is_engine(o) and not _jinja_names(o) for o in others):
                found.append((template, names))
                break
    return found


def engine_branches(source: str, filename: str) -> list[str]:
    """``file:line: ...`` for each branch on an engine's name in ``source``, Python or
    in a Jinja template written as a string in it."""
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and "{{" in node.value:
            found += [(node.lineno, f"Jinja {code!r}", names)
                      for code, names in jinja_branches(node.value)]
        elif isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            for i, side in enumerate(sides):
                names = _names(side)
                others = sides[:i] + sides[i + 1:]
                if names and any(_is_engine(o) and not _names(o) for o in others):
                    found.append((node.lineno, ast.unparse(node), names))
                    break
        elif isinstance(node, ast.Match) and _is_engine(node.subject):
            names = set().union(*(_pattern_names(c.pattern) for c in node.cases))
            if names:
                found.append((node.lineno, f"match {ast.unparse(node.subject)}", names))
    return [f"{filename}:{line}: `{code}` branches on the engine's name "
            f"({', '.join(sorted(names))})" for line, code, names in sorted(found)]


def message(branches: list[str]) -> str:
    return ("branches on an engine's name outside the engine registry:\n  "
            + "\n  ".join(branches)
            + "\nadd the behaviour to the engine's registry entry instead (a method of "
              "EngineKind in synthfactory/rephrase/engine_registry/base.py, answered by "
              "each engine's module there) and call it through engine_kind(name)")


def branches_under(package: Path, registry: Path, root: Path,
                   names_module: Path = NAMES_MODULE) -> list[str]:
    """Every branch on an engine's name in the modules under ``package``, those under
    ``registry`` (the registry's own modules) and ``names_module`` left out; paths
    relative to ``root``."""
    modules = sorted(p for p in package.rglob("*.py")
                     if registry.resolve() not in p.resolve().parents
                     and p.resolve() != names_module.resolve())
    return [b for path in modules
            for b in engine_branches(path.read_text(), str(path.relative_to(root)))]


def test_no_module_outside_the_registry_branches_on_an_engine_name():
    assert (PACKAGE / "rephrase/command.py").is_file() and REGISTRY_DIR.is_relative_to(PACKAGE)
    branches = [b for tree in SCANNED for b in branches_under(ROOT / tree, REGISTRY_DIR, ROOT)]
    assert not branches, message(branches)


def table_templates(table) -> list[str]:
    """Every Jinja string the steps table renders: each flag's template and each step's
    argv (a boolean flag's is built there), plan's rephrase options included."""
    return [*(flag.template for step in table.STEPS.values() for flag in step.flags
              if flag.template),
            *(item for step in table.STEPS for item in table.argv(step) if "{{" in item),
            *table.passed_on("rephrase")]


def table_branches(table) -> list[str]:
    return [f"the steps table: Jinja {code!r} branches on the engine's name "
            f"({', '.join(sorted(names))})"
            for template in table_templates(table) for code, names in jinja_branches(template)]


def test_no_jinja_string_of_the_steps_table_compares_an_engine_name():
    from synthfactory.contract import steps

    assert any("params.engine" in t for t in table_templates(steps))
    branches = table_branches(steps)
    assert not branches, message(branches)


def test_a_comparison_planted_in_a_table_template_is_found(monkeypatch):
    from synthfactory.contract import steps

    planted = "{{ 'endpoint' if params.engine == 'endpoint' else 'vllm' }}"
    flags = tuple(dataclasses.replace(f, value=planted) if f.name == "--engine" else f
                  for f in steps.SWEEP.flags)
    monkeypatch.setitem(steps.STEPS, "sweep", dataclasses.replace(steps.SWEEP, flags=flags))
    branches = table_branches(steps)
    assert branches and all("params.engine == 'endpoint'" in b for b in branches)
    with pytest.raises(AssertionError, match="the steps table: Jinja"):
        assert not branches, message(branches)


PLANTED = '''
def run(args, spec, engine_name):
    if args.engine == "openai":
        pass
    gpus = 1.0 if "vllm" != spec.engine else 0.0
    if spec["engine"] in ("echo", "vllm"):
        pass
    match engine_name:
        case "endpoint" | "other":
            pass
    return spec.get("engine") == "echo"
'''

NOT_BRANCHES = '''
def fine(args, config, mode):
    device = "endpoint"  # an assignment, not a branch
    record = {"engine": "echo"}  # a record's value
    if mode == "openai":  # not an engine's attribute
        pass
    if args.engine == args.other_engine:  # no engine's name
        pass
    if "vllm" in ("vllm", "echo"):  # constants on both sides
        pass
    match config:
        case "vllm":  # the subject is not an engine
            pass
'''


def test_a_planted_branch_is_found_with_its_file_line_and_what_to_do():
    found = engine_branches(textwrap.dedent(PLANTED), "synthfactory/planted.py")
    assert [line.split(":")[1] for line in found] == ["3", "5", "6", "8", "11"]
    assert found[0] == ("synthfactory/planted.py:3: `args.engine == 'openai'` branches on "
                        "the engine's name (openai)")
    text = message(found)
    assert "synthfactory/planted.py:8: `match engine_name` branches on the engine's name " \
           "(endpoint)" in text
    assert "add the behaviour to the engine's registry entry" in text
    assert engine_branches(textwrap.dedent(NOT_BRANCHES), "synthfactory/fine.py") == []


def test_the_scan_fails_on_a_module_planted_in_the_tree_and_spares_the_registry(tmp_path):
    """The package-wide scan over a copy holding one planted module outside the registry
    and the same branches inside it: it fails, naming the planted module only."""
    package = tmp_path / "synthfactory"
    registry = package / "rephrase" / "engine_registry"
    registry.mkdir(parents=True)
    (package / "planted.py").write_text(textwrap.dedent(PLANTED))
    (registry / "entry.py").write_text(textwrap.dedent(PLANTED))  # the registry's own
    branches = branches_under(package, registry, tmp_path)
    assert len(branches) == 5 and all(b.startswith("synthfactory/planted.py:") for b in branches)
    with pytest.raises(AssertionError, match=re.compile(
            r"synthfactory/planted.py:3: .*add the behaviour to the engine's registry entry",
            re.DOTALL)):
        assert not branches, message(branches)


PLANTED_JINJA = """
def endpoint_kwargs():
    return {"endpoint_conn_id":
            "{{ params.endpoint_conn_id if params.engine in ['openai', 'endpoint'] else '' }}"}
"""


def test_a_jinja_comparison_planted_in_the_airflow_layer_is_found(tmp_path):
    """The scan of operators/ over a copy holding a Jinja string that compares the
    engine's name (the Airflow layer's way to branch): it fails, naming file and line."""
    (tmp_path / "operators" / "runners").mkdir(parents=True)
    (tmp_path / "operators" / "runners" / "planted.py").write_text(PLANTED_JINJA)
    branches = branches_under(tmp_path / "operators", REGISTRY_DIR, tmp_path)
    assert branches == ["operators/runners/planted.py:4: `Jinja \"{{ params.endpoint_conn_id "
                        "if params.engine in ['openai', 'endpoint'] else '' }}\"` branches on "
                        "the engine's name (endpoint, openai)"]
    with pytest.raises(AssertionError, match="operators/runners/planted.py:4"):
        assert not branches, message(branches)


# -- the registry itself -------------------------------------------------------------

def test_the_command_line_names_and_each_command_lists_its_engines():
    assert ENGINES == ("vllm", "echo", "endpoint")  # openai: a hidden alias (docs/adr/0137)
    for command, expected in (("rephrase", ["vllm", "echo", "endpoint"]),
                              ("sweep", ["vllm", "endpoint"])):
        parser = argparse.ArgumentParser()
        add_engine_arguments(parser, command)
        action = next(a for a in parser._actions if a.dest == "engine")
        assert list(action.choices) == expected and action.default == "vllm"
        flags = {a.dest for a in parser._actions}
        assert {"endpoint", "served_model", "endpoint_retry_s"} <= flags
        assert ("echo_delay_s" in flags) == (command == "rephrase")


def test_an_unknown_engine_name_fails_in_one_line():
    with pytest.raises(SynthfactoryError, match=r"--engine 'gpt': expected one of "
                                                r"\('vllm', 'echo', 'endpoint'\)"):
        engine_kind("gpt")
    with pytest.raises(SynthfactoryError, match="expected one of"):
        EngineSpec(model="m", engine="gpt").build()


def test_a_spec_with_its_engine_settings_pickles_and_builds():
    """A Ray replica builds its engine from a pickled spec."""
    for settings, built in ((None, EchoEngine), (EchoSettings(delay_s=0.01), SlowEcho)):
        spec = pickle.loads(pickle.dumps(EngineSpec(model="m", engine="echo",
                                                    settings=settings)))
        engine = spec.build()
        assert type(engine) is built and engine.engine_args == {"engine": "echo"}
    spec = EngineSpec(model="m", engine="endpoint", settings=EndpointSettings(url="http://x"))
    assert pickle.loads(pickle.dumps(spec)) == spec


def test_every_entry_answers_for_the_commands_it_names():
    for name, kind in REGISTRY.items():
        assert kind.name == name and kind.commands.get("rephrase")
        if "sweep" in kind.commands:  # the sweep asks these of its engines
            for method in ("check_grid_entry", "trial_engine", "warm_up_budget"):
                assert getattr(type(kind), method) is not getattr(
                    engine_registry.EngineKind, method), f"{name}: no {method}"


def test_the_registry_and_the_commands_import_no_engine_library():
    """The Airflow layer and --help import these; vLLM, torch, httpx and Ray are imported
    where an engine is built."""
    code = ("import sys\n"
            "import synthfactory.rephrase.command, synthfactory.sweep.command\n"
            "import synthfactory.sweep.trial, synthfactory.rephrase.ray_pool\n"
            "print(sorted(m for m in ('vllm', 'torch', 'httpx', 'ray') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=ROOT).stdout
    assert out.strip() == "[]"


def test_the_forms_names_are_the_registrys():
    """One engine name (docs/adr/0144): the forms offer registry names, the command
    line's former names are among the forms', and each maps to a registry name."""
    from synthfactory.contract import engine_names

    assert set(engine_names.FORM_ENGINES) <= set(ENGINES)
    assert set(engine_names.SERVER_ENGINES) <= set(ENGINES)
    assert ALIASES.items() <= engine_names.FORMER_NAMES.items()
    assert set(engine_names.FORMER_NAMES.values()) <= set(ENGINES)
    assert not set(engine_names.FORMER_NAMES) & set(ENGINES)
