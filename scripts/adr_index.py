"""The ADR index table of docs/adr/README.md, made from the ADRs' own headers.

    .venv/bin/python scripts/adr_index.py          # print the table
    .venv/bin/python scripts/adr_index.py --write  # rewrite it in docs/adr/README.md

Each ADR's first line is ``# NNNN Title``; its ``Status:`` line; optional
``Supersedes: [KKKK](...)`` line. "Superseded by" is the reverse of every Supersedes.
The Status column is the whole Status line, every word of it ("accepted; superseded in
part by 0131"), with each link written as its number and the parenthesised "which
part" notes left out (they are prose, in the ADR itself).
tests/unit/engine/test_docs_map.py checks the README's table equals this one, and each
row's status against the ADR's own Status line, read there.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ADR = Path(__file__).resolve().parents[1] / "docs" / "adr"
README = ADR / "README.md"
HEADER = "| ADR | Title | Status | Supersedes | Superseded by |\n|---|---|---|---|---|\n"
LINK = re.compile(r"\[(\d{4})\]\((\d{4}-[^)]+\.md)\)")


def status_cell(status: str) -> str:
    """The Status line as the index shows it: links as numbers, no "(which part)" notes.
    Innermost parentheses first, so a note holding ``f(x)`` goes whole."""
    text = LINK.sub(r"\1", status)
    while (stripped := re.sub(r"\s*\([^()]*\)", "", text)) != text:
        text = stripped
    return " ".join(text.split())


def adrs() -> list[dict]:
    found = []
    for path in sorted(ADR.glob("[0-9][0-9][0-9][0-9]-*.md")):
        lines = path.read_text().splitlines()
        title = re.fullmatch(r"# (\d{4})\.? (.+)", lines[0])
        if not title or title.group(1) != path.name[:4]:
            raise SystemExit(f"{path}: first line must be '# {path.name[:4]} Title'")
        status = next((line[len("Status:"):].strip() for line in lines
                       if line.startswith("Status:")), None)
        if status is None:
            raise SystemExit(f"{path}: no 'Status:' line")
        supersedes = [m.groups() for line in lines if line.startswith("Supersedes:")
                      for m in LINK.finditer(line)]
        found.append({"number": title.group(1), "file": path.name, "title": title.group(2),
                      "status": status_cell(status),
                      "supersedes": supersedes})
    return found


def table() -> str:
    records = adrs()
    superseded_by: dict[str, list[tuple[str, str]]] = {}
    for adr in records:
        for number, _ in adr["supersedes"]:
            superseded_by.setdefault(number, []).append((adr["number"], adr["file"]))

    def links(pairs) -> str:
        return ", ".join(f"[{n}]({f})" for n, f in pairs)

    rows = [f"| [{a['number']}]({a['file']}) | {a['title']} | {a['status']} | "
            f"{links(a['supersedes'])} | {links(superseded_by.get(a['number'], []))} |"
            for a in records]
    return HEADER + "\n".join(rows) + "\n"


def current() -> str:
    text = README.read_text()
    start = text.index(HEADER)
    end = text.find("\n\n", start)
    return text[start:] if end == -1 else text[start:end + 1]


def main() -> None:
    if "--write" in sys.argv[1:]:
        README.write_text(README.read_text().replace(current(), table()))
    else:
        print(table(), end="")


if __name__ == "__main__":
    main()
