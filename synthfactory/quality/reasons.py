"""The fixed vocabulary of rejection reasons, in the order reports list them."""

from __future__ import annotations

REASONS: dict[str, str] = {
    "empty": "nothing left after stripping a chat preamble and a closing offer",
    "truncated": "generation stopped at its token budget (finish_reason 'length')",
    "refusal": "the model declined (\"I'm sorry\", \"As an AI\", ...)",
    "repetition": "too many repeated word 4-grams: a degenerate loop",
    "copy_of_source": "too many of the output's word n-grams appear in the source",
    "too_short": "output/source word ratio under the template's min_ratio",
    "too_long": "output/source word ratio over the template's max_ratio",
    "language": "the output's language differs from the source's (or from the template's "
                "target_language)",
    # the checks a template declares (quality/domain.py)
    "code_broken": "a code block of the source that parses is missing from the output or no "
                   "longer parses (keep_code)",
    "numbers_lost": "more of the source's numbers and formulae are missing from the output "
                    "than the template's tolerance (keep_numbers)",
    "wrong_format": "the output does not parse into the template's output_shape "
                    "(question/answer pairs, a list)",
    "duplicate": "the same or a near-identical output was already kept for another row",
}
