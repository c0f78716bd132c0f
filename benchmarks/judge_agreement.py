"""The model judge's agreement with labelled rows (docs/judge.md): how often its verdict
(faithful or not) is the label's, on the embedded model by default.

The rows are ``tests/support/grounding_rows.py``'s ``ROWS`` (hand-written sources and
outputs, each labelled with a kind and ``faithful``; ``--rows-from`` reads the module
from another path). The engine is built as ``synthfactory judge`` builds it (the same
flags, the same registry entry, vLLM's offline engine on this machine's devices), and
the rows go through the same loop (synthfactory/quality/judge/run.py), greedy.

    .venv-worker/bin/python benchmarks/judge_agreement.py [--model DIR] [--limit N]

Above the last line: per kind, how the judge called its rows; the two trivial judges'
agreement (always faithful, always unfaithful) to compare with; what was wrong with the
unparsed replies. Last line:
``RESULT judge_agreement rows=N agreement=A faithful_kept=K unfaithful_caught=C
unparsed=U isa=...``: A, the share of all rows whose parsed verdict is their label (an
unparsed row agrees with nothing); K, labelled-faithful rows the judge did not reject
(judged faithful, or unparsed: an unparsed row is kept), of all labelled-faithful; C,
labelled-unfaithful rows it judged unfaithful, of all labelled-unfaithful; U, rows with
no parsed verdict.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
from collections import Counter
from pathlib import Path

from machine import ROOT, print_machine, result_line  # this folder is on sys.path

from synthfactory.cli import build_parser
from synthfactory.judge import engine_spec
from synthfactory.model import default_model_dir
from synthfactory.quality.judge import (
    FAITHFUL,
    UNFAITHFUL,
    UNPARSED,
    Pair,
    judge,
    load_judge_template,
)

ROWS_MODULE = ROOT / "tests" / "support" / "grounding_rows.py"


def labelled_rows(path: Path) -> list:
    """``ROWS`` of the module at ``path`` (a file: the set may live in another checkout)."""
    spec = importlib.util.spec_from_file_location("grounding_rows", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up while defined
    spec.loader.exec_module(module)
    return list(module.ROWS)


def figures(rows: list, verdicts: list) -> dict:
    faithful = [v for r, v in zip(rows, verdicts, strict=True) if r.faithful]
    unfaithful = [v for r, v in zip(rows, verdicts, strict=True) if not r.faithful]
    agree = sum((v.outcome == FAITHFUL) == r.faithful
                for r, v in zip(rows, verdicts, strict=True) if v.outcome != UNPARSED)
    return {
        "rows": len(rows), "agreement": agree / len(rows) if rows else 0.0,
        "faithful_kept": sum(v.outcome != UNFAITHFUL for v in faithful),
        "faithful_rows": len(faithful),
        "unfaithful_caught": sum(v.outcome == UNFAITHFUL for v in unfaithful),
        "unfaithful_rows": len(unfaithful),
        "unparsed": sum(v.outcome == UNPARSED for v in verdicts),
        "always_faithful": len(faithful) / len(rows) if rows else 0.0,
    }


def by_kind(rows: list, verdicts: list) -> dict[str, Counter]:
    kinds: dict[str, Counter] = {}
    for row, verdict in zip(rows, verdicts, strict=True):
        kinds.setdefault(row.kind, Counter())[verdict.outcome] += 1
    return kinds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=str(default_model_dir()))
    parser.add_argument("--rows-from", type=Path, default=ROWS_MODULE,
                        help="the module defining ROWS (default: %(default)s)")
    parser.add_argument("--limit", type=int, default=None, help="the first N rows only")
    parser.add_argument("--max-tokens", type=int, default=None,
                        help="budget of one verdict (default: the judge template's)")
    parser.add_argument("--verdicts", type=Path, default=None,
                        help="write every row's verdict and reply here (JSON lines)")
    args = parser.parse_args()
    rows = labelled_rows(args.rows_from)[:args.limit]
    template = load_judge_template()
    budget = args.max_tokens or template.max_tokens
    # the command's own flags and checks: the judge as `synthfactory judge` builds it
    judge_args = build_parser("judge").parse_args(
        ["--in", "unused", "--out", "unused", "--engine", "vllm", "--model", args.model])
    spec = engine_spec(judge_args, budget)
    print_machine()
    started = time.monotonic()
    engine = spec.build()
    loaded = time.monotonic()
    verdicts = judge(engine, [Pair(r.source, r.output) for r in rows], template, budget,
                     judge_args.max_in_flight)
    judged = time.monotonic()
    print_machine()
    if args.verdicts:
        with args.verdicts.open("w") as out:
            for row, v in zip(rows, verdicts, strict=True):
                out.write(json.dumps({"name": row.name, "kind": row.kind,
                                      "faithful": row.faithful, "outcome": v.outcome,
                                      "why": v.why, "unsupported": v.unsupported,
                                      "missing": v.missing, "raw": v.raw}) + "\n")
    for kind, counts in by_kind(rows, verdicts).items():
        print(f"kind {kind}: rows={sum(counts.values())} faithful={counts[FAITHFUL]} "
              f"unfaithful={counts[UNFAITHFUL]} unparsed={counts[UNPARSED]}")
    print("unparsed because:", json.dumps(Counter(v.why for v in verdicts if v.why)))
    f = figures(rows, verdicts)
    print(f"trivial judges: always faithful agreement={f['always_faithful']:.3f}, always "
          f"unfaithful agreement={1 - f['always_faithful']:.3f}; engine start "
          f"{loaded - started:.0f} s, judging {judged - loaded:.0f} s, budget {budget} tokens")
    print(result_line("judge_agreement", rows=f["rows"], agreement=f"{f['agreement']:.3f}",
                      faithful_kept=f"{f['faithful_kept']}/{f['faithful_rows']}",
                      unfaithful_caught=f"{f['unfaithful_caught']}/{f['unfaithful_rows']}",
                      unparsed=f["unparsed"]))


if __name__ == "__main__":
    main()
