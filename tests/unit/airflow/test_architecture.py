"""The two walls of the architecture, and the style rules, checked on every run."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import ROOT

HEAVY = {"vllm", "torch", "pyspark", "ray", "grain", "transformers"}
CONTRACT = "synthfactory.contract"  # the one module of the engine both sides import


def _imports(path: Path, module_level_only: bool) -> set[str]:
    tree = ast.parse(path.read_text())
    nodes = tree.body if module_level_only else list(ast.walk(tree))
    names = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def _engine_modules(path: Path) -> set[str]:
    """The engine's modules that ``path`` imports, the contract and its submodules excepted."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module == "synthfactory":
            names |= {f"synthfactory.{alias.name}" for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return {n for n in names if n.split(".")[0] == "synthfactory"
            and n != CONTRACT and not n.startswith(CONTRACT + ".")}


def test_engine_never_imports_airflow():
    offenders = [str(p.relative_to(ROOT)) for p in (ROOT / "synthfactory").rglob("*.py")
                 if "airflow" in _imports(p, module_level_only=False)]
    assert offenders == []


@pytest.mark.parametrize("layer", ["dags", "operators", "plugins"])
def test_airflow_layer_never_imports_engine_libraries(layer):
    offenders = {str(p.relative_to(ROOT)): sorted((_imports(p, False) & HEAVY)
                                                  | _engine_modules(p))
                 for p in (ROOT / layer).rglob("*.py")}
    assert {k: v for k, v in offenders.items() if v} == {}


def test_only_the_contract_crosses_the_wall(tmp_path):
    step = tmp_path / "step.py"
    step.write_text("from synthfactory.contract import STYLES\n"
                    "import synthfactory.contract.paths\n"
                    "from synthfactory import contract, storage\n"
                    "def later():\n    from synthfactory.layout import RunLayout\n")
    assert _engine_modules(step) == {"synthfactory.storage", "synthfactory.layout"}


def test_ruff_is_clean():
    ruff = Path(sys.executable).parent / "ruff"
    result = subprocess.run([str(ruff), "check", "--output-format", "concise", str(ROOT)],
                            capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stdout[-3000:]
