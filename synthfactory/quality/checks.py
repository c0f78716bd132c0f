"""Row checks that look at one source/output pair at a time."""

from __future__ import annotations

import re
from functools import lru_cache

REFUSAL = re.compile(
    r"^\s*(i'?m sorry|i am sorry|i cannot|i can'?t|as an ai|i'?m unable|i am unable)", re.I)
_WORD = re.compile(r"\w+")


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def repetition_ratio(text: str, n: int = 4) -> float:
    """Share of word n-grams that repeat an earlier one: degenerate loops score high."""
    tokens = text.split()
    grams = [tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1)]
    if not grams:
        return 0.0
    return 1.0 - len(set(grams)) / len(grams)


def ngrams(tokens: list[str], n: int) -> set[tuple[str, ...]]:
    return {tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1)}


def copy_overlap(source_words: list[str], output_words: list[str], n: int) -> float:
    """Share of the output's word n-grams that also appear in the source (0 when the
    output is shorter than n words: too short to tell copying from agreement)."""
    out = ngrams(output_words, n)
    if not out:
        return 0.0
    return len(out & ngrams(source_words, n)) / len(out)


def length_ratio(source_words: list[str], output_words: list[str]) -> float | None:
    """Output words per source word; None for an empty source (nothing to compare)."""
    return len(output_words) / len(source_words) if source_words else None


@lru_cache(maxsize=1)
def _identifier():
    # py3langid's model ships inside the package: nothing is downloaded at run time.
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    return LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)


def language(text: str) -> tuple[str, float]:
    """(ISO 639-1 code, probability) of ``text``'s language."""
    lang, prob = _identifier().classify(text)
    return lang, float(prob)
