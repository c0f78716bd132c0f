"""What happens to a document longer than the training context: an explicit choice.

Dropping keeps every surviving document whole but biases the length distribution
toward short documents; truncating keeps the count but piles mass at the context
length. Neither is silent: both are counted and reported in the summary.
"""

from __future__ import annotations

from synthfactory.training.choice import Choice


class OverlongPolicy(Choice, what="overlong policy"):
    DROP = "drop"
    TRUNCATE = "truncate"

