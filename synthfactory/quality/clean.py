"""Strip what a chat model wraps around the text asked for: a leading preamble ("Sure!
Here is the rewritten text:") and a trailing offer ("Let me know if you need more").

Only the first and last paragraphs are looked at, and only when they match: a row's
own text is never cut in the middle. NeMo Curator's Nemotron-CC post-processing does
the same kind of prefix stripping before its length filters.
"""

from __future__ import annotations

import re

# What a preamble announces: the rewrite itself, never the document's own subject.
_WHAT = (r"(?:[\w'-]+\s+){0,6}?(?:text|version|rewrite|rewriting|rephrasing|paraphrase|"
         r"summary|passage|answer|explanation|tutorial|faq|article|entry|q&a|questions)\b"
         r"[^\n:]{0,80}")
_PREAMBLE = re.compile(
    r"^\s*(?:(?:sure|certainly|of\s+course|absolutely|okay|ok|great|alright)\b[^\n]{0,40}?"
    r"[,:!.]\s*)?"
    r"(?:(?:here(?:'s|\s+is|\s+are)|below\s+is|the\s+following\s+is)\s+" + _WHAT + r":"
    r"|(?:sure|certainly|of\s+course|absolutely)[!.])"
    r"[ \t]*(?:\n+|\s+(?=\S)|$)",
    re.I,
)
# An offer addresses the reader as an assistant would; a document's own closing
# sentence ("If you need more, see ...") is kept.
_OFFER = re.compile(
    r"(?:\n+|(?<=[.!?])\s+)"
    r"(?:i\s+hope\s+(?:this|that|it)\s+helps|let\s+me\s+know\b|"
    r"feel\s+free\s+to\s+(?:ask|reach|let)|"
    r"if\s+you(?:'d|\s+would)?\s+(?:like|need|want)\s+(?:me\s+to|any\s+(?:more|further)|"
    r"more\s+(?:help|details|information|examples)|further|another|additional|"
    r"a\s+different)|would\s+you\s+like\s+(?:me|another|more|a\s)|"
    r"is\s+there\s+anything\s+else)"
    r"[^\n]{0,300}\s*$",
    re.I,
)


def clean_text(text: str) -> str:
    """``text`` without a leading chat preamble or a trailing offer, stripped."""
    text = text or ""
    text = _PREAMBLE.sub("", text, count=1)
    text = _OFFER.sub("", text, count=1)
    return text.strip()
