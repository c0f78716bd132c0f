"""The template ids a ``templates_url`` folder holds, for ``check_params``.

An id is a top-level ``*.json`` file's name without ``.json``, as the engine reads the
folder (synthfactory/stitch/templates.py: subfolders and hidden files are not
templates). Listing only: the engine checks each file's contents at stitch. No engine
import: file:// through ``os.listdir``, s3:// through the amazon provider's S3Hook
with the local runner's AWS connection (``SYNTHFACTORY_AWS_CONN_ID``; empty: the
standard AWS configuration of the worker).
"""

from __future__ import annotations

import os

SUFFIX = ".json"
ROUTING = "routing.json"  # the folder's routing table, not a template (ADR 0139)


def _ids(names: list[str]) -> set[str]:
    return {n[:-len(SUFFIX)] for n in names
            if n.endswith(SUFFIX) and "/" not in n and not n.startswith(".") and n != ROUTING}


def _s3_names(bucket: str, prefix: str) -> list[str]:
    from airflow.providers.amazon.aws.hooks.s3 import S3Hook

    from synthfactory_airflow.operators.settings import Settings

    hook = S3Hook(aws_conn_id=Settings().aws_conn_id or None)
    keys = hook.list_keys(bucket_name=bucket, prefix=prefix, delimiter="/") or []
    return [key[len(prefix):] for key in keys]


def template_ids(url: str) -> set[str]:
    """The ids in the folder; OSError (or the S3 client's error) when it cannot be
    listed, ValueError for a URL that is neither file:// nor s3://."""
    scheme, _, rest = url.partition("://")
    if scheme == "file":
        return _ids(os.listdir(rest))
    if scheme == "s3":
        bucket, _, prefix = rest.partition("/")
        prefix = prefix.strip("/")
        return _ids(_s3_names(bucket, prefix + "/" if prefix else ""))
    raise ValueError("not a file:// or s3:// URL")
