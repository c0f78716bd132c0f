"""Grounding: does an output say what its source says, and only that? Words only, on a
CPU, with no model (docs/adr/0148 says what each score measures and why each bound is
where it is).

The output is cut into sentences (blingfire's sentence breaker, on each block between
blank lines: a heading or a list item is its own sentence; fenced code left out, which
keep_code judges), the source read as one stream of terms in the order it first uses
them (its code included: an output's prose may explain it). Terms are words stemmed by
Snowball's English stemmer, each weighted by how rare the word is in general English
(wordfreq's Zipf frequency: "the" weighs nothing, "harness" much, a name or an
identifier most). A term of the output is *supported* when the source has the same
stem, or a stem sharing its first five letters ("admin" and "administrative").

The scores, one set per row, kept with its verdict (docs/quality.md):
- ``grounded``: the share of the output's content weight that its source has. A
  faithful rewrite in other words keeps the names and terms (0.35 and up on the
  labelled rows); another document's rephrase has almost none (0.12 and under).
- ``drift``: the lowest ratio of a tail's support to the support of what precedes it,
  over the output's tails of at most half its weight (1.0: none lower). A paragraph the
  source never says, after a faithful rephrase, drops to a third of the body's support;
  a reworded output is low evenly, from its first sentence to its last.
- ``kept``: the share of the source's content weight that the output has (a summary
  keeps less than a tutorial), and ``end_kept``: the share of the terms the last third
  of the source brings (terms it is first to use) that the output has, as a ratio to
  the share of the first two thirds' (the first half of a source only: near 0).
- ``invented``: names, identifiers and numbers of the output that the source does not
  have, and ``changed``: whether a number of the source's prose is gone from the output
  while a new one came in (a changed date, a changed count).
- ``repeated``: sentences of the output that repeat an earlier one word for word or
  nearly (word 3-gram Jaccard >= ``NEAR``): a block written twice.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from dataclasses import dataclass
from functools import lru_cache

from synthfactory.quality import domain

# A tail of the output whose support is under DRIFT times the support of the body
# before it, and under TAIL_SUPPORT itself, is a drift away from the source
# (ungrounded); 7 of the 9 labelled added paragraphs fall under 0.5 of their body (the
# other two name what the source does not: invented), the faithful and reworded rows'
# tails stay at 0.63 and above (docs/adr/0148).
DRIFT, TAIL_SUPPORT = 0.5, 0.5
# a drifting tail is a paragraph: at least two sentences (a rewrite's closing sentence in
# its own words, "The longer the money stays invested, the faster ...", is not a drift)
MIN_TAIL_SENTENCES = 2
# The last third of the source kept at under END_KEPT of the rate of its first two
# thirds: the output stops halfway (content_lost); 8 of the 10 labelled first halves
# 0.00-0.31, faithful and reworded rows 0.37 and above.
END_KEPT = 0.35
END_MIN_TERMS = 24  # a source with fewer content terms has no end to lose
# a sentence under SUPPORTED of whose content weight its source has: where the trim may
# not end an output
SUPPORTED = 0.34
# two sentences of the output whose word 3-gram sets have this Jaccard are one repeated:
# half the 3-grams shared is one sentence written again with another noun ("If this code
# is found within a script, the script must be examined ..." then "... a configuration
# file, the configuration file must be examined ..."); no labelled faithful row has two
# such sentences (0.8 let 5 of the demo's 24 usable rows through with one; ADR 0148)
NEAR = 0.5
# a sentence shorter than this (words) is neither judged for support nor for repeats:
# a heading, "Recap:", "Step 2." say little either way
MIN_SENTENCE_WORDS = 5
REPEAT_MIN_WORDS = 8
PREFIX = 5  # letters two stems must share to count as one term (admin, administr)
# the weight of a word: how much rarer than a very common word it is (Zipf 6.5: "also",
# "made"), capped so that a typo does not outweigh a sentence
COMMON_ZIPF, MAX_WEIGHT = 6.5, 4.0

_WORD = re.compile(r"\w+")
_BLOCK = re.compile(r"\n[ \t]*\n")
_LINE_ITEM = re.compile(r"^[ \t]*(?:[-*+•>]|#{1,6}|\d{1,3}[.)]|\*\*[^*\n]+\*\*:?)[ \t]+",
                        re.M)
# identifiers: dotted names, snake_case, calls, camelCase, backticked spans
_IDENTIFIER = re.compile(r"`([^`\n]{1,60})`|\b([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+|"
                         r"[A-Za-z]\w*_\w+|[a-z]+[A-Z]\w*|[A-Za-z_]\w*(?=\(\)))")
# a capitalised word (a name) and a sentence's first word (not a name for that)
_CAPITALISED = re.compile(r"\b[A-Z][a-z]+(?:[A-Z][a-z]+)*\b|\b[A-Z]{2,}\b")
_OPENING = re.compile(r"^[\W\d_]*(\w+)")
# a word right after a colon opens a clause ("Step 3: The car ...")
_AFTER_COLON = re.compile(r"(?::|\s[-–—])\s*$")
# numbers the output counts with, not facts: "Step 2", "Question 1", "1." at a line start
_ENUMERATOR = re.compile(r"(?:\b(?:step|question|answer|part|example|q|a|item|section|"
                         r"chapter|exercise|problem)\s+\d+\b|^[ \t]*\d{1,3}[.):])", re.I | re.M)


@lru_cache(maxsize=1)
def _stemmer():
    import snowballstemmer

    return snowballstemmer.stemmer("english")


_TERMS: dict[str, tuple[str, float]] = {}  # word -> (stem, weight), every word seen once
_MAX_TERMS = 500_000  # words kept (a few tens of MB); past it the cache starts again


def _term(word: str) -> tuple[str, float]:
    """A lower-cased word's stem and weight (0: a function word, not content)."""
    found = _TERMS.get(word)
    if found is None:
        from wordfreq import zipf_frequency

        if len(_TERMS) >= _MAX_TERMS:
            _TERMS.clear()
        weight = min(MAX_WEIGHT, max(0.0, COMMON_ZIPF - zipf_frequency(word, "en")))
        found = _TERMS[word] = (_stemmer().stemWord(word), weight)
    return found


