"""Read a run folder by URL (file:// or s3://) with what the API server already has.

The engine's storage layer needs pyarrow, which the Airflow environment does not carry;
the report view only needs JSON and PNG bytes and folder listings, so this is plain
file I/O and boto3 (from the amazon provider). S3 endpoint and credentials come from
the standard AWS configuration, as for the engine (``AWS_ENDPOINT_URL``, profiles...).
"""

from __future__ import annotations

import json
import os
from functools import lru_cache
from pathlib import Path

SCHEMES = ("file://", "s3://")


class RunFileError(ValueError):
    """A URL this view will not read (bad scheme) or a file that is not valid JSON."""


def check_url(url: str) -> str:
    if not url.startswith(SCHEMES):
        raise RunFileError(f"{url}: not a file:// or s3:// URL")
    if "/../" in url + "/" or "/./" in url + "/":
        raise RunFileError(f"{url}: relative path segments are not allowed")
    return url.rstrip("/")


def join(url: str, *parts: str) -> str:
    return "/".join([url.rstrip("/"), *(p.strip("/") for p in parts)])


def _s3():
    return _client(os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL"))


@lru_cache(maxsize=4)
def _client(endpoint: str | None):
    import boto3  # only when an s3:// run is shown: boto3 takes ~0.3 s to import

    return boto3.client("s3", endpoint_url=endpoint)


def _bucket_key(url: str) -> tuple[str, str]:
    bucket, _, key = url[len("s3://"):].partition("/")
    return bucket, key


def read_bytes(url: str) -> bytes | None:
    """The file's bytes, or None when it does not exist (yet)."""
    url = check_url(url)
    if url.startswith("file://"):
        try:
            return Path(url[len("file://"):]).read_bytes()
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            return None
    from botocore.exceptions import ClientError

    bucket, key = _bucket_key(url)
    try:
        return _s3().get_object(Bucket=bucket, Key=key)["Body"].read()
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404", "NoSuchBucket"):
            return None
        raise


def read_json(url: str):
    data = read_bytes(url)
    if data is None:
        return None
    try:
        return json.loads(data)
    except ValueError as exc:
        raise RunFileError(f"{url}: not valid JSON ({exc})") from exc


def list_folders(url: str) -> list[str]:
    """Names of the direct sub-folders of ``url`` (sorted; none if it does not exist)."""
    url = check_url(url)
    if url.startswith("file://"):
        path = url[len("file://"):]
        if not os.path.isdir(path):
            return []
        return sorted(e.name for e in os.scandir(path)
                      if e.is_dir() and not e.name.startswith("."))
    bucket, key = _bucket_key(url)
    prefix = key.rstrip("/") + "/" if key else ""
    names: list[str] = []
    pages = _s3().get_paginator("list_objects_v2").paginate(
        Bucket=bucket, Prefix=prefix, Delimiter="/")
    try:
        for page in pages:
            names += [p["Prefix"][len(prefix):].rstrip("/") for p in page.get("CommonPrefixes", [])]
    except _s3().exceptions.NoSuchBucket:
        return []
    return sorted(names)
