"""A document too long for the context window, cut into chunks that fit (ADR 0134).

Pure Python, no Spark: the stitch job calls it in a ``mapInArrow`` over the documents
that do not fit, with the broadcast tokenizer's counter; tests call it directly.

Cuts go where the text's structure is, coarsest first, and only as fine as needed:

1. sections: before each heading (ATX ``# ...`` or a setext line underlined with
   ``===``/``---``), outside fenced code;
2. blocks: after each run of blank lines; a fenced code block (````` ``` `````, ``~~~``)
   and a ``$$`` display-math block are one block each, blank lines inside included, so
   one that fits is never cut;
3. lines;
4. sentences (after ``.``, ``!``, ``?`` and the space that follows);
5. words: after each run of spaces, the last resort. A word is never cut: a run of text
   without a space or line break that is longer than a chunk (a base64 blob, a minified
   line) is the unit no split can fit, and the document is quarantined for it.

A span that fits is kept whole; one that does not is cut at the next level, and the
pieces are packed back together, in order, as long as they fit. Cuts fall between
characters and whitespace stays with the text before it, so the chunks' texts joined
are the document exactly. Every chunk's tokens are counted again after the cut
(BPE merges at a cut can shift a count by a token or two). Nothing depends on anything
but the text, the counter and the size: the same inputs give the same chunks.
"""

from __future__ import annotations

import bisect
import math
import re
from collections.abc import Callable
from dataclasses import dataclass

Count = Callable[[list[str]], list[int]]  # texts -> their token counts

SECTION, BLOCK, LINE, SENTENCE, WORD = range(5)
MIN_CHUNK_TOKENS = 32  # a window that leaves less room than this cannot rephrase a chunk
DRIFT = 8  # room for estimate drift: a chunk is counted alone, the prompt counts it inside
TITLE_TOKENS = 20  # the title and heading path a chunk's context gives, trimmed to these
PATH_TOKENS = 32
PATH_SEPARATOR = " > "
# A chunk index or count never has more digits than this in the reserve's worst case.
_MAX_NUMBER = 9_999_999
_TRIM_CHARS = 1000  # more than any title or heading of a few dozen tokens needs

_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")
_ATX = re.compile(r" {0,3}(#{1,6})(?:[ \t]+(.*?))?[ \t]*$")
_ATX_CLOSE = re.compile(r"(?:^|[ \t]+)#+$")
_SETEXT = re.compile(r" {0,3}(=+|-+)[ \t]*$")
_SENTENCE_END = re.compile(r"[.!?][\"'\u201d\u2019)\]]*[ \t]+"  # then a space
                           r"|[\u3002\uff01\uff1f][\"'\u201d\u2019)\]\u300d\u300f]*[ \t]*")
_SPACE = re.compile(r"\s+")
_LEADING_SPACE = re.compile(r"\s*")


@dataclass(frozen=True)
class Chunk:
    start: int  # character offsets into the document: text == document[start:end]
    end: int
    text: str
    tokens: int  # counted on the chunk's own text
    heading_path: tuple[str, ...]  # the headings around the chunk's first word, outermost first


@dataclass(frozen=True)
class Chunks:
    title: str  # the first level-1 heading, else the first heading, else the first line
    chunks: tuple[Chunk, ...]
    unsplittable: int | None = None  # tokens of the first unit no split can fit


class _Unsplittable(Exception):
    def __init__(self, tokens: int):
        super().__init__(tokens)
        self.tokens = tokens


@dataclass(frozen=True)
class _Heading:
    start: int  # where its line (a setext heading: its text line) starts
    level: int
    text: str


def split_document(text: str, count: Count, max_tokens: int) -> Chunks:
    """``text`` cut into chunks of at most ``max_tokens`` tokens (see the module's doc).
    A unit no split can fit gives no chunks and its token count in ``unsplittable``."""
    if max_tokens < 1:
        raise ValueError(f"max_tokens must be positive, got {max_tokens}")
    structure = _Structure(text)
    title = _trim(structure.title(), count, TITLE_TOKENS)
    try:
        spans = _Splitter(text, structure, count, max_tokens, exact=False).split()
        tokens = count([text[a:b] for a, b in spans])
        if max(tokens) > max_tokens:  # packed by estimates that drifted: count every join
            spans = _Splitter(text, structure, count, max_tokens, exact=True).split()
            tokens = count([text[a:b] for a, b in spans])
    except _Unsplittable as unit:
        return Chunks(title=title, chunks=(), unsplittable=unit.tokens)
    return Chunks(title=title, chunks=tuple(
        Chunk(a, b, text[a:b], n, _trim_path(structure.heading_path(a), count))
        for (a, b), n in zip(spans, tokens, strict=True)))