@dataclass(frozen=True)
class Sentence:
    text: str
    start: int  # where it starts in the text it was cut from
    terms: dict[str, float]  # stem -> weight
    weight: float  # the terms' weights summed
    words: int


def _sentence(text: str, start: int) -> Sentence:
    words = _WORD.findall(text.lower())
    terms = _terms(words)
    return Sentence(text, start, terms, sum(terms.values()), len(words))


def _code_terms(text: str) -> dict[str, float]:
    terms: dict[str, float] = {}
    for block in domain.code_blocks(text):
        terms.update(_terms(_WORD.findall(block.code.lower())))
    return terms


def _terms(words: list[str]) -> dict[str, float]:
    terms: dict[str, float] = {}
    for word in words:
        stem, weight = _TERMS.get(word) or _term(word)
        if weight > 0:
            terms[stem] = weight
    return terms


def sentences(text: str) -> list[Sentence]:
    """``text``'s sentences with where each starts: blocks between blank lines, lines
    that start a list item or heading, then blingfire's sentences within each.
    blingfire's own offsets cost ten times its split (a Python loop over its tokens), so
    each sentence is found in its block by its first word, from where the last one was."""
    import blingfire

    out: list[Sentence] = []
    for block_start, block in _pieces(text):
        pos = 0
        for piece in blingfire.text_to_sentences(block).split("\n"):
            if not piece.strip():
                continue
            found = block.find(piece.split(None, 1)[0], pos)
            pos = found if found >= 0 else pos
            out.append(_sentence(piece, block_start + pos))
    return out


