"""``synthfactory corpus``: a seed corpus of real English text present on every machine.

The docstrings of the Python standard library (read with ``ast``, never imported),
long enough to be worth rephrasing, written as daily parquet partitions
``{out}/dt=YYYY-MM-DD/part-00000.parquet`` with ``id`` and ``text`` columns. Nothing
copied is committed to the repository; the text comes from the interpreter at hand.
"""

from __future__ import annotations

import argparse
import ast
import datetime as dt
import hashlib
import logging
import sysconfig
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa

from synthfactory import storage
from synthfactory.contract.flag_types import non_negative_int, positive_int
from synthfactory.errors import SynthfactoryError

log = logging.getLogger(__name__)

_SKIP_DIRS = {"test", "tests", "idlelib", "lib2to3", "site-packages", "turtledemo", "__pycache__"}


def _parsed_modules(stdlib: Path) -> Iterator[tuple[str, ast.Module]]:
    """(dotted module name, syntax tree) of the standard library's Python files, in path
    order; test suites, tools and files that do not parse are left out."""
    for path in sorted(stdlib.rglob("*.py")):
        if _SKIP_DIRS.intersection(path.relative_to(stdlib).parts):
            continue
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError, OSError):
            continue
        yield ".".join(path.relative_to(stdlib).with_suffix("").parts), tree


def iter_docstrings(
    stdlib: Path, min_chars: int, max_chars: int, per_module: int
) -> Iterator[tuple[str, str]]:
    """(qualified name, docstring) of modules, classes and functions, in path order;
    at most ``per_module`` from one file so the corpus spans many topics."""
    for module, tree in _parsed_modules(stdlib):
        nodes = [tree, *(n for n in ast.walk(tree) if isinstance(
            n, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef))]
        taken = 0
        for node in nodes:
            doc = ast.get_docstring(node, clean=True)
            if doc and min_chars <= len(doc) <= max_chars and taken < per_module:
                taken += 1
                name = module if node is tree else f"{module}.{node.name}"
                yield name, doc


def iter_module_guides(stdlib: Path, min_chars: int, max_chars: int) -> Iterator[tuple[str, str]]:
    """(module, guide) of modules whose documentation, written out as one Markdown
    document (the module's docstring under ``# module``, then each class's and
    function's under ``## name``), reaches ``min_chars``: long documents with
    headings, in path order, each cut at the last docstring that keeps it within
    ``max_chars``. The demo's window cannot hold them: stitch cuts them into chunks."""
    for module, tree in _parsed_modules(stdlib):
        head = ast.get_docstring(tree, clean=True)
        if not head or module.startswith("_") or "._" in module:
            continue
        guide = f"# {module}\n\n{head}\n"
        for node in tree.body:  # top-level classes and functions, in the file's order
            if not isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            doc = ast.get_docstring(node, clean=True)
            section = f"\n## {node.name}\n\n{doc}\n" if doc else ""
            if len(guide) + len(section) > max_chars:
                break
            guide += section
        if len(guide) >= min_chars:
            yield module, guide


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", required=True, help="corpus root URL (file:// or s3://)")
    parser.add_argument("--days", type=positive_int, default=3, help="number of daily partitions")
    parser.add_argument("--docs-per-day", type=positive_int, default=64)
    parser.add_argument("--end-date", help="last partition's date, YYYY-MM-DD (default: "
                        "yesterday in UTC, the day a daily run triggered today reads)")
    parser.add_argument("--min-chars", type=non_negative_int, default=300)
    parser.add_argument("--max-chars", type=positive_int, default=2500)
    parser.add_argument("--per-module", type=positive_int, default=2)
    parser.add_argument("--long-docs-per-day", type=non_negative_int, default=0,
                        help="documents per day that are a whole module's documentation "
                             "(headings and all), longer than a 2,048-token window")
    parser.add_argument("--long-min-chars", type=positive_int, default=9000)
    parser.add_argument("--long-max-chars", type=positive_int, default=14000)


def run(args: argparse.Namespace) -> dict:
    if args.days < 1 or args.docs_per_day < 1:
        raise SynthfactoryError("--days and --docs-per-day must be at least 1")
    try:
        end = (dt.date.fromisoformat(args.end_date) if args.end_date
               else dt.datetime.now(dt.UTC).date() - dt.timedelta(days=1))
    except ValueError as exc:
        raise SynthfactoryError(f"--end-date {args.end_date!r}: not a YYYY-MM-DD date") from exc
    storage.prepare_folder(args.out)  # an unwritable --out fails now, not after the scan
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    wanted = args.days * args.docs_per_day
    docs: list[tuple[str, str]] = []
    seen: set[str] = set()
    for name, text in iter_docstrings(stdlib, args.min_chars, args.max_chars, args.per_module):
        if text not in seen:  # the same docstring is inherited or copied in places
            seen.add(text)
            docs.append((name, text))
        if len(docs) == wanted:
            break
    if len(docs) < wanted:
        raise SynthfactoryError(
            f"{stdlib}: only {len(docs)} docstrings of {args.min_chars}-{args.max_chars} "
            f"characters, {wanted} wanted"
        )
    long_wanted = args.days * args.long_docs_per_day
    guides = []
    if long_wanted:
        for name, text in iter_module_guides(stdlib, args.long_min_chars, args.long_max_chars):
            guides.append((f"{name}.guide", text))
            if len(guides) == long_wanted:
                break
        if len(guides) < long_wanted:
            raise SynthfactoryError(
                f"{stdlib}: only {len(guides)} modules document {args.long_min_chars}-"
                f"{args.long_max_chars} characters, {long_wanted} wanted")
    partitions = []
    per_day = args.long_docs_per_day
    for day in range(args.days):
        date = end - dt.timedelta(days=args.days - 1 - day)
        chunk = (docs[day * args.docs_per_day : (day + 1) * args.docs_per_day]
                 + guides[day * per_day : (day + 1) * per_day])
        ids = [hashlib.sha1(name.encode()).hexdigest()[:16] + f"-{name}" for name, _ in chunk]
        table = pa.table({"id": ids, "text": [text for _, text in chunk]})
        url = storage.join(args.out, f"dt={date.isoformat()}", "part-00000.parquet")
        storage.write_table(table, url)
        partitions.append(date.isoformat())
    log.info("wrote %d documents (%d of them long) in %d partitions under %s",
             wanted + long_wanted, long_wanted, args.days, args.out)
    return {"documents": wanted + long_wanted, "long_documents": long_wanted,
            "partitions": partitions, "out": storage.normalize(args.out)}
