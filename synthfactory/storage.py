"""One storage layer for ``file://`` and ``s3://`` URLs; nothing else branches on the scheme.

Built on ``pyarrow.fs``: its S3 client needs no s3fs and takes the endpoint from the
standard AWS configuration (``AWS_ENDPOINT_URL`` / ``AWS_ENDPOINT_URL_S3``, profiles,
environment credentials), so any S3-compatible store works. Writes are atomic for a
reader: a local file is written beside its target and renamed; an S3 PUT is atomic.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import random
import re
import time
import uuid
from functools import lru_cache
from urllib.parse import urlparse

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from synthfactory import storage_retries
from synthfactory.contract import RunFolder
from synthfactory.errors import RetryableError, SynthfactoryError

SCHEMES = ("file", "s3")
S3_MAX_ATTEMPTS = 10  # per request, when AWS_MAX_ATTEMPTS is not set


def normalize(url: str) -> str:
    """A plain path becomes a ``file://`` URL; other schemes are refused by name."""
    if "://" not in url:
        return "file://" + os.path.abspath(url)
    scheme = url.split("://", 1)[0]
    if scheme not in SCHEMES:
        raise SynthfactoryError(f"{url}: unsupported URL scheme {scheme!r} (use file:// or s3://)")
    return url


def join(url: str, *parts: str) -> str:
    url = normalize(url).rstrip("/")
    return "/".join([url, *(p.strip("/") for p in parts if p)])


def scheme(url: str) -> str:
    return normalize(url).split("://", 1)[0]


@lru_cache(maxsize=8)
def _s3_filesystem(endpoint: str | None, region: str | None) -> pafs.S3FileSystem:
    kwargs: dict = {}
    if endpoint:
        parsed = urlparse(endpoint)
        kwargs["endpoint_override"] = parsed.netloc or parsed.path
        kwargs["scheme"] = parsed.scheme or "https"
    if region:
        kwargs["region"] = region
    # S3 answers bursts with 503 SlowDown and the odd 500: retry them with backoff, as
    # many times as the standard AWS_MAX_ATTEMPTS says (pyarrow's own default is 3)
    kwargs["retry_strategy"] = pafs.AwsStandardS3RetryStrategy(max_attempts=_max_attempts())
    # An object smaller than one part goes up in a single PUT, as pyarrow does only with
    # a delayed open: one request instead of three (create, part, complete), and no
    # multipart upload left behind when the answer to its create is lost on the wire and
    # the create is retried (seen with a reset answer: tests/integration/engine/
    # test_storage_faults.py). The price, an open that names a missing bucket only at
    # close, does not matter here: every write is opened, written and closed at once.
    kwargs["allow_delayed_open"] = True
    return pafs.S3FileSystem(**kwargs)


def _max_attempts() -> int:
    value = os.environ.get("AWS_MAX_ATTEMPTS", "")
    try:
        return max(1, int(value)) if value else S3_MAX_ATTEMPTS
    except ValueError as exc:
        raise SynthfactoryError(f"AWS_MAX_ATTEMPTS={value!r}: expected a whole number") from exc


# What pyarrow's C++ S3 client gives up on at once although a second try may pass: a
# 503 or 500 to a HEAD has no body to name the error (UNKNOWN, not retried), and one to
# a ranged GET whose error body overflows the range's buffer fails as "Failed to flush
# response stream" (INTERNAL_FAILURE, not retried). Both seen with 10% of requests
# answered 503/500 (benchmarks/storage_faults.py): rephrase, card and export failed.
_TRANSIENT = re.compile(r"HTTP status 5\d\d|NETWORK_CONNECTION|INTERNAL_FAILURE|SLOW_DOWN|"
                        r"SERVICE_UNAVAILABLE|THROTTLING|REQUEST_TIMEOUT|curlCode")
READ_ATTEMPTS = 4  # around pyarrow's own retries, which run inside each
READ_BACKOFF_S = 0.2