def _pieces(text: str) -> list[tuple[int, str]]:
    """Blocks between blank lines, each list item or heading line its own piece; fenced
    code left out."""
    spans: list[tuple[int, int]] = []
    pos = 0
    for block in domain.code_blocks(text):
        spans.append((pos, block.start))
        pos = block.end
    spans.append((pos, len(text)))
    pieces = []
    for lo, hi in spans:
        cuts = {lo, hi}
        cuts.update(lo + m.start() for m in _BLOCK.finditer(text, lo, hi))
        cuts.update(m.start() for m in _LINE_ITEM.finditer(text, lo, hi))
        edges = sorted(cuts)
        for a, b in zip(edges, edges[1:], strict=False):
            if text[a:b].strip():
                pieces.append((a, text[a:b]))
    return pieces


class SourceTerms:
    """The source's terms, for looking up an output's: by stem, and by a stem's first
    ``PREFIX`` letters; in the order the source first uses them (its last third's
    terms: ``end_kept``). One pass over its words, code included (an output's prose may
    explain the source's code): a source is not cut into sentences, only outputs are."""

    def __init__(self, text: str):
        self.lower = text.lower()
        words = dict.fromkeys(_WORD.findall(self.lower))  # each once, in order of first use
        self.words = set(words)
        self.stems: dict[str, float] = {}  # in order of first use
        for word in words:
            stem, weight = _TERMS.get(word) or _term(word)
            if weight > 0 and stem not in self.stems:
                self.stems[stem] = weight
        self.prefixes = {stem[:PREFIX] for stem in self.stems if len(stem) >= PREFIX}
        # every number it says (code too), and those its prose states as facts
        self.numbers_said = domain.numbers_said(text)
        self.facts = _numbers(text)

    def has(self, stem: str) -> bool:
        return stem in self.stems or (len(stem) >= PREFIX and stem[:PREFIX] in self.prefixes)


@lru_cache(maxsize=1024)
def source_terms(source: str) -> SourceTerms:
    """A source's terms, once for all its rows (its templates, its attempts, the trim's
    candidates)."""
    return SourceTerms(source)


@lru_cache(maxsize=1024)
def english(source: str, min_words: int, confidence: float) -> bool:
    """Whether the source is English, or too short (under ``min_words``) or too mixed
    (py3langid under ``confidence``) to say: the gate's language check and its bounds.
    The stems, the word weights and what a name looks like are English here; a German
    noun is capitalised, and its stem is no English stem."""
    from synthfactory.quality import checks

    if len(_WORD.findall(source)) < min_words:
        return True
    lang, prob = checks.language(source)
    return lang == "en" or prob < confidence


def clear_caches() -> None:
    """Forget every source and word seen (the benchmark's rounds start cold)."""
    source_terms.cache_clear()
    english.cache_clear()
    _TERMS.clear()


def support(sentence: Sentence, source: SourceTerms) -> float:
    """The share of the sentence's content weight that the source has (1.0 when it has
    no content word)."""
    total = sentence.weight
    if not total:
        return 1.0
    return sum(w for stem, w in sentence.terms.items() if source.has(stem)) / total


def judged(sentence: Sentence) -> bool:
    return sentence.words >= MIN_SENTENCE_WORDS


def _shingles(text: str) -> frozenset[tuple[str, ...]]:
    tokens = _WORD.findall(text.lower())
    return frozenset(tuple(tokens[i:i + 3]) for i in range(len(tokens) - 2))


def repeats(sents: list[Sentence]) -> list[int]:
    """Indices of the sentences that repeat an earlier one, word for word or nearly."""
    seen: list[frozenset] = []
    out = []
    for i, s in enumerate(sents):
        if s.words < REPEAT_MIN_WORDS:
            continue
        grams = _shingles(s.text)
        if any(len(grams & g) / len(grams | g) >= NEAR for g in seen):
            out.append(i)
        seen.append(grams)
    return out


def _names(sents: list[Sentence]) -> set[str]:
    """Capitalised words that are not a sentence's or a line's first word, lower-cased."""
    out = set()
    for piece in sents:
        if piece.text.isupper():
            continue  # shouted, not named: every word of it capitalised
        opening = _OPENING.match(piece.text)
        first = opening.start(1) if opening else -1
        for m in _CAPITALISED.finditer(piece.text):
            word = m.group().lower()
            before = piece.text[max(0, m.start() - 4):m.start()]
            if (m.start() == first or _AFTER_COLON.search(before)
                    or not _term(word)[1]):  # a function word capitalised ("The")
                continue
            out.add(word)
    return out


