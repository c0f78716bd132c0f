"""Rows/s of the quality gate over 10,000 rows: with the checks templates declare (code,
numbers, output shape) against without them, and against the validation flags it
replaced.

Rows: real sources with outputs of every kind the gate sorts, with templates. Of every
twelve rows, eight are web prose (the Python standard library's docstrings, as the demo
corpus; rewrites, copies, truncations, loops, refusals, another language, preambles,
repeated outputs; templates encyclopedic, qa, summary, faq: qa's output shape is
parsed), two are code (a standard-library function's source in a fenced block with its
docstring; code_tutorial and code_commented outputs that keep it, break it or drop it:
``ast`` parses each block) and two are math (a worked problem with numbers and LaTeX;
math_solution and math_textbook outputs that keep or change them).

Ours: ``assess`` as the pipeline runs it (every reason, MinHash over the whole table).
Without the domain checks: ``assess(..., domain_checks=False)`` on the same rows, the
gate as it was before them (code_broken, numbers_lost, wrong_format left out; copying
and language judged on the whole text). Baseline: the four per-row flags validate
computed before the gate (empty, truncated, repetition, refusal) on the same outputs.
The rounds alternate the three; the source caches of the domain checks are cleared
before each of ours; medians are printed with the spread.

    .venv-worker/bin/python benchmarks/quality.py [--rows 10000] [--rounds 3]

Last line: ``RESULT quality_gate rows=N rows_per_s=R baseline_rows_per_s=B ratio=B/R
usable=U no_domain_rows_per_s=W domain_ratio=R/W isa=I`` (``domain_ratio``: the share of
the gate's speed the domain checks keep, to stay >= 0.7; I: the CPU's vector
extensions, benchmarks/machine.py).
"""

from __future__ import annotations

import argparse
import ast
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import sysconfig  # noqa: E402

from machine import print_machine, result_line  # noqa: E402  (this folder is on sys.path)

from synthfactory.corpus import iter_docstrings  # noqa: E402
from synthfactory.quality import domain  # noqa: E402
from synthfactory.quality.checks import REFUSAL, repetition_ratio  # noqa: E402
from synthfactory.quality.gate import Row, assess  # noqa: E402
from synthfactory.quality_bounds import Bounds, bounds_from  # noqa: E402
from synthfactory.stitch.templates import load_template  # noqa: E402

TEMPLATES = ("encyclopedic", "qa", "summary", "faq")
CODE_TEMPLATES = ("code_tutorial", "code_commented")
MATH_TEMPLATES = ("math_solution", "math_textbook")
GERMAN = ("Dieses Modul bietet ein einfaches Gerüst zum Schreiben zeilenorientierter "
          "Befehlsinterpreter, die oft für Testumgebungen und Prototypen nützlich sind.")
FENCE = "`" * 3


def _flag_rows(texts: list[str], finish: list[str], max_repetition: float) -> dict:
    """The four per-row flags validate computed before the gate (the baseline)."""
    return {
        "empty": [not t.strip() for t in texts],
        "truncated": [f == "length" for f in finish],
        "repetition": [repetition_ratio(t) > max_repetition for t in texts],
        "refusal": [bool(REFUSAL.match(t)) for t in texts],
    }


def _functions(stdlib: Path, limit: int) -> list[tuple[str, str, str]]:
    """(name, docstring, source) of standard-library functions of 5 to 40 lines."""
    found = []
    for path in sorted(stdlib.glob("*.py")):
        try:
            text = path.read_text(encoding="utf-8")
            tree = ast.parse(text)
        except (SyntaxError, UnicodeDecodeError, OSError):
            continue
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and 5 <= node.end_lineno - node.lineno <= 40:
                doc = ast.get_docstring(node) or f"The function {node.name}."
                found.append((node.name, doc, ast.get_source_segment(text, node)))
                if len(found) == limit:
                    return found
    return found


