"""``synthfactory crawl``: list a source's partitions into a parquet manifest.

    synthfactory crawl --source s3://bucket/prefix --out URL \
        [--interval-start ISO --interval-end ISO] [--partition-template 'dt={ds}'] \
        [--workers N]

Writes ``{out}/part-*.parquet`` (columns key, size, etag, last_modified, then one per
partition column) and ``{out}/_SUMMARY.json``; returns the same summary (the XCom).
"""

from __future__ import annotations

import argparse
import logging

from synthfactory import storage
from synthfactory.contract import ManifestSummary
from synthfactory.contract.names import MAX_KEYS_CAP
from synthfactory.contract.paths import SUMMARY_NAME
from synthfactory.crawl import checkpoint
from synthfactory.crawl.crawler import Crawler, CrawlSettings
from synthfactory.crawl.interval import Interval, PartitionTemplate
from synthfactory.crawl.manifest_writer import manifest_schema
from synthfactory.crawl.scope import CrawlScope
from synthfactory.errors import PermanentError

log = logging.getLogger(__name__)


def run(args: argparse.Namespace) -> dict:
    for option in ("workers", "rows_per_part", "max_keys"):
        if getattr(args, option) < 1:
            raise PermanentError(f"--{option.replace('_', '-')} must be at least 1")
    if args.fanout_depth < 0:
        raise PermanentError("--fanout-depth must be 0 or more")
    if args.max_keys > MAX_KEYS_CAP:
        log.warning("--max-keys %d capped at %d (S3's page limit)", args.max_keys, MAX_KEYS_CAP)
    source = storage.normalize(args.source)
    out = storage.normalize(args.out).rstrip("/")
    interval = Interval.parse(args.interval_start, args.interval_end)
    template = PartitionTemplate(args.partition_template) if args.partition_template else None
    scope_mode = args.scope or ("partition" if template else "last-modified")
    if scope_mode in ("partition", "both") and template is None and args.scope:
        raise PermanentError(f"--scope {args.scope} needs --partition-template")

    lister = _lister(source, args)
    scope = CrawlScope(
        root_prefix=lister.root_prefix,
        schema=manifest_schema(template.columns if template else []),
        template=template,
        interval=interval,
        by_partition=scope_mode in ("partition", "both"),
        by_last_modified=scope_mode in ("last-modified", "both"),
        suffix=args.suffix,
    )
    fingerprint = {
        "source": lister.source_url, "template": template.template if template else None,
        "interval": [args.interval_start, args.interval_end], "scope": scope_mode,
        "suffix": args.suffix, "fanout_depth": args.fanout_depth,
    }
    settings = CrawlSettings(args.workers, args.fanout_depth, args.rows_per_part,
                             args.checkpoint_seconds)
    summary_url = storage.join(out, SUMMARY_NAME)
    storage.delete(summary_url)  # until this crawl finishes, the folder has no valid summary
    result = Crawler(lister, scope, out, settings, fingerprint).run()

    if (result["partitions"] == 0 and scope_mode == "partition" and template and interval
            and not args.allow_missing_partition):
        raise PermanentError(
            _missing_partition(lister.source_url, template, interval, args.suffix))
    warnings = []
    if result["objects"] == 0:
        warnings.append(f"{lister.source_url}: no objects in scope; the manifest is empty")
    if result["skipped"].get("unmatched_template"):
        warnings.append(
            f"{result['skipped']['unmatched_template']} keys do not match the partition "
            f"template {template.template!r} (e.g. {result['unmatched_example']}); not in "
            "the manifest"
        )
    for warning in warnings:
        log.warning(warning)
    summary: ManifestSummary = {
        "objects": result["objects"],
        "bytes": result["bytes"],
        "partitions": result["partitions"],
        "manifest_url": out,
        "requests": result["requests"],
        "source": lister.source_url,
        "interval_start": interval.start.isoformat() if interval else None,
        "interval_end": interval.end.isoformat() if interval else None,
        "partition_template": template.template if template else None,
        "partition_columns": template.columns if template else [],
        "scope": scope_mode if interval else None,
        "parts": result["parts"],
        "requests_this_run": result["requests_this_run"],
        "retries": result["retries"],
        "resumed": result["resumed"],
        "skipped": result["skipped"],
        "workers": args.workers,
        "wall_s": result["wall_s"],
        "warnings": warnings,
    }
    storage.write_json(summary_url, summary)
    checkpoint.clear(out)
    return summary


def _missing_partition(source_url: str, template: PartitionTemplate, interval: Interval,
                       suffix: str) -> str:
    """Which partition the interval needed, and how to get one."""
    root = source_url.rstrip("/") + "/"
    spans = template.spans(interval)
    expected = ", ".join(root + template.render(s) for s in spans[:3])
    more = f" and {len(spans) - 3} more" if len(spans) > 3 else ""
    day = spans[0].strftime("%Y-%m-%d")
    return (
        f"no partition for the data interval [{interval.start.isoformat()}, "
        f"{interval.end.isoformat()}): expected {expected}{more} holding *{suffix} files. "
        f"Write that day's files there (the demo corpus: `synthfactory corpus --out "
        f"{source_url} --end-date {day}`, or `make corpus`), or trigger a run whose data "
        "interval has a partition"
    )


def _lister(source: str, args: argparse.Namespace):
    if storage.scheme(source) == "s3":
        from synthfactory.crawl.s3_lister import S3Lister, make_client

        client = make_client(args.workers, args.retry_mode, args.request_attempts)
        return S3Lister(source, client, page_size=args.max_keys)
    from synthfactory.crawl.local_lister import LocalLister

    return LocalLister(source, page_size=args.max_keys)
