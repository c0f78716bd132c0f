"""Every benchmark's figures say their machine (a figure means little without the CPU
and load it was measured under): its RESULT line goes through
``benchmarks/machine.py``'s ``result_line`` (``... isa=<the CPU's vector extensions>``,
isa last), it prints ``machine: isa=... load ...`` before and after its measurement, and
its docstring's RESULT format ends with ``isa=``. Read from each benchmark's source
(ast): running them takes minutes to hours."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import pytest

from tests.support.paths import ROOT

BENCHMARKS = ROOT / "benchmarks"
HELPER = "machine"
# Benchmarks whose RESULT name docs quote, each with that name: all must be found below
# (every other benchmark that prints a RESULT line is checked too, without a fixed name).
NAMED = {"capacity.py": "capacity", "crawl.py": "crawl", "endpoint.py": "endpoint",
         "gpu_smoke.py": "gpu_smoke", "lengths.py": "lengths",
         "orchestration.py": "orchestration", "quality.py": "quality_gate",
         "rephrase.py": "rephrase", "stitch.py": "stitch",
         "stitch_cluster.py": "stitch_cluster", "stitch_chunks.py": "stitch_chunks",
         "sweep.py": "sweep",
         "engine_defaults.py": "engine_defaults", "engine_core.py": "engine_core",
         "metrics_overhead.py": "metrics_overhead", "coverage.py": "coverage",
         "decontaminate.py": "decontaminate", "judge_agreement.py": "judge_agreement",
         "grounding.py": "grounding"}
# The lines whose format puts isa= first ("RESULT engine_defaults isa=... ...", as
# docs/rephrase.md records them): they pass isa_first=True; every other keeps it last.
ISA_FIRST = {"engine_defaults.py"}


def _machine():
    spec = importlib.util.spec_from_file_location("benchmarks_machine",
                                                  BENCHMARKS / f"{HELPER}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _texts(node: ast.AST) -> list[str]:
    """The literal text of a string constant or of an f-string's literal parts."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.JoinedStr):
        return [v.value for v in node.values if isinstance(v, ast.Constant)]
    return []


def _name(call: ast.Call) -> str:
    func = call.func
    return func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")


def _calls(tree: ast.AST, name: str) -> list[ast.Call]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.Call) and _name(n) == name]


def _prints_result(tree: ast.AST) -> bool:
    """Whether the module prints a RESULT line of its own or through the helper."""
    docstring = ast.get_docstring(tree, clean=False)
    for node in ast.walk(tree):
        if any(t.startswith("RESULT ") for t in _texts(node)) and \
                not (isinstance(node, ast.Constant) and node.value == docstring):
            return True
    return bool(_calls(tree, "result_line"))


def _benchmarks() -> list[Path]:
    found = []
    for path in sorted(BENCHMARKS.glob("*.py")):
        if path.name == f"{HELPER}.py":
            continue
        if _prints_result(ast.parse(path.read_text(), str(path))):
            found.append(path)
    return found


def test_every_named_benchmark_is_checked():
    assert set(NAMED) <= {p.name for p in _benchmarks()}


