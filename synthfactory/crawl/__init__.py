"""Metadata crawl: list source partitions into a parquet manifest.

Batched listing (1,000 keys a ListObjectsV2 page), fanned out over prefixes by a
bounded thread pool, streamed into part files, checkpointed so a killed crawl resumes.
See docs/crawl.md. ``command`` is the CLI entry point; ``crawler`` drives the listers.
"""
