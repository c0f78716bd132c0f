"""The judge's reply read as a verdict: the first JSON object in it, its shape checked,
and the one rule that makes a row unfaithful.

A reply the judge cannot read (no JSON object, a key missing, a value of the wrong
type, a reply cut at its budget mid-object, the template's example copied back, a
request the engine refused) is
``judge_unparsed``: kept and counted, never a rejection. The judge is a model, and a
small one fails to follow a format far more often than a rewrite is unfaithful; turning
its format failures into rejections would drop good rows for the judge's fault.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from synthfactory.quality.judge.template import normalise

# The outcomes, and the gate's reason for the rows the judge rejects
FAITHFUL, UNFAITHFUL, UNPARSED = "faithful", "unfaithful", "judge_unparsed"
REASON = UNFAITHFUL
# the verdict's keys and the type each must have (a list's items: strings)
SHAPE = {"unsupported": list, "missing": list, "faithful": bool}


@dataclass(frozen=True)
class JudgeVerdict:
    outcome: str  # FAITHFUL, UNFAITHFUL or UNPARSED
    unsupported: list[str] | None  # None when unparsed: not known, not "none found"
    missing: list[str] | None
    raw: str | None  # the model's reply as it came; None: the engine refused the request
    why: str = ""  # for an unparsed reply, what was wrong with it

    @property
    def faithful(self) -> bool | None:
        return None if self.outcome == UNPARSED else self.outcome == FAITHFUL


def is_unfaithful(faithful: bool, unsupported: list[str]) -> bool:
    """The rule, declared once. A claim the source does not support is what the judge is
    there to catch (a rewrite that invents facts teaches the model to invent them), so a
    non-empty ``unsupported`` list rejects the row even when the same reply says
    ``faithful: true``: a judge that names an unsupported claim and calls the row
    faithful contradicts itself, and the named claim is the more specific statement.
    ``faithful: false`` rejects it too, listed claims or not. ``missing`` never
    decides: a summary or a list of facts leaves points out by design, so missing key
    points are reported, not rejected."""
    return not faithful or bool(unsupported)


def first_json_object(text: str) -> dict | None:
    """The first JSON object in ``text``: a small model wraps it in ``` fences, or in a
    sentence before or after it, so each ``{`` is tried in turn as the start of one."""
    decoder = json.JSONDecoder()
    start = text.find("{")
    while start != -1:
        try:
            value, _ = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            value = None
        if isinstance(value, dict):
            return value
        start = text.find("{", start + 1)
    return None


def shape_error(data: dict) -> str | None:
    """What is wrong with the verdict's shape, or None. Keys beyond ``SHAPE`` are
    ignored (a model's "reason" or "notes" harm nothing); each key of ``SHAPE`` must be
    there, with its type, no coercion: ``"faithful": "yes"`` is not read as true."""
    for key, kind in SHAPE.items():
        if key not in data:
            return f"no {key!r}"
        if not isinstance(data[key], kind):
            return f"{key!r} is {type(data[key]).__name__}, not {kind.__name__}"
        if kind is list and not all(isinstance(item, str) for item in data[key]):
            return f"{key!r} holds a value that is not a string"
    return None


def is_placeholder(item: str, example_texts: frozenset[str]) -> bool:
    """One of the template's example items, or another in their form: the example
    writes its placeholders in angle brackets, and a model that copies the example
    often changes a word or two inside them ("<a claim ... does not support this
    claim>", seen on the embedded model), so a bracketed item is no claim either."""
    text = item.strip()
    return normalise(text) in example_texts or (
        bool(example_texts) and text.startswith("<") and text.endswith(">"))


def unparsed(raw: str | None, why: str) -> JudgeVerdict:
    return JudgeVerdict(UNPARSED, None, None, raw, why)


def parse_reply(raw: str, finish_reason: str | None = None,
                example_texts: frozenset[str] = frozenset()) -> JudgeVerdict:
    """The verdict in the model's reply ``raw``; ``example_texts``: the template's
    placeholders (JudgeTemplate.example_texts), which a verdict must not hold."""
    data = first_json_object(raw)
    if data is None:
        cut = " (cut at the verdict's budget)" if finish_reason == "length" else ""
        return unparsed(raw, "no JSON object" + cut)
    wrong = shape_error(data)
    if wrong:
        return unparsed(raw, wrong)
    # a blank item ("unsupported": [""]) names no claim: dropped, so it rejects nothing
    unsupported = [s.strip() for s in data["unsupported"] if s.strip()]
    missing = [s.strip() for s in data["missing"] if s.strip()]
    if any(is_placeholder(item, example_texts) for item in unsupported + missing):
        # the template's example handed back: the model followed the form, not the texts
        return unparsed(raw, "copied the template's example")
    outcome = UNFAITHFUL if is_unfaithful(data["faithful"], unsupported) else FAITHFUL
    return JudgeVerdict(outcome, unsupported, missing, raw)
