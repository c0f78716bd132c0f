"""The docs stay a map of the repository: the ADR index lists every ADR as its header
says, and no doc or comment sends a reader to a file that is not here."""

from __future__ import annotations

import re
import subprocess
import sys

from tests.support.paths import ROOT
from tests.support.scripts import load_script

# Markdown links to a relative file: [text](path) or [text](path#anchor)
MD_LINK = re.compile(r"\]\((?!https?://|#|mailto:)([^)#\s]+)(?:#[^)]*)?\)")


def test_the_adr_index_is_made_from_the_adrs():
    adr_index = load_script("adr_index")
    assert adr_index.current() == adr_index.table(), (
        "docs/adr/README.md's table is out of date: run "
        "`.venv/bin/python scripts/adr_index.py --write`")


def test_every_adr_has_one_heading_style_and_a_status():
    adr_index = load_script("adr_index")
    numbers = [a["number"] for a in adr_index.adrs()]  # raises on a bad header or no Status
    assert len(numbers) == len(set(numbers)) == len(list((ROOT / "docs/adr").glob("0*.md")))


def _prose(text: str) -> str:
    """The text without code blocks (fenced or indented): examples there are not links."""
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    return "\n".join(line for line in text.splitlines() if not line.startswith(("    ", "\t")))


def test_markdown_links_point_at_files_in_the_repo():
    broken = []
    for doc in [ROOT / "README.md", *(ROOT / "docs").rglob("*.md")]:
        for target in MD_LINK.findall(_prose(doc.read_text())):
            if not (doc.parent / target).exists():
                broken.append(f"{doc.relative_to(ROOT)} -> {target}")
    assert broken == []


def test_nothing_points_outside_the_repo():
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                             check=True).stdout.split()
    pattern = re.compile(r"\.\./shared|\bDESIGN\.md\b|\bENVIRONMENT\.md\b")
    offenders = [path for path in tracked if not path.endswith((".png", ".json.xz"))
                 and (ROOT / path).is_file() and path != "tests/unit/engine/test_docs_map.py"
                 and pattern.search((ROOT / path).read_text(errors="replace"))]
    assert offenders == []


def test_the_index_script_runs():
    result = subprocess.run([sys.executable, str(ROOT / "scripts" / "adr_index.py")],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and "| [0001](0001-" in result.stdout
