"""The two walls of the architecture, and the style rules, checked on every run."""

from __future__ import annotations

import ast
import os
import shutil
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


# The engine's, operators/' and plugins/' imports are import-linter's ([tool.importlinter] in
# pyproject.toml, `make check`; tests below). dags/ is a folder of DAG files, not a
# package the linter can read: its imports are checked here.
def test_dag_files_never_import_engine_libraries():
    offenders = {str(p.relative_to(ROOT)): sorted((_imports(p, False) & HEAVY)
                                                  | _engine_modules(p))
                 for p in (ROOT / "dags").rglob("*.py")}
    assert {k: v for k, v in offenders.items() if v} == {}


def _lint_imports(root: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(Path(sys.executable).parent / "lint-imports"), "--no-cache"],
                          capture_output=True, text=True, cwd=root,
                          env={**os.environ, "PYTHONPATH": str(root)})


def test_the_import_contracts_are_kept():
    result = _lint_imports(ROOT)
    assert result.returncode == 0, result.stdout[-3000:]
    assert "6 kept, 0 broken" in result.stdout


@pytest.fixture
def copy_of_the_code(tmp_path):
    """The packages as the linter reads them, copied: synthfactory_airflow is a namespace
    holding operators/ and plugins/ (setup.py), found here before the installed ones."""
    skip = shutil.ignore_patterns("__pycache__")
    shutil.copytree(ROOT / "synthfactory", tmp_path / "synthfactory", ignore=skip)
    for layer in ("operators", "plugins"):
        shutil.copytree(ROOT / layer, tmp_path / "synthfactory_airflow" / layer, ignore=skip)
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    return tmp_path


@pytest.mark.parametrize("module, line, contract, names", [
    ("synthfactory_airflow/operators/planted.py", "import synthfactory.storage\n",
     "The wall: the Airflow layer imports the engine only through",
     "synthfactory_airflow.operators.planted -> synthfactory.storage"),
    ("synthfactory_airflow/plugins/planted.py", "import torch\n",
     "The Airflow layer never imports the engine's libraries",
     "synthfactory_airflow.plugins.planted -> torch"),
    ("synthfactory/planted.py", "import airflow\n", "The engine never imports Airflow",
     "synthfactory.planted -> airflow"),
    ("synthfactory/contract/planted.py", "from synthfactory import storage\n",
     "The contract imports nothing of the engine", "synthfactory.contract.planted ->"),
    # a step package reaching up into another that imports it: the cycle the template
    # bounds once made (stitch/budget.py -> quality.bounds, quality -> stitch.templates)
    ("synthfactory/stitch/planted.py", "from synthfactory.quality import gate\n",
     "No cycles between the packages of a layer", ".stitch -> .quality"),
    # the shared layer importing a step
    ("synthfactory/storage_planted.py", "from synthfactory import join\n",
     "The engine's layers", "storage_planted"),
])
def test_a_planted_import_breaks_its_contract(copy_of_the_code, module, line, contract, names):
    (copy_of_the_code / module).write_text(line)
    result = _lint_imports(copy_of_the_code)
    broken = result.stdout[result.stdout.index("Broken contracts"):]
    assert result.returncode == 1 and contract in broken and names in broken, result.stdout


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
