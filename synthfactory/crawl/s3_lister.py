"""``s3://`` sources through boto3 ListObjectsV2: 1,000 keys a request, never one per object.

The client comes from the standard AWS configuration (``AWS_ENDPOINT_URL[_S3]``,
profiles, environment credentials); nothing is hard-coded. Throttling (503 SlowDown,
500s) is retried by botocore's retry handler in ``standard`` or ``adaptive`` mode
(adaptive also rate-limits the client, which is shared by all worker threads).
"""

from __future__ import annotations

import os
from collections.abc import Iterator

from synthfactory.contract.names import MAX_KEYS_CAP
from synthfactory.crawl.listing import ListPage, ListTask, ObjectInfo
from synthfactory.errors import PermanentError, RetryableError, SynthfactoryError

_DENIED = {"AccessDenied", "AllAccessDisabled", "InvalidAccessKeyId", "SignatureDoesNotMatch",
           "AccountProblem", "InvalidToken", "ExpiredToken", "403"}
RETRY_MODES = ("standard", "adaptive", "legacy")
_THROTTLED = {"SlowDown", "Throttling", "ThrottlingException", "RequestLimitExceeded",
              "ServiceUnavailable", "503", "InternalError", "500"}


def make_client(workers: int, retry_mode: str | None = None,
                request_attempts: int | None = None):
    """A thread-safe S3 client; retry settings from the arguments, else AWS_RETRY_MODE /
    AWS_MAX_ATTEMPTS, else adaptive with 10 attempts."""
    import boto3
    from botocore.config import Config

    mode = retry_mode or os.environ.get("AWS_RETRY_MODE") or "adaptive"
    if mode not in RETRY_MODES:
        raise PermanentError(f"retry mode {mode!r} (--retry-mode or AWS_RETRY_MODE): "
                             f"expected one of {', '.join(RETRY_MODES)}")
    attempts = request_attempts or env_attempts() or 10
    config = Config(
        # total_max_attempts counts the first try, like AWS_MAX_ATTEMPTS; the dict's
        # "max_attempts" would count retries only
        retries={"mode": mode, "total_max_attempts": attempts},
        max_pool_connections=max(10, workers + 2),
    )
    return boto3.session.Session().client("s3", config=config)


def env_attempts() -> int | None:
    """``AWS_MAX_ATTEMPTS`` as botocore would read it, refused by name when it is not a
    positive integer (botocore itself fails with a bare ValueError)."""
    raw = os.environ.get("AWS_MAX_ATTEMPTS", "").strip()
    if not raw:
        return None
    try:
        value = int(raw)
    except ValueError:
        raise PermanentError(f"AWS_MAX_ATTEMPTS={raw!r}: not an integer (attempts per S3 "
                             "request, e.g. 10; or pass --request-attempts)") from None
    if value < 1:
        raise PermanentError(f"AWS_MAX_ATTEMPTS={raw!r}: must be at least 1")
    return value


class S3Lister:
    def __init__(self, source_url: str, client, page_size: int = MAX_KEYS_CAP):
        rest = source_url.split("://", 1)[1]
        self.bucket, _, prefix = rest.partition("/")
        if not self.bucket:
            raise SynthfactoryError(f"{source_url}: no bucket name in the URL")
        self.source_url = f"s3://{self.bucket}/{prefix}".rstrip("/")
        self.root_prefix = prefix.strip("/") + "/" if prefix.strip("/") else ""
        self.client = client
        self.page_size = max(1, min(page_size, MAX_KEYS_CAP))

    def url_of(self, key: str) -> str:
        return f"s3://{self.bucket}/{key}"

    def pages(self, task: ListTask, token: str | None) -> Iterator[ListPage]:
        kwargs = {"Bucket": self.bucket, "Prefix": task.prefix, "MaxKeys": self.page_size}
        if task.delimited:
            kwargs["Delimiter"] = "/"
        while True:
            if token:
                kwargs["ContinuationToken"] = token
            response = self._list(kwargs)
            token = response.get("NextContinuationToken") if response.get("IsTruncated") else None
            yield ListPage(
                objects=[
                    ObjectInfo(
                        key=item["Key"],
                        size=int(item["Size"]),
                        etag=item.get("ETag", "").strip('"') or None,
                        last_modified=item["LastModified"],
                    )
                    for item in response.get("Contents", ())
                ],
                children=[p["Prefix"] for p in response.get("CommonPrefixes", ())],
                next_token=token,
                retries=response.get("ResponseMetadata", {}).get("RetryAttempts", 0),
            )
            if token is None:
                return

    def _list(self, kwargs: dict) -> dict:
        from botocore.exceptions import (
            BotoCoreError,
            ClientError,
            EndpointConnectionError,
            HTTPClientError,
            NoCredentialsError,
            ParamValidationError,
        )
        from botocore.exceptions import (
            ConnectionError as BotoConnectionError,
        )

        where = f"s3://{self.bucket}/{kwargs['Prefix']}"
        try:
            return self.client.list_objects_v2(**kwargs)
        except ClientError as exc:
            error = exc.response.get("Error", {})
            code = str(error.get("Code", ""))
            attempts = exc.response.get("ResponseMetadata", {}).get("RetryAttempts", 0)
            if code == "NoSuchBucket":
                raise SynthfactoryError(f"{where}: bucket {self.bucket!r} does not exist") from exc
            if code in _DENIED:
                raise SynthfactoryError(
                    f"{where}: access denied listing the bucket ({code}); check the credentials "
                    "and that they allow s3:ListBucket"
                ) from exc
            if code in _THROTTLED:
                raise RetryableError(
                    f"{where}: still throttled ({code}) after {attempts + 1} attempts; "
                    "raise --request-attempts or lower --workers"
                ) from exc
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0
            # a 5xx is the server's trouble and may pass; a 4xx is the request's
            kind = RetryableError if status >= 500 else SynthfactoryError
            raise kind(
                f"{where}: ListObjectsV2 failed: {code}: {error.get('Message', exc)}"
            ) from exc
        except EndpointConnectionError as exc:
            raise RetryableError(f"{where}: cannot reach the S3 endpoint ({exc})") from exc
        except NoCredentialsError as exc:
            raise SynthfactoryError(
                f"{where}: no AWS credentials found (environment, profile or instance role)"
            ) from exc
        except ParamValidationError as exc:
            raise SynthfactoryError(f"{where}: invalid request ({exc})") from exc
        except BotoCoreError as exc:
            # a read timeout or a dropped connection may pass; a bad region or profile not
            transient = isinstance(exc, (HTTPClientError, BotoConnectionError))
            kind = RetryableError if transient else SynthfactoryError
            raise kind(f"{where}: listing failed ({exc})") from exc
