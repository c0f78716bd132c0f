"""The checks a template declares (synthfactory/quality_bounds.py): code kept, numbers
kept, a shape.

- **Code** (``keep_code``, reason ``code_broken``): the source's fenced code blocks in a
  language with a parser (Python: ``ast``; JSON: ``json``; TOML: ``tomllib``; all the
  standard library's) that parse are the code to keep. Each one's units must be found
  among the output's fenced blocks, parsed as that language: for Python each top-level
  statement, compared as its ``ast.dump`` with docstrings taken out (comments are not in
  the tree), so a block kept verbatim, re-indented, split at top-level statements or
  given comments and docstrings is kept, and a block changed, cut or broken is not; for
  JSON and TOML the parsed value. A source block that does not parse itself (a
  fragment, ``...``, a doctest) or in a language without a parser is not checked.
- **Numbers** (``keep_numbers``, reason ``numbers_lost``): the source's formulae (LaTeX
  ``$...$``, ``$$...$$``, ``\\(...\\)``, ``\\[...\\]``, compared without spaces and
  braces) and its numbers outside them and outside code (``1,000`` is ``1000``, ``2.50``
  is ``2.5``) must be in the output; a number may be written as a word (``three``) up to
  twenty. More than the declared tolerance of them missing (a share of the distinct
  ones) rejects the row.
- **Shape** (``output_shape``, reason ``wrong_format``): ``qa_pairs``: the output is
  ``Question:``/``Answer:`` pairs (also ``Q:``/``A:`` at a line's start, numbered or in
  bold), alternating, none empty, at least one; the pairs are returned. ``list``: at
  least two items (``-``, ``*``, ``+``, ``•`` or ``1.``/``1)``), every other line an
  item's indented continuation, a heading (``#``, ending in ``:``, or bold alone), or
  at most one line of prose.
"""

from __future__ import annotations

import ast
import json
import re
import textwrap
import tomllib
from dataclasses import dataclass
from functools import lru_cache

# -- fenced code blocks -------------------------------------------------------------

_OPEN = re.compile(r" {0,3}(`{3,}|~{3,})[ \t]*([^\s`]*)[^`]*")
_CLOSE = re.compile(r" {0,3}(`{3,}|~{3,})[ \t]*")
ALIASES = {"python": "python", "py": "python", "python3": "python", "py3": "python",
           "json": "json", "toml": "toml"}


@dataclass(frozen=True)
class Block:
    lang: str  # the info string's first word, lower-cased ("" untagged)
    code: str
    start: int  # character span of the whole block, fences included
    end: int


def code_blocks(text: str) -> list[Block]:
    """The fenced blocks of ``text`` (an unclosed fence runs to the end)."""
    if "```" not in text and "~~~" not in text:
        return []
    blocks = []
    fence: tuple[str, int, str, int] | None = None  # char, length, lang, block start
    body: list[str] = []
    pos = 0
    for line in text.splitlines(keepends=True):
        bare = line.rstrip("\r\n")
        if fence is None:
            opener = _OPEN.fullmatch(bare)
            if opener:
                fence = (opener.group(1)[0], len(opener.group(1)), opener.group(2).lower(), pos)
                body = []
        else:
            close = _CLOSE.fullmatch(bare)
            if close and close.group(1)[0] == fence[0] and len(close.group(1)) >= fence[1]:
                blocks.append(Block(fence[2], "".join(body), fence[3], pos + len(line)))
                fence = None
            else:
                body.append(line)
        pos += len(line)
    if fence is not None:
        blocks.append(Block(fence[2], "".join(body), fence[3], len(text)))
    return blocks


def without_code(text: str) -> str:
    """``text`` with its fenced blocks taken out (the prose the other checks read)."""
    blocks = code_blocks(text)
    if not blocks:
        return text
    kept, pos = [], 0
    for block in blocks:
        kept.append(text[pos:block.start])
        pos = block.end
    kept.append(text[pos:])
    return "".join(kept)


def _strip_docstrings(tree: ast.AST) -> ast.AST:
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if (body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                    and isinstance(body[0].value.value, str)):
                node.body = body[1:] or [ast.Pass()]
    return tree


def _python_units(code: str) -> frozenset[str] | None:
    try:
        tree = ast.parse(textwrap.dedent(code))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    statements = _strip_docstrings(tree).body
    units = frozenset(ast.dump(statement) for statement in statements
                      if not isinstance(statement, ast.Pass))
    return units or None


def _json_units(code: str) -> frozenset[str] | None:
    try:
        value = json.loads(code)
    except (ValueError, RecursionError):
        return None
    return frozenset([json.dumps(value, sort_keys=True)])


def _toml_units(code: str) -> frozenset[str] | None:
    try:
        value = tomllib.loads(textwrap.dedent(code))
    except (tomllib.TOMLDecodeError, ValueError, RecursionError):
        return None
    return frozenset([json.dumps(value, sort_keys=True, default=str)]) if value else None


PARSERS = {"python": _python_units, "json": _json_units, "toml": _toml_units}


def _language(block: Block) -> str | None:
    """The block's language by its tag; untagged: JSON if it parses as JSON, else Python
    if it parses as Python (a TOML block needs its tag)."""
    if block.lang:
        return ALIASES.get(block.lang)
    stripped = block.code.lstrip()
    if stripped[:1] in ("{", "[") and _json_units(block.code) is not None:
        return "json"
    return "python" if _python_units(block.code) is not None else None


