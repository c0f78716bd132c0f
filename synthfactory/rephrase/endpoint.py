"""Rephrasing through an OpenAI-compatible chat completions server (``vllm serve`` or
vLLM's api_server, SGLang, a gateway in front of either), with the worker's own
checkpoints and exactly-once commits (docs/rephrase.md, docs/adr/0115).

The worker drives it like the offline engine: ``submit`` queues requests, ``poll``
returns those that finished. Up to ``--max-in-flight`` requests are in flight at once
on one asyncio loop that runs only inside ``poll``, so no thread shares the worker's
state. A request that meets a 429, a 5xx or a broken connection is retried with
exponential backoff (``Retry-After`` honoured) until it has kept failing for
``retry_s``: a server that restarts mid-shard costs time, never rows. One that never
comes back fails the task with a retryable exit code, after the worker saved the rows
already finished. A request the server refuses (400: a prompt over the context...) is
quarantined with the server's own message. The API key comes from the environment
(an Airflow connection or a Kubernetes Secret), never argv, and is never logged.

This module is the HTTP engine only; its flags, their checks and its construction are
its registry entry's (engine_registry/openai_endpoint.py).
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import logging
import random
import time
from collections import Counter
from dataclasses import dataclass
from urllib.parse import urlsplit

from synthfactory.errors import PermanentError, RetryableError
from synthfactory.rephrase.engines import Completion

log = logging.getLogger(__name__)
# httpx logs every request at INFO: thousands of lines a shard; failures are ours to say
logging.getLogger("httpx").setLevel(logging.WARNING)

RETRIED_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})
REJECTED_STATUS = frozenset({400, 413, 422})  # this request, not the server: quarantine it
MAX_BACKOFF_S = 30.0
POLL_WAIT_S = 0.5  # poll() returns after this long even if nothing finished


class EndpointUnavailable(RetryableError):
    """The server kept failing for longer than the retry budget (retryable exit)."""


@dataclass(frozen=True)
class EndpointOptions:
    url: str
    model: str | None = None  # the served model's name; None: the server's only one
    api_key: str | None = None  # from the environment only, never argv
    retry_s: float = 600.0  # how long one request may keep failing before the task fails
    connect_wait_s: float = 30.0  # at start: how long an unreachable server is waited for
    request_timeout_s: float = 900.0  # one generation; long outputs on a busy server
    # the context window the shards were cut for: a server reporting a smaller one is
    # refused at start; one that reports none is trusted (docs/rephrase.md, One window)
    window: int | None = None


def api_base(url: str) -> str:
    """``http://host:8000``, ``http://host:8000/`` and ``http://host:8000/v1`` all mean the
    same OpenAI API root, ``http://host:8000/v1``."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise PermanentError(f"--endpoint {url!r}: expected an http:// or https:// URL")
    if parts.password or parts.username:
        raise PermanentError(f"--endpoint {parts.scheme}://***@{parts.hostname}: credentials "
                             "in the URL would be logged; put the key in "
                             "SYNTHFACTORY_ENDPOINT_API_KEY (or the connection's password)")
    base = url.rstrip("/")
    return base if base.endswith("/v1") else base + "/v1"


