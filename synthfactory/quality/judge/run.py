"""Judge rows through any generation engine: the submit/poll loop.

The engine is whatever ``rephrase.engines.GenerationEngine`` describes (vLLM's offline
engine, an OpenAI-compatible endpoint, the echo stand-in, a test's scripted one): only
``submit``, ``poll`` and ``in_flight`` are used, so this module imports no engine and
nothing of ``synthfactory.rephrase`` (which imports the quality gate: the other
direction would be a cycle between the two packages, pyproject.toml's contracts).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from synthfactory.errors import SynthfactoryError
from synthfactory.quality.judge.template import JudgeTemplate
from synthfactory.quality.judge.verdict import JudgeVerdict, parse_reply, unparsed

log = logging.getLogger(__name__)

# polls in a row that return nothing while nothing is queued: an engine that lost a
# request would otherwise keep this loop spinning forever
_IDLE_POLLS = 1000


@dataclass(frozen=True)
class Pair:
    source: str
    output: str


def judge(engine, pairs: Sequence[Pair], template: JudgeTemplate,
          max_tokens: int | None = None, max_in_flight: int = 64) -> list[JudgeVerdict]:
    """One verdict per pair, in the pairs' order. At most ``max_in_flight`` requests are
    queued at once (the engine's scheduler batches them; more would only hold memory);
    each reply may use ``max_tokens`` (default: the template's) tokens."""
    if max_in_flight < 1:
        raise SynthfactoryError(f"max_in_flight {max_in_flight}: must be at least 1")
    budget = max_tokens or template.max_tokens
    verdicts: list[JudgeVerdict | None] = [None] * len(pairs)
    next_row, idle = 0, 0
    while any(v is None for v in verdicts):
        room = max_in_flight - engine.in_flight()
        if room > 0 and next_row < len(pairs):
            rows = list(range(next_row, min(len(pairs), next_row + room)))
            next_row = rows[-1] + 1
            refused = engine.submit(
                rows, [template.conversation(pairs[r].source, pairs[r].output) for r in rows],
                [budget] * len(rows), None)
            for row in refused:  # e.g. over the context window: the judge saw nothing
                why = getattr(engine, "rejections", {}).get(row, "refused by the engine")
                verdicts[row] = unparsed(None, f"request refused: {why}")
        done = engine.poll()
        for completion in done:
            verdicts[completion.row] = parse_reply(completion.text, completion.finish_reason,
                                                   template.example_texts)
        idle = 0 if done or engine.in_flight() else idle + 1
        if idle > _IDLE_POLLS and next_row >= len(pairs):
            lost = [i for i, v in enumerate(verdicts) if v is None]
            raise SynthfactoryError(f"the judge's engine returned nothing for rows {lost[:10]} "
                                    "and has nothing in flight")
    return verdicts  # type: ignore[return-value]  # every entry was filled above
