"""The two walls of the architecture, and the style rules, checked on every run."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
HEAVY = {"vllm", "torch", "pyspark", "ray", "grain", "transformers"}


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


def test_engine_never_imports_airflow():
    offenders = [str(p.relative_to(ROOT)) for p in (ROOT / "synthfactory").rglob("*.py")
                 if "airflow" in _imports(p, module_level_only=False)]
    assert offenders == []


@pytest.mark.parametrize("layer", ["dags", "operators", "plugins"])
def test_airflow_layer_never_imports_engine_libraries(layer):
    offenders = {str(p.relative_to(ROOT)): sorted(_imports(p, False) & (HEAVY | {"synthfactory"}))
                 for p in (ROOT / layer).rglob("*.py")}
    assert {k: v for k, v in offenders.items() if v} == {}


def test_ruff_is_clean():
    ruff = Path(sys.executable).parent / "ruff"
    result = subprocess.run([str(ruff), "check", "--output-format", "concise", str(ROOT)],
                            capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stdout[-3000:]