@pytest.mark.parametrize("path", _benchmarks(), ids=lambda p: p.name)
def test_result_line_goes_through_the_helper(path: Path):
    tree = ast.parse(path.read_text(), str(path))
    docstring = ast.get_docstring(tree, clean=False) or ""
    imported = {alias.name for node in ast.walk(tree)
                if isinstance(node, ast.ImportFrom) and node.module == HELPER
                for alias in node.names}
    assert {"result_line", "print_machine"} <= imported, \
        f"{path.name}: from machine import print_machine, result_line"

    # no RESULT line built by hand: every one is result_line's
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and node.value == docstring:
            continue
        for text in _texts(node):
            assert not text.lstrip().startswith("RESULT "), \
                f"{path.name}:{node.lineno}: a RESULT line not made by result_line"

    results = _calls(tree, "result_line")
    assert results, f"{path.name}: no result_line call"
    printed = {id(arg) for call in _calls(tree, "print") for arg in call.args}
    for call in results:
        where = f"{path.name}:{call.lineno}"
        assert id(call) in printed, f"{where}: result_line's line is not printed"
        assert call.args and isinstance(call.args[0], ast.Constant) and \
            isinstance(call.args[0].value, str), f"{where}: the RESULT name is not a literal"
        if path.name in NAMED:
            assert call.args[0].value == NAMED[path.name], where
        keywords = [k.arg for k in call.keywords]
        assert None not in keywords and "isa" not in keywords, \
            f"{where}: fields by name only; isa is the helper's, last"
        assert ("isa_first" in keywords) == (path.name in ISA_FIRST), \
            f"{where}: isa_first only where isa= comes first ({sorted(ISA_FIRST)})"

    # the load before and after the measurement, and nothing printed after RESULT
    assert len(_calls(tree, "print_machine")) >= 2, \
        f"{path.name}: print_machine() before and after the measurement"
    for func in ast.walk(tree):
        if not isinstance(func, ast.FunctionDef):
            continue
        ends = [c.lineno for c in results if any(c is n for n in ast.walk(func))]
        if not ends:
            continue
        later = [c.lineno for name in ("print", "print_machine") for c in _calls(func, name)
                 if c.lineno > max(ends)]
        assert not later, f"{path.name}:{later}: printed after the RESULT line"

    # the docstring spells the line with isa= at its end
    assert "RESULT " in docstring, f"{path.name}: its docstring does not give its RESULT line"
    spelled = docstring[docstring.index("RESULT "):]
    assert "isa=" in spelled, f"{path.name}: its docstring's RESULT line lacks isa="


def test_result_line_ends_with_isa(monkeypatch):
    machine = _machine()
    monkeypatch.setenv("SYNTHFACTORY_CPU_FLAGS", "avx2,avx512f")
    line = machine.result_line("capacity", nodes=1000, fit_ms=f"{264.04:.1f}", spread="1..2")
    assert line == "RESULT capacity nodes=1000 fit_ms=264.0 spread=1..2 isa=avx2,avx512f"
    assert line.split()[-1] == "isa=avx2,avx512f"


def test_isa_first_puts_it_after_the_name(monkeypatch):
    monkeypatch.setenv("SYNTHFACTORY_CPU_FLAGS", "avx2")
    machine = _machine()
    assert machine.result_line("engine_defaults", isa_first=True, ratio="0.95") == \
        "RESULT engine_defaults isa=avx2 ratio=0.95"


def test_isa_names_the_flags_in_their_order_or_none(monkeypatch):
    machine = _machine()
    monkeypatch.setenv("SYNTHFACTORY_CPU_FLAGS", "amx_bf16,fma,avx512_bf16,avx512f,avx2,sse4_2")
    assert machine.result_line("x").endswith(" isa=avx2,avx512f,avx512_bf16,amx_bf16")
    monkeypatch.setenv("SYNTHFACTORY_CPU_FLAGS", "none")
    assert machine.result_line("x", a=1) == "RESULT x a=1 isa=none"


def test_fields_stay_one_token_each(monkeypatch):
    machine = _machine()
    monkeypatch.setenv("SYNTHFACTORY_CPU_FLAGS", "avx2")
    assert machine.result_line("x", device="cuda 0", empty="") == \
        "RESULT x device=cuda_0 empty=- isa=avx2"
    with pytest.raises(ValueError):
        machine.result_line("x", isa="avx2")


def test_machine_line(monkeypatch, capsys):
    machine = _machine()
    monkeypatch.setenv("SYNTHFACTORY_CPU_FLAGS", "avx2,avx512f")
    line = machine.machine_line()
    assert line.startswith("machine: isa=avx2,avx512f load ")
    words = line.split()
    assert len(words) == 6 or words[-1] == "n/a", line
    machine.print_machine()
    out = capsys.readouterr().out
    assert out.startswith("machine: isa=avx2,avx512f load ") and out.count("\n") == 1