def _identifiers(text: str) -> set[str]:
    found = set()
    for m in _IDENTIFIER.finditer(text):
        found.add((m.group(1) or m.group(2)).strip().lower().rstrip("()"))
    return {f for f in found if f}


def _numbers(text: str) -> frozenset[str]:
    """The numbers an output states as facts: in its prose, outside formulae (a
    solution computes new ones) and enumerators ("Step 2": the output's counting)."""
    return domain.source_numbers(_ENUMERATOR.sub(" ", text))[1]


def invented(source: str, output: str, src: SourceTerms, out_sents: list[Sentence],
             numbers: bool = True) -> tuple[list[str], bool]:
    """The output's names, identifiers and (with ``numbers``) numbers that the source
    does not have, and whether a new number took the place of one of the source's (a
    changed fact). A changed name is counted, not matched to the one it replaced: a
    rewrite drops names often ("Python" for "the language")."""
    prose = domain.without_code(output)
    new: set[str] = set()
    for ident in _identifiers(prose):
        if ident not in src.lower:
            new.add(ident)
    for name in _names(out_sents):  # the sentences leave fenced code out
        stem, _ = _term(name)
        if name not in src.words and not src.has(stem):
            new.add(name)
    changed = False
    if numbers:
        new_numbers = _numbers(output) - src.numbers_said
        new.update(new_numbers)
        # a number of the source's prose the output no longer says, and a new one:
        # replaced, not added
        changed = bool(new_numbers and src.facts - domain.numbers_said(output))
    return sorted(new), changed


# a verdict's score columns (Scores.as_columns), in order
SCORE_NAMES = ("grounded", "drift", "content_kept", "end_kept", "invented_terms",
               "repeated_sentences")


@dataclass(frozen=True)
class Scores:
    grounded: float  # the share of the output's content weight its source has
    drift: float  # the lowest tail-to-body support ratio (1.0: no tail lower)
    kept: float  # the share of the source's content weight the output has
    end_kept: float  # the source's last third kept, as a ratio to its first two thirds'
    invented: tuple[str, ...]  # the output's names, identifiers, numbers not in the source
    changed: bool  # a number of the source's gone from the output, a new one in its place
    repeated: int  # sentences repeating an earlier one
    drift_at: int | None  # where the drifting tail starts (offset in the output)
    tail_support: float  # that tail's own support

    def drifts(self) -> bool:
        return self.drift < DRIFT and self.tail_support < TAIL_SUPPORT

    def as_columns(self) -> dict:
        return {"grounded": round(self.grounded, 4), "drift": round(self.drift, 4),
                "content_kept": round(self.kept, 4), "end_kept": round(self.end_kept, 4),
                "invented_terms": list(self.invented), "repeated_sentences": self.repeated}


def _pooled(sents: list[Sentence], src: SourceTerms) -> tuple[float, float]:
    """(weight the source has, total weight) of ``sents``."""
    hit = total = 0.0
    for s in sents:
        for stem, weight in s.terms.items():
            total += weight
            if src.has(stem):
                hit += weight
    return hit, total


def _drift(sents: list[Sentence], src: SourceTerms) -> tuple[float, float, int | None]:
    """(lowest tail/body support ratio, that tail's support, where it starts) over the
    tails of judged sentences holding at most half the output's judged weight."""
    judged_ = [s for s in sents if judged(s)]
    pooled = [_pooled([s], src) for s in judged_]
    total = sum(t for _, t in pooled)
    best = (1.0, 1.0, None)
    tail_hit = tail_total = 0.0
    body_hit, body_total = sum(h for h, _ in pooled), total
    for k in range(len(judged_) - 1, 0, -1):  # the tail grows one sentence at a time
        hit, weight = pooled[k]
        tail_hit, tail_total = tail_hit + hit, tail_total + weight
        body_hit, body_total = body_hit - hit, body_total - weight
        if tail_total > total / 2:
            break
        if (len(judged_) - k < MIN_TAIL_SENTENCES or not tail_total or not body_total
                or not body_hit):
            continue
        ratio = (tail_hit / tail_total) / (body_hit / body_total)
        if ratio < best[0]:
            best = (ratio, tail_hit / tail_total, judged_[k].start)
    return best


