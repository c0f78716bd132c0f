"""How grounded a finished run's usable rows are, measured the same way for any run,
before the grounding checks or after: for the usable joined rows, by how they ended
(stopped by themselves, trimmed), the median output/source word ratio, the share of the
source's content kept and the share of the output's content its source has (weighted
stems: synthfactory/quality/grounding.py), and how many hold a sentence written twice.
The issue's before/after table of the demo (docs/adr/0148).

    .venv-worker/bin/python benchmarks/demo_grounding.py --run file:///.../DAY

Last line: ``RESULT demo_grounding joined=J usable=U stopped=S trimmed=T
ratio_stopped=.. ratio_trimmed=.. kept_stopped=.. kept_trimmed=.. grounded_stopped=..
grounded_trimmed=.. repeated=R isa=I``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from machine import print_machine, result_line  # noqa: E402  (this folder is on sys.path)

from synthfactory import storage  # noqa: E402
from synthfactory.contract import paths  # noqa: E402
from synthfactory.quality import checks, grounding  # noqa: E402
from synthfactory.quality.source import source_of  # noqa: E402
from synthfactory.stitch.templates import load_used  # noqa: E402


def sources(run_url: str) -> dict[tuple[str, str], str]:
    """(document, template) -> its source text, its chunks' joined in order."""
    folder = storage.run_folder(run_url)
    plan = folder.shards_plan() or {}
    chunks: dict[tuple[str, str], dict[int, str]] = {}
    templates = {}
    for shard in plan.get("shards") or []:
        table = storage.read_table(shard["url"]).to_pylist()
        for row in table:
            tid = row["template_id"]
            if tid not in templates:
                templates[tid] = load_used(tid, storage.join(run_url, paths.PROMPT_TEMPLATES))
            doc = row.get("doc_id") or row["id"]
            chunks.setdefault((doc, tid), {})[row.get("chunk_index") or 0] = source_of(
                row["user"], templates[tid])
    return {key: "\n\n".join(c[i] for i in sorted(c)) for key, c in chunks.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", required=True)
    args = parser.parse_args()
    run_url = storage.normalize(args.run)
    print_machine()
    joined = storage.run_folder(run_url).joined()
    by_key = sources(run_url)
    groups: dict[str, list[tuple[float, float, float, int]]] = {"stopped": [], "trimmed": []}
    rows = 0
    for part in joined["parts"]:
        for row in storage.read_table(storage.join(run_url, paths.JOINED,
                                                   part["name"])).to_pylist():
            rows += 1
            if not row["usable"]:
                continue
            source, output = by_key[(row["id"], row["template_id"])], row["clean_text"] or ""
            s = grounding.score(source, output)
            ratio = len(checks.words(output)) / max(1, len(checks.words(source)))
            ending = "trimmed" if row.get("trimmed_chunks") else "stopped"
            groups[ending].append((ratio, s.kept, s.grounded, s.repeated))
    print_machine()

    def med(ending: str, i: int) -> str:
        values = [g[i] for g in groups[ending]]
        return f"{statistics.median(values):.2f}" if values else "-"

    for ending, values in groups.items():
        print(f"{ending}: {len(values)} usable rows, median output/source words "
              f"{med(ending, 0)}, content kept {med(ending, 1)}, grounded {med(ending, 2)}, "
              f"with a repeated sentence {sum(v[3] > 0 for v in values)}")
    usable = sum(len(v) for v in groups.values())
    print(result_line("demo_grounding", joined=rows, usable=usable,
                      stopped=len(groups["stopped"]), trimmed=len(groups["trimmed"]),
                      ratio_stopped=med("stopped", 0), ratio_trimmed=med("trimmed", 0),
                      kept_stopped=med("stopped", 1), kept_trimmed=med("trimmed", 1),
                      grounded_stopped=med("stopped", 2), grounded_trimmed=med("trimmed", 2),
                      repeated=sum(v[3] > 0 for g in groups.values() for v in g)))


if __name__ == "__main__":
    main()
