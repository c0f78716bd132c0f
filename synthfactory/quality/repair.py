"""Repairs that cost no GPU: an output that ran on to its token budget, cut back to the
end of a whole sentence or block, kept only when what remains passes every check of the
gate, and marked ``trimmed`` (its finish_reason), never silently (docs/adr/0141).

Only outputs that stopped at their budget are trimmed, and only when the rest of what
the gate found wrong is what a run-on causes (too_long, repetition: a loop that ran to
the budget; ungrounded, invented, repeated_block: a tail its source does not say, a
block written again): the model said what it had to say and went on. The cut falls
where the output is still grounded (quality/grounding.py's ``cut_filter``: right after
a sentence the source supports, before any repeated block), and of those cuts the
longest prefix that passes every check is kept (docs/adr/0148). An output that stopped by
itself is the model's whole answer, and cutting it would be choosing a part of it.
"""

from __future__ import annotations

import re
from collections.abc import Callable

TRIMMED = "trimmed"  # the finish_reason of a trimmed output
# what a cut can fix, besides the truncation itself
TRIMMABLE = frozenset({"truncated", "too_long", "repetition", "ungrounded", "invented",
                       "repeated_block"})
MAX_CUTS = 64  # cut points tried per output, longest first: bounds the gate's work

# the end of a sentence (closing quotes and brackets kept), or a blank line between blocks
_SENTENCE_END = re.compile(r"[.!?](?:[\"')\]]*)(?=\s)|[.!?][\"')\]]*$")
_BLOCK_END = re.compile(r"\n[ \t]*\n")
_FENCE = re.compile(r"^[ \t]*```", re.M)


def cut_points(text: str) -> list[int]:
    """Where ``text`` may be cut: after each sentence end and before each blank line,
    outside code fences, longest prefix first."""
    fences = [m.start() for m in _FENCE.finditer(text)]

    def in_code(at: int) -> bool:
        return sum(1 for f in fences if f < at) % 2 == 1

    ends = {m.end() for m in _SENTENCE_END.finditer(text)}
    ends |= {m.start() for m in _BLOCK_END.finditer(text)}
    return sorted((e for e in ends if 0 < e < len(text.rstrip()) and not in_code(e)),
                  reverse=True)


def trim(text: str, reasons: list[str], finish_reason: str | None,
         passes: Callable[[str], bool],
         allowed: Callable[[int], bool] | None = None) -> str | None:
    """The longest prefix of ``text`` ending a sentence or block where ``allowed`` lets
    it be cut that ``passes`` every check, or None: not an output to trim (it stopped by
    itself, or the gate found something a cut cannot fix), or no prefix passes."""
    if finish_reason != "length" or not set(reasons) <= TRIMMABLE:
        return None
    ends = [end for end in cut_points(text) if allowed is None or allowed(end)]
    for end in ends[:MAX_CUTS]:
        candidate = text[:end].rstrip()
        if candidate and passes(candidate):
            return candidate
    return None
