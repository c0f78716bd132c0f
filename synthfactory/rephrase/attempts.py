"""Rejection sampling in the rephrase worker (docs/adr/0141): what each attempt of a row
samples with, and what the worker does with the output of one.

The worker judges each output as it finishes, with the quality gate's per-row checks
(a few hundred microseconds a row, against an engine start of 20 s here and minutes for
a large model on a GPU): a usable output is the row's; an output that ran on to its
budget may be trimmed back (quality/repair.py); a row rejected only for reasons another
sample can fix (quality.reasons.RETRYABLE) goes back into the same engine at its next
attempt, up to ``max_attempts``. validate stays the authority: it gates every chosen
output again, near-duplicates across the table included.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from synthfactory.quality.gate import Gate
from synthfactory.quality.grounding import cut_filter
from synthfactory.quality.reasons import RETRYABLE
from synthfactory.quality.repair import TRIMMED, trim

# The sampling policy, one place: what attempt k (1-based) changes over the task's
# sampling. The first attempt is the task's own. The later ones add a repetition penalty,
# rising: repetition is the reason a fresh draw at the same settings fixes least often,
# and a loop is also what runs most outputs to their budget (docs/adr/0141 measures it).
LATER_ATTEMPTS: dict[int, dict] = {
    2: {"repetition_penalty": 1.1},
    3: {"repetition_penalty": 1.2},
}


def overrides(attempt: int) -> dict:
    """What attempt ``attempt`` changes over the task's sampling (the last declared
    attempt's for any later one)."""
    if attempt <= 1:
        return {}
    return dict(LATER_ATTEMPTS.get(attempt) or LATER_ATTEMPTS[max(LATER_ATTEMPTS)])


def seed(doc_id: str, template: str, attempt: int) -> int:
    """The row's seed at this attempt: a rerun draws the same numbers where the engine
    takes a seed per request (vLLM on a GPU; the CPU backend dies of one, docs/adr/0141)."""
    digest = hashlib.sha256(f"{doc_id}\0{template}\0{attempt}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


def request_sampling(doc_id: str, template: str, attempt: int, seeded: bool) -> dict:
    """The per-request sampling the engine gets for this row's attempt."""
    extra = overrides(attempt)
    if seeded:
        extra["seed"] = seed(doc_id, template, attempt)
    return extra


@dataclass(frozen=True)
class Outcome:
    """The worker's verdict on one attempt's output."""

    reasons: list[str] | None  # the gate's, on the output as generated (None: not judged)
    chosen: bool  # this attempt's output is the row's (usable, trimmed or the last)
    text: str  # what the row keeps: the output, or its trimmed prefix
    finish_reason: str
    kept_tokens: int
    repair: str | None = None

    @property
    def retry(self) -> bool:
        return not self.chosen


class Judge:
    """The gate's per-row checks on one output at a time, and the choice they lead to."""

    def __init__(self, gate: Gate, max_attempts: int, repairs: bool = True):
        self.gate = gate
        self.max_attempts = max_attempts
        self.repairs = repairs

    def usable(self, user: str, text: str, finish: str | None, template: str | None
               ) -> list[str]:
        return self.gate.assess([self.gate.row(user, text, finish, template)])[0].reasons

    def decide(self, user: str, template: str | None, text: str, finish: str,
               output_tokens: int, attempt: int) -> Outcome:
        reasons = self.usable(user, text, finish, template)
        if not reasons:
            return Outcome([], True, text, finish, output_tokens)
        if self.repairs:
            source = self.gate.row(user, text, finish, template).source_text
            cut = trim(text, reasons, finish,
                       lambda candidate: not self.usable(user, candidate, TRIMMED, template),
                       allowed=cut_filter(source, text))
            if cut is not None:
                kept = round(output_tokens * len(cut) / len(text)) if text else 0
                return Outcome(reasons, True, cut, TRIMMED, kept, repair=TRIMMED)
        retry = attempt < self.max_attempts and set(reasons) <= set(RETRYABLE)
        return Outcome(reasons, not retry, text, finish, output_tokens)


def sampling_json(base: dict, extra: dict, max_tokens: int | None) -> str:
    """The sampling one attempt ran with, as recorded on its attempt row."""
    sampling = {**base, **extra}
    if max_tokens is not None:
        sampling["max_tokens"] = max_tokens
    return json.dumps(sampling, sort_keys=True)
