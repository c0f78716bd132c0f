"""``synthfactory replay``: look after a pipeline's replay index by hand.

    synthfactory replay --index {root}/{pipeline} [--compact] [--drop-before-days N]

Prints the index's files, entries and bytes; ``--compact`` folds its segments into
its buckets (rephrase tasks also do so once ``AUTO_COMPACT`` segments pile up);
``--drop-before-days N`` rewrites every bucket without the entries committed more than
N days ago (their rows are generated again if asked for: docs/adr/0150).
"""

from __future__ import annotations

import argparse
import time

from synthfactory import storage
from synthfactory.contract.flag_types import positive_int
from synthfactory.errors import PermanentError
from synthfactory.rephrase.replay.index import ReplayIndex, index_url


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--index", required=True,
                        help="the folder holding replay_index/: {output_root}/{pipeline}")
    parser.add_argument("--compact", action="store_true",
                        help="fold the segments into the buckets")
    parser.add_argument("--drop-before-days", type=positive_int, default=None,
                        help="also drop the entries committed more than N days ago")


def run(args: argparse.Namespace) -> dict:
    if not storage.is_dir(index_url(args.index)):
        raise PermanentError(f"--index {args.index}: no replay index there "
                             f"({index_url(args.index)} not found)")
    index = ReplayIndex(args.index)
    done = {}
    if args.compact or args.drop_before_days:
        cutoff = (int(time.time()) - args.drop_before_days * 86400
                  if args.drop_before_days else None)
        done = index.compact(drop_before=cutoff)
    return {"index": index.url, **index.size(), **done}