def _reading(fs: pafs.FileSystem, read):
    """``read()`` of an S3 object or listing, tried again (capped exponential backoff,
    full jitter) when it failed as throttling or the network; a read changes nothing, so
    trying it again is safe. Access denied, no such bucket or key: raised at once."""
    if isinstance(fs, pafs.LocalFileSystem):
        return read()
    for attempt in range(1, READ_ATTEMPTS + 1):
        try:
            return read()
        except FileNotFoundError:
            raise
        except OSError as exc:
            if attempt == READ_ATTEMPTS or not _TRANSIENT.search(str(exc)):
                raise
            storage_retries.count(storage_retries.cause_of_message(str(exc)))
            time.sleep(random.uniform(0, READ_BACKOFF_S * 2**attempt))
    raise AssertionError("unreachable")


def filesystem(url: str) -> tuple[pafs.FileSystem, str]:
    """The pyarrow filesystem and the path inside it for ``url``."""
    url = normalize(url)
    if url.startswith("file://"):
        return pafs.LocalFileSystem(), url[len("file://") :]
    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    return _s3_filesystem(_endpoint(), region), url[len("s3://") :]


def local_path(url: str) -> str:
    """The local path of a ``file://`` URL (for tools that want a path)."""
    url = normalize(url)
    if not url.startswith("file://"):
        raise SynthfactoryError(f"{url}: a local file:// URL is needed here")
    return url[len("file://") :]


def exists(url: str) -> bool:
    fs, path = filesystem(url)
    return _reading(fs, lambda: fs.get_file_info(path)).type != pafs.FileType.NotFound


def is_dir(url: str) -> bool:
    fs, path = filesystem(url)
    return _reading(fs, lambda: fs.get_file_info(path)).type == pafs.FileType.Directory


def prepare_folder(url: str) -> None:
    """Make sure a folder can take files before any work is done: on a local disk it is
    created now (a file in the way fails here, in one line); on S3 a folder is only a key
    prefix, so there is nothing to create and no marker object is written."""
    if scheme(url) == "file":
        makedirs(url)


def makedirs(url: str) -> None:
    fs, path = filesystem(url)
    try:
        fs.create_dir(path, recursive=True)
    except OSError as exc:
        if not isinstance(fs, pafs.LocalFileSystem):
            raise  # S3 errors stay OSError: retry and fault handling look for them
        reason = _file_in_the_way(path) or _os_reason(exc)
        raise SynthfactoryError(f"{url}: cannot create the folder ({reason})") from exc


def read_bytes(url: str) -> bytes:
    fs, path = filesystem(url)

    def read() -> bytes:
        with fs.open_input_stream(path) as stream:
            return stream.read()

    try:
        return _reading(fs, read)
    except FileNotFoundError as exc:
        raise SynthfactoryError(f"{url}: not found") from exc


def _write(url: str, write, size=None) -> None:
    """``write(fs, path)`` to a hidden temp name then rename (local), or straight (S3).
    ``size()`` is the bytes the file needs, asked only when a local disk is full."""
    fs, path = filesystem(url)
    if not isinstance(fs, pafs.LocalFileSystem):
        try:
            write(fs, path)
        except OSError:
            _abort_uploads(path)
            raise  # S3 errors stay OSError: retry and fault handling look for them
        return
    parent, name = path.rsplit("/", 1)
    tmp = f"{parent}/.{name}.{uuid.uuid4().hex}.tmp"
    try:
        fs.create_dir(parent, recursive=True)
        write(fs, tmp)
        os.replace(tmp, path)
    except OSError as exc:  # unwritable, not a folder, disk full: name the target
        with contextlib.suppress(OSError):
            os.remove(tmp)
        _raise_if_full(exc, url, parent, size)
        reason = _file_in_the_way(parent) or _os_reason(exc)
        raise SynthfactoryError(f"{url}: cannot write ({reason})") from exc


def _raise_if_full(exc: OSError, url: str, folder: str, size) -> None:
    """A full disk as one line naming the file, the bytes it needs and those free."""
    if no_space(exc):
        raise SynthfactoryError(f"{url}: cannot write ({full_disk(folder, size)})") from exc


def no_space(exc: OSError) -> bool:
    return exc.errno in (errno.ENOSPC, errno.EDQUOT) or bool(
        re.search(rf"\[errno ({errno.ENOSPC}|{errno.EDQUOT})\]", str(exc)))


