"""Faults of the wire, made on purpose in front of a real server (moto, the OpenAI
server; PostgreSQL through ``TcpProxy`` below HTTP): what S3 and networks do at scale,
at the HTTP level, so that every client meets
them alike: pyarrow's C++ S3 client, boto3, and Spark's Python workers.

- throttling: 503 SlowDown (and 500 InternalError) answers, as a burst (``fail_first``)
  or sustained for the proxy's whole life (``slowdown_rate``: that share of requests);
- a connection reset in the middle of a body (``reset="request"``: after N bytes of the
  request's body, before the server sees it; ``reset="response"``: after the server
  answered, N bytes into the answer's body), that share of requests (``reset_rate``).

The sustained faults fall at random (seeded: the same trial meets the same faults), as
S3's do: a fixed one-in-N schedule locks onto a client's cycle of requests (a read that
is a HEAD and two GETs meets a one-in-three fault at the same request on every retry)
and fails what no real store would.
- latency added to every request (``delay_s``), as S3 across regions has;
- 403 AccessDenied to everything (``deny``: moto itself does not enforce IAM).

Resets are real TCP resets (SO_LINGER 0), not a clean close: the client sees
ECONNRESET with part of the body on the wire. Counters say what was done, so a test can
check that the faults really met the step.
"""

from __future__ import annotations

import http.client
import io
import random
import socket
import struct
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