def context(index: int, count: int, title: str, heading_path: tuple[str, ...] | list[str]
            ) -> str:
    """What a chunk's prompt adds to its template's system message: which part of which
    text it is, and that the model rewrites this part only (no opening, no closing)."""
    where = f"The text to rewrite is part {index + 1} of {count} of a longer document"
    if title:
        where += f' titled "{title}"'
    if heading_path:
        where += f', from the section "{PATH_SEPARATOR.join(heading_path)}"'
    if index == 0:
        how = ("it is the beginning and more parts follow, so do not add a conclusion or "
               "a summary")
    elif index < count - 1:
        how = ("it continues the part before it and more parts follow, so do not add an "
               "introduction, a title, a conclusion or a summary")
    else:
        how = ("it is the end of the text and continues the part before it, so do not add "
               "an introduction or a title")
    return f"\n\n{where}. Rewrite only this part: {how}."


def context_reserve(count: Count) -> int:
    """Tokens set aside in every chunk's prompt for its ``context``: the longest it can be
    with a title of TITLE_TOKENS and a heading path of PATH_TOKENS, plus merges."""
    fixed = max(count([context(index, _MAX_NUMBER, "T", ("P",))
                       for index in (0, _MAX_NUMBER - 2, _MAX_NUMBER - 1)]))
    return fixed + TITLE_TOKENS + PATH_TOKENS + 4


def max_chunk_tokens(window: int, overhead: int, *, ratio: float | None = None,
                     new_tokens: int | None = None, margin: int = 0) -> int:
    """The largest chunk (tokens) whose prompt, ``overhead`` plus the chunk, and its full
    budget fit ``window`` with DRIFT to spare: ``new_tokens`` when fixed, else
    ceil(chunk x ``ratio``) + ``margin`` (``max_new_tokens auto``). Can be below 1."""
    room = window - overhead - DRIFT
    if ratio is None:
        if new_tokens is None:
            raise ValueError("max_chunk_tokens needs a ratio or new_tokens")
        return room - new_tokens

    def fits(t: int) -> bool:
        return t + math.ceil(t * ratio) + margin <= room

    t = max(0, math.floor((room - margin) / (1 + ratio)))
    while fits(t + 1):
        t += 1
    while t > 0 and not fits(t):
        t -= 1
    return t if fits(t) else -1


def unsplittable_reason(tokens: int, max_tokens: int, window: int) -> str:
    return (f"no split fits the context window (a unit of {tokens} tokens without a space "
            f"or line break; a chunk holds at most {max_tokens} tokens at "
            f"--max-model-len {window})")


class _Structure:
    """Where a document's headings, blocks and lines start, in one pass over its lines."""

    def __init__(self, text: str):
        self.text = text
        self.line_starts: list[int] = []
        self.headings: list[_Heading] = []
        self.block_starts: list[int] = []
        lines = [(m.start(), m.group()) for m in re.finditer(r"[^\n]*\n|[^\n]+$", text)]
        previous_blank = True
        previous_text = False  # the line before can be a setext heading's text
        fence: tuple[str, int] | None = None  # the open fence's character and length
        math_open = False
        for i, (start, line) in enumerate(lines):
            self.line_starts.append(start)
            body = line.rstrip("\r\n")
            blank = not body.strip()
            if fence is not None:  # inside fenced code: only its closing line matters
                close = _FENCE.match(body)
                if (close and close.group(1)[0] == fence[0] and len(close.group(1)) >= fence[1]
                        and not body[close.end():].strip()):
                    fence = None
                previous_blank, previous_text = blank or fence is None, False
                continue
            if math_open:
                math_open = "$$" not in body
                previous_blank, previous_text = blank or not math_open, False
                continue
            opener = _FENCE.match(body)
            if opener and not (opener.group(1)[0] == "`" and "`" in body[opener.end():]):
                fence = (opener.group(1)[0], len(opener.group(1)))
                self.block_starts.append(start)
                previous_blank, previous_text = False, False
                continue
            stripped = body.strip()
            if stripped.startswith("$$") and (
                    "$$" in stripped[2:] or any("$$" in rest for _, rest in lines[i + 1:])):
                math_open = "$$" not in stripped[2:]
                self.block_starts.append(start)
                previous_blank, previous_text = not math_open, False  # one line: it ended
                continue
            atx = _ATX.match(body)
            if atx:
                heading = _ATX_CLOSE.sub("", (atx.group(2) or "")).strip()
                self.headings.append(_Heading(start, len(atx.group(1)), heading))
                self.block_starts.append(start)
                previous_blank, previous_text = False, False
                continue
            underline = _SETEXT.match(body)
            if underline and previous_text and len(underline.group(1)) >= 3:
                above = lines[i - 1][0]
                level = 1 if underline.group(1)[0] == "=" else 2
                self.headings.append(_Heading(above, level, lines[i - 1][1].strip()))
                if not self.block_starts or self.block_starts[-1] != above:
                    self.block_starts.append(above)
                previous_blank, previous_text = False, False
                continue
            if not blank and previous_blank:
                self.block_starts.append(start)
            previous_blank, previous_text = blank, not blank
        self.section_starts = [h.start for h in self.headings]

    def title(self) -> str:
        for level in (1, None):
            for heading in self.headings:
                if heading.text and (level is None or heading.level == level):
                    return heading.text
        for line in self.text.splitlines():  # no heading: the first line of text
            if line.strip(" \t#*=-`>") and not _FENCE.match(line) and "$$" not in line:
                return line.strip(" \t#*=-`>")
        return ""

    def heading_path(self, start: int) -> tuple[str, ...]:
        """The headings around the first non-space character at or after ``start``."""
        word = _LEADING_SPACE.match(self.text, start).end()
        stack: list[_Heading] = []
        for heading in self.headings:
            if heading.start > word:
                break
            while stack and stack[-1].level >= heading.level:
                stack.pop()
            stack.append(heading)
        return tuple(h.text for h in stack if h.text)

    def cuts(self, a: int, b: int, level: int) -> list[int]:
        """Where a span may be cut at ``level``, strictly inside it, in order."""
        starts = {SECTION: self.section_starts, BLOCK: self.block_starts,
                  LINE: self.line_starts}.get(level)
        if starts is not None:
            return starts[bisect.bisect_right(starts, a):bisect.bisect_left(starts, b)]
        pattern = _SENTENCE_END if level == SENTENCE else _SPACE
        return [m.end() for m in pattern.finditer(self.text, a, b) if a < m.end() < b]


