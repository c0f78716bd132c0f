"""Every argv a runner launches is built by the steps table (docs/adr/0144): the DAGs'
templates (``steps.argv``), plan's shard-group argv, the dry-run options and the RayJob
entrypoint (``steps.options``/``steps.command``), each read back with ``steps.read_argv``.
Read with ``ast``: a list or tuple literal written by hand that holds a step's flags (its
name and one of its flags, or two of its flags) outside the steps table fails, naming
the file and line."""

from __future__ import annotations

import ast
import re
import textwrap
from pathlib import Path

import pytest

from synthfactory.contract import step_table, steps
from tests.support.paths import ROOT

SCANNED = ("synthfactory", "dags", "operators", "plugins")
# the table itself, where each flag is declared once
TABLE = tuple(Path(m.__file__).resolve() for m in (steps, step_table))


def _flag_steps() -> dict[str, set[str]]:
    """flag spelling (its aliases too) -> the steps that have it."""
    found: dict[str, set[str]] = {}
    for step in steps.STEPS.values():
        for flag in step.flags:
            for name in (flag.name, *flag.aliases):
                if name.startswith("--"):
                    found.setdefault(name, set()).add(step.name)
    return found


FLAG_STEPS = _flag_steps()


def hand_written_argv(source: str, filename: str) -> list[str]:
    """``file:line: ...`` for each literal list or tuple holding a step's name and one of
    its flags, or two flags of one step (``--flag`` or ``--flag=value``)."""
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        if not isinstance(node, ast.List | ast.Tuple):
            continue
        texts = [e.value for e in node.elts
                 if isinstance(e, ast.Constant) and isinstance(e.value, str)]
        flags = [t for t in texts if t.split("=", 1)[0] in FLAG_STEPS]
        for step in steps.STEPS:
            own = [f for f in flags if step in FLAG_STEPS[f.split("=", 1)[0]]]
            if own and (step in texts or len(own) >= 2):
                found.append(f"{filename}:{node.lineno}: {step} argv written by hand "
                             f"({', '.join(own)})")
                break
    return found


def message(found: list[str]) -> str:
    return ("argv written outside the steps table:\n  " + "\n  ".join(found)
            + "\nbuild it with steps.argv (a DAG's template), steps.options or "
              "steps.command (finished argv) and read one with steps.read_argv or "
              "steps.parse_argv (synthfactory/contract/steps.py)")


def scan(root: Path, table: tuple[Path, ...] = TABLE) -> list[str]:
    modules = sorted(p for tree in SCANNED for p in (root / tree).rglob("*.py")
                     if p.resolve() not in table)
    return [f for p in modules for f in hand_written_argv(p.read_text(),
                                                          str(p.relative_to(root)))]


def test_no_argv_is_written_outside_the_steps_table():
    assert FLAG_STEPS["--shard"] >= {"rephrase", "validate"}
    found = scan(ROOT)
    assert not found, message(found)


PLANTED_OPERATOR = '''
def dry_run():
    return ["--engine", "echo", "--echo-delay-s=2"]
'''

PLANTED_ENGINE = '''
def group_argv(url, run):
    return ["rephrase", "--shard", url, "--run", run]
'''

NOT_ARGV = '''
TRIAL = ["python", "-m", "synthfactory.sweep.trial", "--spec", "s.json", "--result", "r"]
WORDS = ("rephrase", "validate")
'''


def test_a_hand_written_argv_planted_in_operators_and_synthfactory_fails(tmp_path):
    """The scan over a copy of the scanned trees with one planted module in operators/
    and one in synthfactory/: it fails naming both, and nothing else."""
    for tree in SCANNED:
        for path in (ROOT / tree).rglob("*.py"):
            copy = tmp_path / path.relative_to(ROOT)
            copy.parent.mkdir(parents=True, exist_ok=True)
            copy.write_text(path.read_text())
    (tmp_path / "operators" / "planted.py").write_text(textwrap.dedent(PLANTED_OPERATOR))
    (tmp_path / "synthfactory" / "planted.py").write_text(textwrap.dedent(PLANTED_ENGINE))
    (tmp_path / "synthfactory" / "fine.py").write_text(textwrap.dedent(NOT_ARGV))
    table = tuple((tmp_path / "synthfactory" / "contract" / name).resolve()
                  for name in ("steps.py", "step_table.py"))
    found = scan(tmp_path, table)
    assert found == [
        "operators/planted.py:3: rephrase argv written by hand (--engine, --echo-delay-s=2)",
        "synthfactory/planted.py:3: rephrase argv written by hand (--shard, --run)"]
    with pytest.raises(AssertionError, match=re.compile(
            r"operators/planted.py:3: .*synthfactory/planted.py:3: .*steps.command",
            re.DOTALL)):
        assert not found, message(found)


def test_the_table_reads_back_what_it_builds_and_flag_equals_value():
    argv = steps.command("rephrase", {"--shard": ["a", "b"], "--run": "r",
                                      "--max-model-len": 2048}, ["--engine", "echo"])
    assert argv == ["rephrase", "--shard", "a", "--shard", "b", "--run", "r",
                    "--max-model-len", "2048", "--engine", "echo"]
    step, given, rest = steps.read_argv(["rephrase", "--shard=a", "--shard", "b", "--run=r",
                                         "--engine=vllm", "--temperature", "0",
                                         "--engine", "echo", "--echo-delay-s", "2"])
    assert step is steps.REPHRASE
    assert given == {"--shard": ["a", "b"], "--run": "r", "--temperature": "0"}
    assert rest == ["--engine=vllm", "--engine", "echo", "--echo-delay-s", "2"]
    assert steps.parse_argv(["validate", "--shard=a", "--decontaminate-n=7"])[1][
        "decontaminate_n"] == "7"
    with pytest.raises(KeyError, match="rephrase: no flag --nope"):
        steps.options("rephrase", {"--nope": 1})