def full_disk(folder: str, size) -> str:
    """The full disk's reason with what it lacks: the bytes the file needs and the bytes
    free, so that whoever frees space knows how much. Not retried (a SynthfactoryError):
    a full disk stays full until someone acts, and Airflow's retries would fill it again."""
    with contextlib.suppress(OSError):
        stat = os.statvfs(folder)
        free = stat.f_bavail * stat.f_frsize
        needed = f"it needs {size():,} bytes, " if size else ""
        return f"no space left on the disk: {needed}{free:,} bytes are free in {folder}"
    return f"no space left on the disk under {folder}"


def _abort_uploads(path: str) -> None:
    """Abort every unfinished multipart upload of ``path`` (this write's, and any other
    left on that key): pyarrow does not abort them when a part's upload fails for good,
    and S3 keeps (and bills) their parts until someone does. Best effort: the write's own
    error is what the caller must see; a bucket's lifecycle rule
    (AbortIncompleteMultipartUpload) is the backstop for what a killed process leaves."""
    bucket, key = path.split("/", 1)
    with contextlib.suppress(Exception):
        client = _boto3_s3(_endpoint())
        listed = client.list_multipart_uploads(Bucket=bucket, Prefix=key)
        for upload in listed.get("Uploads", []):
            # every unfinished upload of this exact key: a plain write's key has one
            # writer (an S3 object's last writer wins anyway), and a rival's aborted
            # upload fails its own write, retryably, rather than losing anything
            if upload["Key"] == key:
                client.abort_multipart_upload(Bucket=bucket, Key=key,
                                              UploadId=upload["UploadId"])


def _endpoint() -> str | None:
    return os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")


def _file_in_the_way(path: str) -> str | None:
    """The nearest existing ancestor of a local ``path`` when it is a file, not a folder
    (the OS then says only "File exists" or "Not a directory")."""
    above = path
    while not os.path.lexists(above):
        parent = os.path.dirname(above)
        if parent == above:
            return None
        above = parent
    return None if os.path.isdir(above) else f"{above} is a file, not a folder"


def _os_reason(exc: OSError) -> str:
    """The OS's reason in one line (pyarrow's OSError text carries a path and a detail)."""
    coded = re.search(r"\[errno (\d+)\]", str(exc))  # pyarrow: "... Detail: [errno 20] ..."
    if coded:
        return os.strerror(int(coded.group(1)))
    return exc.strerror or " ".join(str(exc).split())


def write_bytes(url: str, data: bytes) -> None:
    def write(fs, path):
        with fs.open_output_stream(path) as out:
            out.write(data)

    _write(url, write, size=lambda: len(data))


def read_json(url: str):
    data = read_bytes(url)
    try:
        return json.loads(data)
    except json.JSONDecodeError as exc:
        raise SynthfactoryError(f"{url}: not valid JSON ({exc})") from exc


def read_json_or_none(url: str):
    """The parsed file, or None when it does not exist (``contract.RunFolder``'s reader)."""
    return read_json(url) if exists(url) else None


def run_folder(run_url: str) -> RunFolder:
    """The contract's reader of a run folder's JSON files, on this storage layer."""
    return RunFolder(normalize(run_url).rstrip("/"), read_json_or_none)