def _code_row(i: int, function: tuple[str, str, str], rng: random.Random) -> Row:
    name, doc, code = function
    source = f"{doc}\n\n{FENCE}python\n{code}\n{FENCE}\n"
    lines = code.splitlines()
    explain = (f"In this tutorial you will learn what `{name}` does. {doc} We walk "
               f"through it step by step and recap at the end.")
    kind = i % 4
    output = {
        0: f"{explain}\n\n{FENCE}python\n{code}\n{FENCE}\n\nRecap: {name} as shown.",
        1: f"{explain}\n\n{FENCE}python\n" + "\n".join(lines[:len(lines) // 2])
           + f"\n{FENCE}\n",  # cut in the middle: no longer parses
        2: explain + " " + " ".join(rng.sample(doc.split(), min(20, len(doc.split())))),
        3: f"{FENCE}python\n# {name}, commented\n{code}\n{FENCE}\n\n{explain}",
    }[kind]
    return Row(source, output, "stop", CODE_TEMPLATES[i % 2])


def _math_row(i: int, rng: random.Random) -> Row:
    a, b, c = rng.randint(2, 99), rng.randint(2, 99), rng.randint(100, 9999)
    source = (f"Problem {i}. A tank holds {c} litres and drains at {a} litres per minute "
              f"while a pump adds {b} litres per minute. The net rate is "
              f"$r = {a} - {b}$ and the time to empty it is $$t = \\frac{{{c}}}{{{a} - {b}}}$$ "
              f"minutes, when $a > b$. How long does it take, and how much has the pump "
              f"added by then?")
    kept = (f"Problem {i}, step 1: the tank holds {c} litres. Step 2: it drains at {a} and "
            f"fills at {b} litres per minute, so $r = {a} - {b}$. Step 3: "
            f"$$t = \\frac{{{c}}}{{{a} - {b}}}$$ minutes, valid when $a > b$. Step 4: the "
            f"pump adds {b} litres each minute until then. Final answer: as computed.")
    output = kept if i % 2 else kept.replace(str(c), str(c + 1)).replace(f"{a} - {b}", "r")
    return Row(source, output, "stop", MATH_TEMPLATES[i % 4 // 2])


def _rows(n: int, seed: int = 0) -> list[Row]:
    rng = random.Random(seed)
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    sources = [text for _, text in iter_docstrings(stdlib, 200, 2000, 3)
               if len(text.split()) >= 20][:2000]
    functions = _functions(stdlib, 2000)
    rows = []
    for i in range(n):
        j = i // 12 * 2 + i % 2  # the how-manyth code (or math) row
        if i % 12 in (8, 9):
            rows.append(_code_row(j, functions[j % len(functions)], rng))
            continue
        if i % 12 in (10, 11):
            rows.append(_math_row(j, rng))
            continue
        source = sources[i % len(sources)]
        words = source.split()
        rng.shuffle(words)
        kind = i % 8
        output = {
            0: " ".join(words),  # a reordering: a rewrite's length, few copied 6-grams
            1: source,  # a copy
            2: " ".join(words[:len(words) // 2]),  # cut short
            3: " ".join(words[:5] * 12),  # a loop
            4: "I'm sorry, but I cannot rewrite this text.",
            5: GERMAN,
            6: "Sure! Here is the rewritten text:\n\n" + " ".join(reversed(words)),
            7: " ".join(words) if i % 16 == 7 else " ".join(sorted(words)),
        }[kind]
        rows.append(Row(source, output, "length" if kind == 2 else "stop",
                        TEMPLATES[i % len(TEMPLATES)]))
    return rows


def _clear_caches() -> None:
    domain.source_code.cache_clear()
    domain.source_numbers.cache_clear()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    rows = _rows(args.rows)
    bounds = {t: bounds_from(load_template(t).quality, t)
              for t in (*TEMPLATES, *CODE_TEMPLATES, *MATH_TEMPLATES)}

    def bounds_for(template):
        return bounds.get(template, Bounds())

    assess(rows[:50], bounds_for)  # warm-up: the language model loads once
    print_machine()
    ours, without, base, usable = [], [], [], 0
    for _ in range(args.rounds):
        _clear_caches()
        start = time.perf_counter()
        verdicts = assess(rows, bounds_for)
        ours.append(len(rows) / (time.perf_counter() - start))
        usable = sum(v.usable for v in verdicts)
        start = time.perf_counter()
        assess(rows, bounds_for, domain_checks=False)
        without.append(len(rows) / (time.perf_counter() - start))
        start = time.perf_counter()
        _flag_rows([r.output_text for r in rows], [r.finish_reason for r in rows], 0.5)
        base.append(len(rows) / (time.perf_counter() - start))
        print(f"round: gate {ours[-1]:.0f} rows/s, without domain checks {without[-1]:.0f} "
              f"rows/s, flags {base[-1]:.0f} rows/s", flush=True)
    print_machine()
    r, w, b = statistics.median(ours), statistics.median(without), statistics.median(base)
    print(f"gate spread {min(ours):.0f}..{max(ours):.0f}, without domain checks spread "
          f"{min(without):.0f}..{max(without):.0f}, flags spread "
          f"{min(base):.0f}..{max(base):.0f} rows/s")
    print(result_line("quality_gate", rows=len(rows), rows_per_s=f"{r:.0f}",
                      baseline_rows_per_s=f"{b:.0f}", ratio=f"{b / r:.1f}", usable=usable,
                      no_domain_rows_per_s=f"{w:.0f}", domain_ratio=f"{r / w:.2f}"))


if __name__ == "__main__":
    main()
