"""An HTTP proxy in front of an OpenAI-compatible server that misbehaves on purpose, as a
busy gateway does: 429 Too Many Requests with Retry-After, 503 Service Unavailable, or
(``down``) 503 to everything, as a server that never comes back."""

from __future__ import annotations

import http.client
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests.support.ports import free_port


class FaultProxy:
    """Forwards to ``127.0.0.1:upstream_port``. Of the chat completion POSTs, one in
    ``every`` is answered by the proxy itself until ``inject_429`` 429s and
    ``inject_503`` 503s are spent (alternating), each 429 with ``Retry-After``."""

    def __init__(self, upstream_port: int, inject_429: int = 0, inject_503: int = 0,
                 every: int = 2, retry_after: str = "1"):
        self.upstream_port = upstream_port
        self.left = Counter({"429": inject_429, "503": inject_503})
        self.every = every
        self.retry_after = retry_after
        self.down = False
        self.injected: Counter[str] = Counter()
        self.forwarded = 0
        self._posts = 0
        self._lock = threading.Lock()
        self.port = free_port()
        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), self._handler())
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def _fault(self, method: str, path: str) -> str | None:
        with self._lock:
            if self.down:
                self.injected["503"] += 1
                return "503"
            if method != "POST" or not path.endswith("/chat/completions"):
                return None
            self._posts += 1
            if self._posts % self.every:
                return None
            for status in sorted(self.left, key=lambda s: (self.injected[s], s)):
                if self.left[status] > 0:
                    self.left[status] -= 1
                    self.injected[status] += 1
                    return status
            return None

    def _handler(self):
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def _answer(self, status: int, body: bytes, headers: dict[str, str]) -> None:
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                fault = proxy._fault(self.command, self.path)
                if fault == "429":
                    self._answer(429, b'{"error": {"message": "rate limit: slow down"}}',
                                 {"Content-Type": "application/json",
                                  "Retry-After": proxy.retry_after})
                    return
                if fault == "503":
                    self._answer(503, b'{"error": {"message": "overloaded"}}',
                                 {"Content-Type": "application/json"})
                    return
                upstream = http.client.HTTPConnection("127.0.0.1", proxy.upstream_port,
                                                      timeout=900)
                try:
                    headers = {k: v for k, v in self.headers.items()
                               if k.lower() not in ("host", "connection")}
                    upstream.request(self.command, self.path, body=body, headers=headers)
                    answer = upstream.getresponse()
                    data = answer.read()
                except OSError as exc:
                    self._answer(502, f"upstream: {exc}".encode(), {"Content-Type": "text/plain"})
                    return
                finally:
                    upstream.close()
                with proxy._lock:
                    proxy.forwarded += 1
                self._answer(answer.status, data,
                             {"Content-Type": answer.getheader("Content-Type",
                                                               "application/json")})

            do_GET = do_POST = _handle

        return Handler
