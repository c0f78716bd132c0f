"""``max_new_tokens auto``: each prompt row's generation budget sized to its source.

budget = ceil(source tokens x the template's ``max_ratio``) + MARGIN, never capped: a
document whose prompt and budget do not fit ``max_model_len`` is cut into chunks that do
(stitch/chunks.py), each with its own full budget. ``max_ratio`` is the quality gate's
own upper bound for the template (synthfactory/quality_bounds.py): an output longer
than that is rejected as ``too_long`` anyway, so a larger budget buys nothing, and one
number per template cannot drift from the other. A single fixed cap cut long sources
mid-sentence (67% of the demo's rows ended ``truncated`` at 128) and gave short ones
a budget they did not need.
"""

from __future__ import annotations

from synthfactory.quality_bounds import bounds_from
from synthfactory.stitch.templates import PromptTemplate

MARGIN = 32  # room for a closing sentence, a heading, the model's own end of turn


def budget_ratio(template: PromptTemplate) -> float:
    return bounds_from(template.quality, f"template {template.id!r}").max_ratio