def retry_after_s(value: str | None) -> float | None:
    """``Retry-After`` as seconds (an integer, or an HTTP date), None if absent or bad."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def backoff_s(attempt: int) -> float:
    """0.5 s, 1 s, 2 s ... up to 30 s, with jitter so that 256 requests do not return
    to a restarted server in one burst."""
    return min(MAX_BACKOFF_S, 0.5 * 2 ** attempt) * random.uniform(0.5, 1.0)


def server_message(body: bytes, limit: int = 300) -> str:
    """The error an OpenAI-compatible server puts in ``{"error": {"message": ...}}``
    (vLLM also uses ``{"message": ...}``), else the start of the body."""
    try:
        data = json.loads(body)
    except ValueError:
        return _snippet(body, limit)
    if isinstance(data, dict):
        error = data.get("error", data)
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])[:limit]
        if isinstance(error, str):
            return error[:limit]
    return _snippet(body, limit)


def _snippet(body: bytes, limit: int) -> str:
    return " ".join(body.decode("utf-8", "replace").split())[:limit]


def _looks_like_html(response) -> bool:
    kind = response.headers.get("content-type", "")
    return "html" in kind or response.content.lstrip()[:1] == b"<"


class OpenAIEndpointEngine:
    """The worker's engine protocol (``GenerationEngine``) over HTTP."""

    device = "endpoint"  # the server's devices are not ours to count: no device-seconds
    devices = 0

    def __init__(self, options: EndpointOptions, sampling: dict, max_in_flight: int = 256):
        import httpx  # only the endpoint engine needs it

        self.options = options
        self.base = api_base(options.url)
        self.sampling = dict(sampling)
        self.rejections: dict[int, str] = {}
        self.retries: Counter[str] = Counter()  # retried answers by kind, for the summary
        self._fatal: BaseException | None = None
        self._tasks: set[asyncio.Task] = set()
        self._loop = asyncio.new_event_loop()
        headers = {"Authorization": f"Bearer {options.api_key}"} if options.api_key else {}
        self._client = httpx.AsyncClient(
            headers=headers,
            timeout=httpx.Timeout(options.request_timeout_s, connect=10.0),
            limits=httpx.Limits(max_connections=max_in_flight,
                                max_keepalive_connections=max_in_flight))
        self._httpx = httpx
        self.served_model, self.server, self.max_model_len = self._loop.run_until_complete(
            self._discover())
        self.engine_args = {"engine": "endpoint", "endpoint": self.base,
                            "served_model": self.served_model, "server": self.server,
                            "max_in_flight": max_in_flight,
                            "max_model_len": self.max_model_len}  # the server's; None: unsaid
        log.info("endpoint %s: model %s, server %s", self.base, self.served_model,
                 self.server or "unknown")

    # -- start: is it an OpenAI API, and does it serve the model? -----------------------
    async def _discover(self) -> tuple[str, str | None, int | None]:
        response = await self._get_at_start("/models")
        where = f"endpoint {self.base}"
        if response.status_code in (401, 403):
            raise PermanentError(f"{where}: {response.status_code} "
                                 f"({server_message(response.content)}): the API key is "
                                 "missing or refused (SYNTHFACTORY_ENDPOINT_API_KEY, or the "
                                 "connection's password)")
        if _looks_like_html(response):
            raise PermanentError(f"{where}: GET /models answered an HTML page (HTTP "
                                 f"{response.status_code}), not JSON: not an "
                                 "OpenAI-compatible API root (expected .../v1)")
        if response.status_code != 200:
            raise PermanentError(f"{where}: GET /models answered HTTP {response.status_code} "
                                 f"({server_message(response.content)}): not an "
                                 "OpenAI-compatible API root (expected .../v1)")
        try:
            models = {m["id"]: m for m in response.json()["data"]}
        except (ValueError, KeyError, TypeError) as exc:
            raise PermanentError(f"{where}: GET /models did not answer an OpenAI model list "
                                 f"({type(exc).__name__}: {exc})") from None
        wanted = self.options.model
        if wanted is None:
            if len(models) != 1:
                raise PermanentError(f"{where} serves {len(models)} models "
                                     f"({', '.join(sorted(models)) or 'none'}): name one with "
                                     "--served-model")
            wanted = next(iter(models))
        elif wanted not in models:
            raise PermanentError(f"{where} does not serve model {wanted!r} (it serves: "
                                 f"{', '.join(sorted(models)) or 'nothing'})")
        window = self._check_window(models[wanted], wanted)
        return wanted, await self._server_version(models[wanted]), window

    def _check_window(self, model: dict, name: str) -> int | None:
        """The served model's context window when the server reports it (vLLM's model
        list carries ``max_model_len``); smaller than the shards' window: refused now,
        before any request (its longest prompts would be refused or cut one by one)."""
        reported = model.get("max_model_len")
        if isinstance(reported, bool) or not isinstance(reported, int) or reported < 1:
            return None  # not said (SGLang, a gateway): the requests will tell
        wanted = self.options.window
        if wanted and reported < wanted:
            raise PermanentError(
                f"endpoint {self.base}: model {name!r} is served with max_model_len "
                f"{reported}, smaller than the window the shards were cut for, {wanted} "
                f"(--max-model-len): serve it with --max-model-len >= {wanted}, or restitch "
                f"for {reported}")
        return reported

    async def _get_at_start(self, path: str):
        """GET, waiting up to ``connect_wait_s`` for a server that is (re)starting."""
        started, attempt = time.monotonic(), 0
        while True:
            try:
                response = await self._client.get(self.base + path)
                if response.status_code not in RETRIED_STATUS:
                    return response
                problem = f"HTTP {response.status_code} ({server_message(response.content)})"
                wait = retry_after_s(response.headers.get("retry-after")) or backoff_s(attempt)
            except self._httpx.TransportError as exc:
                problem, wait = f"{type(exc).__name__}: {exc}", backoff_s(attempt)
            if time.monotonic() - started + wait > self.options.connect_wait_s:
                raise EndpointUnavailable(
                    f"endpoint {self.base}: no answer to GET {path} for "
                    f"{self.options.connect_wait_s:.0f} s ({problem})")
            await asyncio.sleep(wait)
            attempt += 1

    async def _server_version(self, model: dict) -> str | None:
        """``vllm 0.32.0``: the model's ``owned_by`` and the server's ``/version`` (vLLM,
        SGLang); what a gateway hides stays None."""
        root = self.base.removesuffix("/v1")
        version = None
        try:
            response = await self._client.get(root + "/version", timeout=5.0)
            if response.status_code == 200:
                version = response.json().get("version")
        except (self._httpx.HTTPError, ValueError, AttributeError):
            pass
        owner = model.get("owned_by")
        return " ".join(str(p) for p in (owner, version) if p) or None

    # -- the engine protocol ------------------------------------------------------------
    def submit(self, rows: list[int], conversations: list[list[dict]],
               max_tokens: list[int] | None = None,
               sampling: list[dict] | None = None) -> list[int]:
        for i, (row, conversation) in enumerate(zip(rows, conversations, strict=True)):
            budget = self.sampling.get("max_tokens") if max_tokens is None else max_tokens[i]
            extra = sampling[i] if sampling is not None else None
            task = self._loop.create_task(self._complete(row, conversation, budget, extra))
            self._tasks.add(task)
        return []  # refusals come back from poll(), with the server's message

    def poll(self) -> list[Completion]:
        if self._fatal is not None:
            raise self._fatal
        if not self._tasks:
            return []
        done, _ = self._loop.run_until_complete(asyncio.wait(
            self._tasks, timeout=POLL_WAIT_S, return_when=asyncio.FIRST_COMPLETED))
        finished = []
        for task in done:
            self._tasks.discard(task)
            if task.exception() is not None:
                # hand back what did finish; the next poll raises (the worker saves first)
                self._fatal = self._fatal or task.exception()
            else:
                finished.append(task.result())
        return finished

    def in_flight(self) -> int:
        return len(self._tasks)

    def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        self._loop.run_until_complete(self._client.aclose())
        self._loop.close()

    # -- one request ----------------------------------------------------------------------
    def _body(self, conversation: list[dict], max_tokens: int | None,
              extra: dict | None = None) -> dict:
        """``extra``: the row's attempt's sampling (repetition_penalty: vLLM's and
        SGLang's extension of the API; never a seed: the server may be vLLM's CPU build,
        which a per-request seed kills)."""
        body = {"model": self.served_model, "messages": conversation,
                "temperature": self.sampling.get("temperature", 0.7),
                "top_p": self.sampling.get("top_p", 1.0)}
        if max_tokens:
            body["max_tokens"] = int(max_tokens)
        for key in ("seed", "ignore_eos"):  # ignore_eos: vLLM's and SGLang's extension
            if key in self.sampling:
                body[key] = self.sampling[key]
        body.update(extra or {})
        return body

    async def _complete(self, row: int, conversation: list[dict],
                        max_tokens: int | None, extra: dict | None = None) -> Completion:
        body = self._body(conversation, max_tokens, extra)
        first_failure, attempt = None, 0
        while True:
            try:
                response = await self._client.post(self.base + "/chat/completions", json=body)
            except self._httpx.TransportError as exc:
                kind, problem = "connection", f"{type(exc).__name__}: {exc}"
                wait = backoff_s(attempt)
            else:
                status = response.status_code
                if status == 200:
                    return self._completion(row, response)
                if status in REJECTED_STATUS:
                    message = server_message(response.content)
                    self.rejections[row] = f"HTTP {status}: {message}"
                    return Completion(row, "", 0, 0, "rejected",
                                      rejection=self.rejections[row])
                if status not in RETRIED_STATUS:
                    raise PermanentError(
                        f"endpoint {self.base}: POST /chat/completions answered HTTP {status} "
                        f"({server_message(response.content)})")
                kind, problem = str(status), f"HTTP {status} ({server_message(response.content)})"
                wait = retry_after_s(response.headers.get("retry-after")) or backoff_s(attempt)
            now = time.monotonic()
            first_failure = first_failure or now
            if now - first_failure + wait > self.options.retry_s:
                raise EndpointUnavailable(
                    f"endpoint {self.base}: a request kept failing for "
                    f"{self.options.retry_s:.0f} s ({problem}); rows finished so far are "
                    "saved, the task's retry resumes from them")
            self.retries[kind] += 1
            if attempt == 0:
                log.warning("endpoint %s: %s; retrying row %d (in %.1f s)", self.base,
                            problem, row, wait)
            await asyncio.sleep(wait)
            attempt += 1

    def _completion(self, row: int, response) -> Completion:
        try:
            data = response.json()
            choice = data["choices"][0]
            text = choice["message"].get("content") or ""
        except (ValueError, KeyError, IndexError, TypeError, AttributeError):
            raise PermanentError(
                f"endpoint {self.base}: POST /chat/completions answered HTTP 200 without a "
                f"chat completion ({_snippet(response.content, 120)!r})") from None
        usage = data.get("usage") or {}
        return Completion(row, text, int(usage.get("prompt_tokens") or 0),
                          int(usage.get("completion_tokens") or 0),
                          str(choice.get("finish_reason")))