RESETS = ("request", "response")


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address) -> None:
        """A client that gave up on a request (a timeout, its own retry) closes its end
        while the proxy still writes: not an error of the proxy's, and no traceback."""
        import sys

        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class WireFaults:
    """Forwards HTTP to ``127.0.0.1:upstream_port`` and misbehaves as configured. Only
    requests whose method is in ``methods`` (None: all) are eligible for a fault."""

    def __init__(self, upstream_port: int, fail_first: int = 0, delay_s: float = 0.0,
                 deny: bool = False, every: int = 1, methods: tuple[str, ...] | None = None,
                 server_errors: bool = False, slowdown_rate: float = 0.0,
                 reset: str | None = None, reset_rate: float = 0.0, reset_after: int = 64,
                 reset_limit: int | None = None, seed: int = 0):
        if reset is not None and reset not in RESETS:
            raise ValueError(f"reset={reset!r}: expected one of {RESETS}")
        self.upstream_port = upstream_port
        self.methods = methods
        self.server_errors = server_errors  # alternate 503 SlowDown with 500 InternalError
        self.every = every  # a burst throttles one request in ``every`` until fail_first
        self.fail_first = fail_first
        self.slowdown_rate = slowdown_rate  # sustained: this share of eligible requests
        self.reset = reset
        self.reset_rate = reset_rate
        self._random = random.Random(seed)
        self.reset_after = reset_after  # body bytes that cross before the reset
        self.reset_limit = reset_limit  # at most this many resets (None: no limit)
        self.deny = deny
        self.delay_s = delay_s
        self.seen = 0  # eligible requests
        self.throttled = 0
        self.resets = 0
        self.forwarded = 0
        self._lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:  # keep test output quiet
                pass

            def _body(self) -> bytes | None:
                """The request body, de-chunked: the AWS SDK streams large uploads
                (UploadPart) with Transfer-Encoding: chunked and no Content-Length."""
                if self._chunked():
                    chunks = []
                    while size := int(self.rfile.readline().split(b";")[0].strip(), 16):
                        chunks.append(self.rfile.read(size))
                        self.rfile.readline()  # the CRLF after each chunk
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    return b"".join(chunks)
                length = self._length()
                return self.rfile.read(length) if length else None

            def _chunked(self) -> bool:
                return "chunked" in self.headers.get("Transfer-Encoding", "").lower()

            def _length(self) -> int:
                return int(self.headers.get("Content-Length") or 0)

            def _reset_now(self) -> None:
                """A TCP RST, not a FIN: what a client sees when a load balancer or a
                peer drops the connection mid-transfer."""
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                           struct.pack("ii", 1, 0))
                self.connection.close()
                self.close_connection = True
                self.wfile = io.BytesIO()  # the handler's own flush at its end is moot

            def _decide(self) -> tuple[bool, bool]:
                """(throttle, reset) for this request, under the lock."""
                with proxy._lock:
                    eligible = proxy.methods is None or self.command in proxy.methods
                    if not eligible:
                        proxy.forwarded += 1
                        return False, False
                    n = proxy.seen
                    proxy.seen += 1
                    draw = proxy._random.random()
                    throttle = ((proxy.throttled < proxy.fail_first and n % proxy.every == 0)
                                or draw < proxy.slowdown_rate)
                    reset = (not throttle and proxy.reset is not None
                             and draw < proxy.reset_rate
                             and (proxy.reset_limit is None
                                  or proxy.resets < proxy.reset_limit))
                    if reset and proxy.reset == "request" and not (
                            self._chunked() or self._length() > 1):
                        reset = False  # no body to cut: forwarded whole
                    if throttle:
                        proxy.throttled += 1
                    elif reset:
                        proxy.resets += 1
                    else:
                        proxy.forwarded += 1
                    return bool(throttle), bool(reset)

            def _handle(self) -> None:
                throttle, reset = self._decide()
                if reset and proxy.reset == "request":
                    # part of the body crosses, then the wire is cut: the server never
                    # sees the request
                    length = self._length()
                    self.rfile.read(max(1, min(proxy.reset_after, length // 2))
                                    if length else proxy.reset_after)
                    self._reset_now()
                    return
                body = self._body()
                if throttle or proxy.deny:
                    self._error(deny=proxy.deny)
                    return
                if proxy.delay_s:
                    time.sleep(proxy.delay_s)
                upstream = http.client.HTTPConnection("127.0.0.1", proxy.upstream_port,
                                                      timeout=60)
                headers = {k: v for k, v in self.headers.items()
                           if k.lower() not in ("transfer-encoding", "content-length")}
                if body is not None:
                    headers["Content-Length"] = str(len(body))
                upstream.request(self.command, self.path, body=body, headers=headers)
                response = upstream.getresponse()
                data = response.read()
                upstream.close()
                if reset and not data:
                    # nothing to cut mid-body (a PUT's or a HEAD's answer): the server did
                    # the work and its whole answer is lost, the hardest case for a client
                    self._reset_now()
                    return
                self.send_response(response.status)
                for name, value in response.getheaders():
                    if name.lower() not in ("content-length", "transfer-encoding", "connection"):
                        self.send_header(name, value)
                # a HEAD answer has no body but the object's real length
                length = (response.getheader("Content-Length", "0") if self.command == "HEAD"
                          else str(len(data)))
                self.send_header("Content-Length", length)
                self.end_headers()
                if reset:  # the server did the work; its answer is cut short
                    self.wfile.write(data[:max(1, min(proxy.reset_after, len(data) // 2))])
                    self._reset_now()
                    return
                self.wfile.write(data)

            def _error(self, deny: bool) -> None:
                code, status, message = (
                    ("AccessDenied", 403, "Access Denied") if deny
                    else ("InternalError", 500, "We encountered an internal error.")
                    if proxy.server_errors and proxy.throttled % 2 == 0
                    else ("SlowDown", 503, "Please reduce your request rate.")
                )
                payload = (f"<?xml version='1.0' encoding='UTF-8'?><Error><Code>{code}"
                           f"</Code><Message>{message}</Message></Error>").encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/xml")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = _handle

        self.server = _Server(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> WireFaults:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()


class TcpProxy:
    """Faults below HTTP: a TCP forwarder (to PostgreSQL, say) that can cut every
    connection, as a network partition or a database failover does, and be restored;
    ``cut`` closes the connections it holds and refuses new ones until ``restore``."""

    def __init__(self, upstream: tuple[str, int]):
        self.upstream = upstream
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.up = True
        self.sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if not self.up:
                client.close()
                continue
            server = socket.create_connection(self.upstream)
            self.sockets += [client, server]
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(a: socket.socket, b: socket.socket) -> None:
        try:
            while data := a.recv(65536):
                b.sendall(data)
        except OSError:
            pass
        finally:
            for s in (a, b):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def cut(self) -> None:
        self.up = False
        for s in self.sockets:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self.sockets.clear()

    def restore(self) -> None:
        self.up = True

    def close(self) -> None:
        self.cut()
        self.listener.close()
