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
    # last: the RESULT quality line lists the reasons in this order, and a script reading
    # it keeps its columns (the newest reason appended)
    "contaminated": "the output or its source shares a word n-gram with a text of a "
                    "benchmark the run names (--benchmarks; the verdict names which)",
    # grounding (quality/grounding.py, docs/adr/0148): what the output says against what
    # its source says; appended after contaminated for the RESULT line's readers
    "ungrounded": "too much of the output is in sentences its source does not support (a "
                  "run-on's tail, a paragraph about something else, another document)",
    "content_lost": "the output keeps less of its source's content than the template's "
                    "min_kept (the first half only, a drift away from the source)",
    "invented": "names, identifiers or numbers the source does not have: more than the "
                "template's max_invented, or one in place of one of the source's (a "
                "changed fact)",
    "repeated_block": "a sentence or block of the output repeats an earlier one word for "
                      "word or nearly: a loop the 4-gram share misses",
}
# The grounding reasons, in vocabulary order: each verdict's scores are kept with it
GROUNDING = ("ungrounded", "content_lost", "invented", "repeated_block")

# The reasons another sample of the same prompt can fix, each with why: a row rejected
# for any of them (and for no other) is generated again, up to --max-attempts attempts
# (docs/adr/0141). The policy each later attempt samples with: rephrase/attempts.py.
RETRYABLE: dict[str, str] = {
    "empty": "a sampled end of turn at the first token; another draw rarely repeats it",
    "truncated": "the row's budget is fixed, but where the model stops is sampled; and a "
                 "later attempt's repetition penalty shortens loops that run to the budget",
    "refusal": "a small model's refusals are sampled, not a policy of the prompt's",
    "repetition": "a loop is a sampling accident; the later attempts' repetition penalty "
                  "is aimed at it",
    "copy_of_source": "copying is the greedy path; a hotter later attempt leaves it",
    "too_short": "where the model stops is sampled",
    "too_long": "mostly a run-on past the source's end, as truncated",
    "language": "a switch of language is a sampled token early in the output",
    "code_broken": "another draw may keep the code verbatim, as the prompt asks",
    "numbers_lost": "another draw may keep the numbers, as the prompt asks",
    "wrong_format": "another draw may follow the format the prompt asks for",
    # grounding (docs/adr/0148): only the loop; what a model says about a source is the
    # model's, not the draw's (below)
    "repeated_block": "a block written twice is a loop; the later attempts' repetition "
                      "penalty is aimed at it",
}
# Never retried: "ungrounded", "content_lost" and "invented" (what a model makes of a
# source: in the demo, 0 of 49 rows retried with them was saved by a second or third
# attempt, 98 generations for nothing; the trim cuts an ungrounded or invented tail
# first, at no GPU cost; docs/adr/0148), "contaminated" (the source quotes the benchmark
# in most cases, and another sample of the same prompt rephrases the same quote; the
# worker holds no benchmark index either: validate decides it), "duplicate" (decided by
# validate across the table, which the worker cannot see: the first kept copy is the
# usable one), and a request the engine refused (over the context window, a bad
# request): the same prompt fails the same way.