class _Splitter:
    def __init__(self, text: str, structure: _Structure, count: Count, limit: int,
                 exact: bool):
        self.text, self.structure, self.count, self.limit = text, structure, count, limit
        self.exact = exact  # count every packed chunk, not the sum of its pieces

    def split(self) -> list[tuple[int, int]]:
        n = self.count([self.text])[0]
        return [(a, b) for a, b, _ in self._split(0, len(self.text), n, SECTION)]

    def _split(self, a: int, b: int, n: int, level: int) -> list[tuple[int, int, int]]:
        if n <= self.limit:
            return [(a, b, n)]
        cuts: list[int] = []
        while level <= WORD and not cuts:
            cuts = self.structure.cuts(a, b, level)
            level += 1
        if not cuts:
            raise _Unsplittable(n)
        bounds = [a, *cuts, b]
        spans = list(zip(bounds, bounds[1:], strict=False))
        counts = self.count([self.text[s:e] for s, e in spans])
        pieces: list[tuple[int, int, int]] = []
        for (s, e), c in zip(spans, counts, strict=True):
            pieces += self._split(s, e, c, level)
        return self._pack(pieces)

    def _pack(self, pieces: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
        """Adjacent pieces joined, in order, while the join fits."""
        packed: list[tuple[int, int, int]] = []
        for s, e, c in pieces:
            if not packed:
                packed.append((s, e, c))
                continue
            ps, _, pc = packed[-1]
            estimate = pc + c
            if not self.exact and estimate <= self.limit - DRIFT:
                packed[-1] = (ps, e, estimate)
            elif estimate <= self.limit + DRIFT:
                joined = self.count([self.text[ps:e]])[0]
                if joined <= self.limit:
                    packed[-1] = (ps, e, joined)
                else:
                    packed.append((s, e, c))
            else:
                packed.append((s, e, c))
        return packed


def _trim(text: str, count: Count, limit: int) -> str:
    """``text`` on one line, cut to at most ``limit`` tokens (with "...")."""
    text = " ".join(text[:_TRIM_CHARS].split())
    if not text or count([text])[0] <= limit:
        return text
    low, high = 0, len(text)  # the longest prefix that fits with its ellipsis
    while low < high:
        mid = (low + high + 1) // 2
        if count([text[:mid].rstrip() + "..."])[0] <= limit:
            low = mid
        else:
            high = mid - 1
    return text[:low].rstrip() + "..." if low else ""


def _trim_path(path: tuple[str, ...], count: Count) -> tuple[str, ...]:
    """The innermost headings that fit PATH_TOKENS together, each on one line."""
    path = tuple(" ".join(p.split()) for p in path)
    while len(path) > 1 and count([PATH_SEPARATOR.join(path)])[0] > PATH_TOKENS:
        path = path[1:]
    if path and count([path[0]])[0] > PATH_TOKENS:
        path = (_trim(path[0], count, PATH_TOKENS),)
    return tuple(p for p in path if p)