def write_json(url: str, obj) -> None:
    write_bytes(url, (json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n").encode())


def read_table(url: str, columns: list[str] | None = None) -> pa.Table:
    fs, path = filesystem(url)
    try:
        return _reading(fs, lambda: pq.read_table(path, filesystem=fs, columns=columns))
    except FileNotFoundError as exc:
        raise SynthfactoryError(f"{url}: not found") from exc
    except (pa.ArrowInvalid, OSError) as exc:
        # an OSError from S3 is the network or the service (after pyarrow's own retries)
        # and may pass; a broken file, or a local one, reads the same way next time
        remote = isinstance(exc, OSError) and not isinstance(fs, pafs.LocalFileSystem)
        kind = RetryableError if remote else SynthfactoryError
        raise kind(f"{url}: unreadable parquet ({exc})") from exc


def write_table(table: pa.Table, url: str, **kwargs) -> None:
    """Write parquet atomically (temp name then rename locally; one PUT on S3)."""
    def size() -> int:
        sink = pa.BufferOutputStream()
        pq.write_table(table, sink, **kwargs)
        return sink.tell()

    _write(url, lambda fs, path: pq.write_table(table, path, filesystem=fs, **kwargs), size)


def list_files(url: str, suffix: str = "") -> list[str]:
    """Every file under ``url`` (recursive), as URLs, sorted; hidden temp files skipped."""
    url = normalize(url)
    fs, path = filesystem(url)
    selector = pafs.FileSelector(path.rstrip("/"), recursive=True, allow_not_found=True)
    prefix = url.split("://", 1)[0] + "://"
    out = []
    for info in _reading(fs, lambda: fs.get_file_info(selector)):
        name = info.path.rsplit("/", 1)[-1]
        if info.type == pafs.FileType.File and not name.startswith(".") and name.endswith(suffix):
            out.append(prefix + info.path)
    return sorted(out)


def delete(url: str) -> None:
    fs, path = filesystem(url)
    info = fs.get_file_info(path)
    if info.type == pafs.FileType.Directory:
        fs.delete_dir(path)
    elif info.type == pafs.FileType.File:
        fs.delete_file(path)


def move(src: str, dst: str) -> None:
    """Move one file (a rename locally; copy then delete on S3, which has no rename)."""
    fs, src_path = filesystem(src)
    _, dst_path = filesystem(dst)
    if isinstance(fs, pafs.LocalFileSystem):
        fs.create_dir(dst_path.rsplit("/", 1)[0], recursive=True)
        os.replace(src_path, dst_path)
    else:
        fs.copy_file(src_path, dst_path)
        fs.delete_file(src_path)


class AlreadyExists(SynthfactoryError):
    """``create_*`` found the object there: another writer got to it first."""


def create_bytes(url: str, data: bytes) -> None:
    """Write ``url`` only if nothing is there, atomically (create-if-absent).

    Locally: a hidden temp file hard-linked to the name (``link`` fails if the name
    exists). On S3: a PUT with ``If-None-Match: *`` (S3 and compatible stores answer
    412 when the key exists). Two writers racing for one name: exactly one wins.
    """
    fs, path = filesystem(url)
    if isinstance(fs, pafs.LocalFileSystem):
        parent, name = path.rsplit("/", 1)
        fs.create_dir(parent, recursive=True)
        tmp = f"{parent}/.{name}.{uuid.uuid4().hex}.tmp"
        try:
            with open(tmp, "wb") as out:
                out.write(data)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.remove(tmp)
            _raise_if_full(exc, url, parent, lambda: len(data))
            raise
        try:
            os.link(tmp, path)
        except FileExistsError as exc:
            raise AlreadyExists(f"{url}: already exists") from exc
        finally:
            os.remove(tmp)
        return
    from botocore.exceptions import ClientError

    bucket, key = path.split("/", 1)
    client = _boto3_s3(_endpoint())
    try:
        client.put_object(Bucket=bucket, Key=key, Body=data, IfNoneMatch="*")
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") not in ("PreconditionFailed", "412"):
            raise
        # The PUT may have been ours: when its answer is lost on the wire (a reset
        # connection) the client sends it again and S3 answers the retry 412. The same
        # bytes there are this write; only other bytes are another writer's.
        if _same_bytes(client, bucket, key, data):
            return
        raise AlreadyExists(f"{url}: already exists") from exc


def _same_bytes(client, bucket: str, key: str, data: bytes) -> bool:
    from botocore.exceptions import ClientError

    try:
        return client.get_object(Bucket=bucket, Key=key)["Body"].read() == data
    except ClientError:
        return False


@lru_cache(maxsize=4)
def _boto3_s3(endpoint: str | None):
    import boto3  # pyarrow's S3 client has no conditional PUT
    from botocore.config import Config

    attempts = _max_attempts()
    retries = {"max_attempts": attempts, "mode": "standard"}  # 503 SlowDown, 500
    client = boto3.client("s3", endpoint_url=endpoint, config=Config(retries=retries))
    storage_retries.observe(client, attempts)
    return client


def create_table(table: pa.Table, url: str) -> None:
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    create_bytes(url, sink.getvalue().to_pybytes())


def create_json(url: str, obj) -> None:
    create_bytes(url, (json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n").encode())
