"""Set a shard's outputs aside when its prompts changed under it.

A rerun of an interval whose partition changed restitches different prompts into the
same shard names. Outputs of the old prompts must neither be skipped as committed nor
resumed into (rows are addressed by index), nor deleted (they cost GPU hours and may
be wanted for a comparison): they move, commit included, to
``{run}/stale/{shard}/{timestamp}/{generated,quarantine,attempts}/`` and the shard starts
over.
"""

from __future__ import annotations

import datetime as dt
import logging

from synthfactory import storage
from synthfactory.contract import paths

log = logging.getLogger(__name__)


def set_aside(run_url: str, shard: str, out_url: str, quarantine_url: str, why: str,
              attempts_url: str | None = None) -> str:
    """Move every file of the shard's output, rephrase quarantine and attempts; returns
    the folder."""
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S%fZ")
    target = storage.join(run_url, paths.stale_shard(shard, stamp))
    moved = 0
    folders = [(out_url, paths.GENERATED), (quarantine_url, paths.QUARANTINE)]
    if attempts_url:
        folders.append((attempts_url, paths.ATTEMPTS))
    for folder, kind in folders:
        prefix = storage.normalize(folder).rstrip("/") + "/"
        for url in storage.list_files(folder):
            storage.move(url, storage.join(target, kind, url[len(prefix):]))
            moved += 1
    log.warning("%s: %s; set %d file(s) aside under %s and regenerating the shard",
                shard, why, moved, target)
    return target