def _end_kept(src: SourceTerms, in_output) -> float:
    """The share of the terms the source's last third brings (by weight, in the order it
    first uses them) that the output has, as a ratio to the share of its first two
    thirds' (1.0 for a source of fewer than END_MIN_TERMS terms: a sentence or two)."""
    total = sum(src.stems.values())
    if len(src.stems) < END_MIN_TERMS or not total:
        return 1.0
    head_hit = head = end_hit = end = acc = 0.0
    for stem, weight in src.stems.items():
        hit = weight if in_output(stem) else 0.0
        if acc >= total * 2 / 3:
            end_hit, end = end_hit + hit, end + weight
        else:
            head_hit, head = head_hit + hit, head + weight
        acc += weight
    if not end or not head or not head_hit:
        return 1.0
    return (end_hit / end) / (head_hit / head)


def score(source: str, output: str, numbers: bool = True) -> Scores:
    """The grounding scores of ``output`` against ``source``. ``numbers``: whether the
    output's numbers are judged here (not where the template declares keep_numbers: a
    solution computes new numbers, and a changed or lost one is numbers_lost's, within
    the tolerance the template declares)."""
    src = source_terms(source)
    out_sents = sentences(output)
    hit, total = _pooled(out_sents, src)
    # the output's code is what it says too: a tutorial that keeps its source's code
    # verbatim and frames it in a sentence of its own is grounded in that code
    code = _code_terms(output)
    for stem, weight in code.items():
        total += weight
        hit += weight if src.has(stem) else 0.0
    grounded = hit / total if total else 1.0
    drift, tail_support, drift_at = _drift(out_sents, src)
    out_terms: dict[str, float] = dict(code)
    for s in out_sents:
        out_terms.update(s.terms)
    out_prefixes = {stem[:PREFIX] for stem in out_terms if len(stem) >= PREFIX}

    def in_output(stem: str) -> bool:
        return stem in out_terms or (len(stem) >= PREFIX and stem[:PREFIX] in out_prefixes)

    src_total = sum(src.stems.values())
    kept = (sum(w for stem, w in src.stems.items() if in_output(stem)) / src_total
            if src_total else 1.0)
    new, changed = invented(source, output, src, out_sents, numbers)
    return Scores(grounded, drift, kept, _end_kept(src, in_output), tuple(new), changed,
                  len(repeats(out_sents)), drift_at, tail_support)


def cut_filter(source: str, output: str):
    """Where the trim may cut ``output`` (quality/repair.py): before its first repeated
    sentence, before a tail that drifts from the source, and right after a sentence at
    least SUPPORTED of whose content its source has, so that a trimmed output keeps no
    block written twice and does not end in what its source does not say. Scored at
    the first cut asked about: most outputs are never trimmed."""
    state: dict = {}

    def allowed(cut: int) -> bool:
        if not state:
            src = source_terms(source)
            sents = sentences(output)
            again = repeats(sents)
            limit = sents[again[0]].start if again else len(output)
            ok = [support(s, src) >= SUPPORTED for s in sents]
            drift, tail_support, drift_at = _drift(sents, src)
            if drift < DRIFT and tail_support < TAIL_SUPPORT and drift_at is not None:
                # the drift starts at its tail's first sentence the source does not
                # support (the lowest tail may begin a supported sentence early)
                limit = min(limit, next((s.start for s, good in zip(sents, ok, strict=True)
                                         if s.start >= drift_at and not good), drift_at))
            state["limit"] = limit
            state["starts"] = [s.start for s in sents]
            state["ok"] = ok
        if cut > state["limit"]:
            return False
        last = bisect_left(state["starts"], cut) - 1  # the sentence the cut ends
        return last >= 0 and state["ok"][last]

    return allowed
