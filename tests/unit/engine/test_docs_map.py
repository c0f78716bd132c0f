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


def _status_as_indexed(status: str) -> str:
    """An ADR's Status line as the index must show it, worked out here and not by the
    script: every parenthesised group goes (the "(which part)" notes, and with them each
    link's "(target.md)", leaving "[0131]"), then the brackets; the words all stay."""
    kept, depth = [], 0
    for char in status:
        depth += char == "("
        if depth == 0 and char not in "[]":
            kept.append(char)
        depth -= char == ")" and depth > 0
    return " ".join("".join(kept).replace(" ;", ";").split())


def _statuses_in_the_adrs() -> dict[str, str]:
    """Each ADR's number and its first ``Status:`` line, read from the file itself."""
    found = {}
    for path in sorted((ROOT / "docs/adr").glob("[0-9][0-9][0-9][0-9]-*.md")):
        line = next(line for line in path.read_text().splitlines()
                    if line.startswith("Status:"))
        found[path.name[:4]] = line[len("Status:"):].strip()
    return found


def _index_rows(readme: str) -> dict[str, list[str]]:
    """The index table's rows by ADR number: [status, supersedes, superseded by]."""
    rows = {}
    for line in readme.splitlines():
        if re.match(r"\| \[\d{4}\]\(", line):
            cells = [cell.strip() for cell in line.strip().strip("|").split(" | ")]
            rows[cells[0][1:5]] = cells[2:]
    return rows


def _status_disagreements(rows: dict[str, list[str]], statuses: dict[str, str]) -> list[str]:
    """Every ADR whose index row does not say what its Status line says: a missing row,
    another status, or "superseded ... by N" where the Superseded-by column lacks N."""
    wrong = []
    for number, status in statuses.items():
        if number not in rows:
            wrong.append(f"{number}: no row in docs/adr/README.md")
            continue
        cell, _, superseded_by = rows[number]
        if cell != _status_as_indexed(status):
            wrong.append(f"{number}: index says {cell!r}, its Status line {status!r}")
        # the numbers a status names ("superseded in part by 0055 and by 0056") are the
        # ADRs whose Supersedes line names this one: both sides must say so
        said = sorted(set(re.findall(r"\b\d{4}\b", _status_as_indexed(status))))
        if said != sorted(set(re.findall(r"\[(\d{4})\]", superseded_by))):
            wrong.append(f"{number}: Status names superseding ADRs {said}, "
                         f"the Superseded-by column {superseded_by!r}")
    return wrong


def test_each_index_row_says_what_its_adrs_status_line_says():
    """The index keeps every ADR's whole status ("accepted; superseded in part by 0131",
    not "accepted"), compared with the Status line read here, not through the script."""
    rows = _index_rows((ROOT / "docs/adr/README.md").read_text())
    assert _status_disagreements(rows, _statuses_in_the_adrs()) == []


def test_a_cut_status_in_the_index_is_caught():
    """The break this guards against: the old index cut each status at " (" and " by "
    (``.split(" (")[0].split(" by ")[0]``), so 0040's "accepted; superseded in part by
    [0125](...) (...)" showed as "accepted". Rows cut that way must be reported."""
    statuses = _statuses_in_the_adrs()
    rows = _index_rows((ROOT / "docs/adr/README.md").read_text())
    cut = {number: [re.sub(r"\[(\d{4})\]\([^)]*\)", r"\1", statuses[number])
                    .split(" (")[0].split(" by ")[0], *rest[1:]]
           for number, rest in rows.items()}
    flagged = {line[:4] for line in _status_disagreements(cut, statuses)}
    assert {"0040", "0060", "0066", "0080"} <= flagged
    assert flagged == {n for n in statuses if cut[n][0] != _status_as_indexed(statuses[n])}


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