@lru_cache(maxsize=4096)  # a source is gated once per template it was rephrased with
def source_code(source: str) -> tuple[tuple[str, frozenset[str]], ...]:
    """(language, units) of each source block that parses: the code to keep."""
    found = []
    for block in code_blocks(source):
        lang = _language(block)
        units = PARSERS[lang](block.code) if lang else None
        if units:
            found.append((lang, units))
    return tuple(found)


def code_broken(source: str, output: str) -> bool:
    """Whether a source block that parses is missing from the output or no longer
    parses (each of its units must be in one of the output's blocks of its language)."""
    wanted = source_code(source)
    if not wanted:
        return False
    blocks = code_blocks(output)
    found: dict[str, frozenset[str]] = {}
    for lang, units in wanted:
        if lang not in found:  # every output block, parsed as this language, whatever its tag
            parsed = (PARSERS[lang](b.code) for b in blocks)
            found[lang] = frozenset().union(*(u for u in parsed if u))
        if not units <= found[lang]:
            return True
    return False


# -- numbers and formulae -------------------------------------------------------------

_MATH = re.compile(r"\$\$(.+?)\$\$|\\\[(.+?)\\\]|\\\((.+?)\\\)"
                   r"|\$(?=[^\s$])([^$\n]+?)(?<=\S)\$(?!\d)", re.S)
_NUMBER = re.compile(r"(?<![A-Za-z_\d.])\d+(?:,\d{3})*(?:\.\d+)?")
_SPACING = re.compile(r"\\[,;:! ]|\s|[{}]")
_WORDS = ("zero one two three four five six seven eight nine ten eleven twelve thirteen "
          "fourteen fifteen sixteen seventeen eighteen nineteen twenty").split()
_NUMBER_WORD = re.compile(r"\b(" + "|".join(_WORDS) + r")\b", re.I)


def _number(text: str) -> str:
    value = text.replace(",", "")
    if "." in value:
        value = value.rstrip("0").rstrip(".")
    return value.lstrip("0") or "0"


def _formula(text: str) -> str:
    return _SPACING.sub("", text)


@lru_cache(maxsize=4096)
def source_numbers(source: str) -> tuple[frozenset[str], frozenset[str]]:
    """(formulae, numbers outside them) of the source's prose (code is keep_code's)."""
    prose = without_code(source)
    formulae = {_formula(next(g for g in m.groups() if g is not None))
                for m in _MATH.finditer(prose)}
    numbers = {_number(n) for n in _NUMBER.findall(_MATH.sub(" ", prose))}
    return frozenset(f for f in formulae if f), frozenset(numbers)


def numbers_said(text: str) -> frozenset[str]:
    """Every number ``text`` holds, in code and formulae too, as written without
    thousands separators and trailing decimal zeros; a number word up to twenty too."""
    said = {_number(n) for n in _NUMBER.findall(text)}
    said.update(str(_WORDS.index(w.lower())) for w in _NUMBER_WORD.findall(text))
    return frozenset(said)


def numbers_lost(source: str, output: str, tolerance: float) -> bool:
    """Whether more than ``tolerance`` of the source's distinct formulae and numbers are
    missing from the output."""
    formulae, numbers = source_numbers(source)
    total = len(formulae) + len(numbers)
    if not total:
        return False
    flat = _formula(output.replace("$", ""))
    said = numbers_said(output)
    lost = sum(f not in flat for f in formulae) + len(numbers - said)
    return lost / total > tolerance


# -- output shapes --------------------------------------------------------------------

# "Question:"/"Answer:" anywhere (bold, numbered); "Q:"/"A:" only where a line starts
_QA = re.compile(
    r"(?:(?<![\w])(?:\*\*|__)?(?P<long>Question|QUESTION|Answer|ANSWER)"
    r"|^[ \t>*#-]*(?:\d+[.)][ \t]*)?(?:\*\*|__)?(?P<short>Q|A))"
    r"[ \t]*\d*[ \t]*(?:\*\*|__)?[ \t]*[:：][ \t]*(?:\*\*|__)?", re.M)
_ITEM = re.compile(r"[ \t]{0,3}(?:[-*+•]|\d{1,3}[.)])[ \t]+\S")
_HEADING = re.compile(r"[ \t]*(?:#{1,6}[ \t].*|.*:[ \t]*|(?:\*\*|__)[^*_]+(?:\*\*|__)[ \t]*)")


def qa_pairs(text: str) -> list[dict[str, str]] | None:
    """The text's question/answer pairs, or None when it does not parse into them."""
    labels = list(_QA.finditer(text))
    if not labels or len(labels) % 2:
        return None
    pairs = []
    for i in range(0, len(labels), 2):
        question, answer = labels[i], labels[i + 1]
        if ((question.group("long") or question.group("short"))[0].upper() != "Q"
                or (answer.group("long") or answer.group("short"))[0].upper() != "A"):
            return None
        end = labels[i + 2].start() if i + 2 < len(labels) else len(text)
        q = text[question.end():answer.start()].strip(" \t\r\n*_")
        a = text[answer.end():end].strip(" \t\r\n*_")
        if not q or not a:
            return None
        pairs.append({"question": q, "answer": a})
    return pairs


def is_list(text: str) -> bool:
    """Whether the text is a list: at least two items, and besides them only indented
    continuations, headings and at most one line of prose."""
    items = prose = 0
    in_item = False
    for line in text.splitlines():
        if not line.strip():
            continue
        if _ITEM.match(line):
            items += 1
            in_item = True
        elif in_item and line[:1] in (" ", "\t"):
            continue
        elif _HEADING.fullmatch(line):
            in_item = False
        else:
            prose += 1
            in_item = False
    return items >= 2 and prose <= 1
