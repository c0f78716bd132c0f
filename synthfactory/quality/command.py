"""``synthfactory quality``: the quality gate over a Parquet table (docs/quality.md).

Reads ``id``, ``source_text``, ``output_text``, ``finish_reason`` and optional
``template`` (a template id: its file's ``quality`` bounds apply), writes the same rows
plus ``usable``, ``reasons`` and ``clean_text``, and prints
``RESULT quality rows=N usable=N`` followed by ``reason=count`` for every reason.
"""

from __future__ import annotations

import argparse
from functools import cache

from synthfactory import storage
from synthfactory.contract.flag_types import fraction, positive_int
from synthfactory.errors import PermanentError, SynthfactoryError
from synthfactory.quality import dedup
from synthfactory.quality.gate import counts
from synthfactory.quality.table import check_columns, verdicts_of, with_verdicts
from synthfactory.quality_bounds import Bounds, bounds_from
from synthfactory.stitch.templates import load_template

OVERRIDES = {  # flag -> (Bounds field, type, help)
    "--min-ratio": ("min_ratio", float, "output/source word ratio under this: too_short"),
    "--max-ratio": ("max_ratio", float, "output/source word ratio over this: too_long"),
    "--max-copy": ("max_copy", fraction, "share of output word n-grams in the source over "
                                         "this: copy_of_source"),
    "--copy-ngram": ("copy_ngram", positive_int, "n of the copy check's word n-grams"),
    "--max-repetition": ("max_repetition", fraction, "repeated word 4-gram share over this: "
                                                     "repetition"),
    "--language-min-words": ("language_min_words", positive_int,
                             "words both texts need before their languages are compared"),
    "--language-confidence": ("language_confidence", fraction,
                              "probability both language verdicts need"),
    "--min-grounded": ("min_grounded", fraction, "share of the output's content its source "
                                                 "has under this: ungrounded"),
    "--min-kept": ("min_kept", fraction, "share of the source's content the output has "
                                         "under this: content_lost"),
    "--max-invented": ("max_invented", int, "names, identifiers, numbers not in the source "
                                            "over this: invented"),
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--in", dest="in_url", required=True, help="Parquet table URL")
    parser.add_argument("--out", required=True, help="where the gated table is written")
    parser.add_argument("--duplicate-jaccard", type=fraction, default=dedup.JACCARD,
                        help="MinHash Jaccard similarity at which an output is a duplicate")
    parser.add_argument("--templates-url", default=None,
                        help="folder URL of the templates named in the template column "
                             "(default: the shipped ones; docs/templates.md)")
    for flag, (_, kind, help_) in OVERRIDES.items():
        parser.add_argument(flag, type=kind, default=None,
                            help=help_ + " (default: the template's, else the gate's)")


def bounds_lookup(overrides: dict, templates_url: str | None = None):
    """Template id (or None) -> Bounds: defaults, the template file's, the flags'."""
    Bounds().override(**overrides)  # a bad override fails before anything is read

    @cache
    def bounds_for(template: str | None) -> Bounds:
        if template is None:
            return Bounds().override(**overrides)
        declared = load_template(template, templates_url).quality
        return bounds_from(declared, f"template {template!r}").override(**overrides)

    return bounds_for


def result_line(rows: int, usable: int, reasons: dict[str, int]) -> str:
    return " ".join([f"RESULT quality rows={rows} usable={usable}",
                     *(f"{reason}={n}" for reason, n in reasons.items())])


def run(args: argparse.Namespace) -> dict:
    in_url, out_url = storage.normalize(args.in_url), storage.normalize(args.out)
    if in_url == out_url:
        raise PermanentError(f"--out {out_url}: the same as --in; write the verdicts beside it")
    overrides = {field: getattr(args, flag[2:].replace("-", "_"))
                 for flag, (field, _, _) in OVERRIDES.items()}
    bounds_for = bounds_lookup(overrides, args.templates_url)
    if not storage.exists(in_url):
        raise PermanentError(f"--in {in_url}: not found")
    table = storage.read_table(in_url)
    check_columns(table, f"--in {in_url}")
    try:
        verdicts = verdicts_of(table, bounds_for, args.duplicate_jaccard)
    except SynthfactoryError as exc:  # e.g. a template id with no file
        raise PermanentError(f"--in {in_url}: {exc}") from exc
    storage.write_table(with_verdicts(table, verdicts), out_url)
    reasons = counts(verdicts)
    usable = sum(v.usable for v in verdicts)
    print(result_line(table.num_rows, usable, reasons))
    return {"in": in_url, "out": out_url, "rows": table.num_rows, "usable": usable,
            "rejected": table.num_rows - usable, "reasons": reasons}
