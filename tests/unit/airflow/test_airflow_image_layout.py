"""The Airflow image installs the Airflow layer once, as a package (docs/adr/0110).

No Docker engine here, so the image's install step is replayed: the files that
docker/airflow.Dockerfile copies into /opt/synthfactory are staged in a folder and built
into a wheel with pip, as its `RUN pip install /opt/synthfactory` does.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.support.paths import AIRFLOW, ROOT

DOCKERFILE = ROOT / "docker" / "airflow.Dockerfile"
PACKAGE_ROOT = "/opt/synthfactory/"
ROUTING_TABLE = "synthfactory/templates/routing.json"  # the trigger form lists its routes


def _copies() -> list[tuple[str, str]]:
    """(source, destination) of every COPY into the package root."""
    pairs = []
    for line in DOCKERFILE.read_text().splitlines():
        if not line.startswith("COPY "):
            continue
        words = [w for w in line.split()[1:] if not w.startswith("--")]
        *sources, dest = words
        pairs += [(src, dest) for src in sources if dest.startswith(PACKAGE_ROOT)]
    return pairs


def test_each_source_is_copied_once():
    sources = [src for src, _ in _copies()]
    plugins = [line for line in DOCKERFILE.read_text().splitlines()
               if line.startswith("COPY ") and " plugins/" in line]
    assert len(sources) == len(set(sources)), sources
    assert len(plugins) == 1, plugins
    assert "PYTHONPATH" not in DOCKERFILE.read_text()


@pytest.fixture(scope="module")
def image_wheel(tmp_path_factory) -> zipfile.ZipFile:
    stage = tmp_path_factory.mktemp("opt-synthfactory")
    for src, dest in _copies():
        target = stage / dest[len(PACKAGE_ROOT):]
        if dest.endswith("/") and not src.endswith("/"):
            target = target / Path(src).name
        if (ROOT / src).is_dir():
            shutil.copytree(ROOT / src, target, dirs_exist_ok=True,
                            ignore=shutil.ignore_patterns("__pycache__"))
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(ROOT / src, target)
    out = tmp_path_factory.mktemp("wheel")
    result = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(stage)],
        capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    (wheel,) = out.glob("*.whl")
    return zipfile.ZipFile(wheel)


def test_image_wheel_holds_the_airflow_layer_and_the_contract_only(image_wheel):
    """The contract and the report's figures (the two packages the wall lets through:
    pyproject's [tool.importlinter], docs/adr/0146) and no other engine code."""
    names = image_wheel.namelist()
    assert "synthfactory_airflow/operators/settings.py" in names
    assert "synthfactory_airflow/plugins/run_report/plugin.py" in names
    assert "synthfactory_airflow/plugins/run_report/templates/report.html" in names
    assert any(n.startswith("synthfactory/contract/") for n in names)
    assert "synthfactory/report_figures/__init__.py" in names
    shared = ("synthfactory/contract/", "synthfactory/report_figures/", "synthfactory/__init__")
    engine = [n for n in names if n.startswith("synthfactory/") and not n.startswith(shared)]
    assert engine == [ROUTING_TABLE]  # no engine code in the Airflow image: one data file
    assert not any(n.startswith(("operators/", "plugins/")) for n in names)


def test_image_carries_the_routing_table_the_trigger_form_lists(image_wheel, tmp_path):
    """The `routing` Param's description lists the shipped routes (routing_form.py reads
    routing.json beside the contract): installed as the image installs it, the contract
    finds the table, the same file as the repository's, and does not fall back to naming
    it."""
    assert image_wheel.read(ROUTING_TABLE) == (ROOT / ROUTING_TABLE).read_bytes()
    image_wheel.extractall(tmp_path)
    # -S: no site-packages, so the development install cannot stand in for the image's
    code = ("import sys; sys.path.insert(0, sys.argv[1]); "
            "from synthfactory.contract import routing_form as f; "
            "print(f.SHIPPED_ROUTING); print(f.routes_line())")
    result = subprocess.run([sys.executable, "-S", "-c", code, str(tmp_path)],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr[-2000:]
    where, line = result.stdout.splitlines()
    assert Path(where) == tmp_path / ROUTING_TABLE
    assert line.startswith("buckets of quality_column: ") and "routes: " in line, line
    for domain in json.loads((ROOT / ROUTING_TABLE).read_text())["routes"]:
        assert f"{domain} " in line, (domain, line)


def test_image_wheel_registers_the_run_report_plugin(image_wheel):
    (entry_points,) = [n for n in image_wheel.namelist() if n.endswith("entry_points.txt")]
    text = image_wheel.read(entry_points).decode()
    section = re.search(r"\[airflow\.plugins\]\n(.*?)(\n\[|\Z)", text, re.S)
    assert section, text
    assert ("synthfactory_airflow.plugins.run_report.plugin:RunReportPlugin"
            in section.group(1))


@pytest.mark.slow  # starts Airflow's CLI
def test_airflow_loads_the_run_report_plugin_once_from_the_entry_point(tmp_path):
    """The development environment loads it the way the image does: from the installed
    distribution, with an empty plugins folder, and without an import error."""
    import os

    env = {**os.environ, "AIRFLOW_HOME": str(tmp_path),
           "AIRFLOW__CORE__PLUGINS_FOLDER": str(tmp_path / "plugins"),
           "AIRFLOW__CORE__LOAD_EXAMPLES": "False"}
    result = subprocess.run([str(AIRFLOW), "plugins", "--output", "json"], env=env, cwd=tmp_path,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    plugins = json.loads(result.stdout[result.stdout.index("["):])
    names = [p["name"] for p in plugins]
    assert names.count("synthfactory_run_report") == 1, names
    (ours,) = [p for p in plugins if p["name"] == "synthfactory_run_report"]
    assert "synthfactory_airflow.plugins.run_report.plugin" in json.dumps(ours)
