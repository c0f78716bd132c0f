"""An HTTP proxy in front of a moto server that misbehaves on purpose, as S3 does under
load: 503 SlowDown (and 500 InternalError) answers, slow answers, 403 AccessDenied."""

from __future__ import annotations

import http.client
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class ThrottlingProxy:
    """Forwards HTTP to moto; answers 503 SlowDown to ``fail_first`` requests,
    can delay every request (to make a crawl slow enough to kill), or deny them all
    with S3's 403 AccessDenied (moto itself does not enforce IAM)."""

    def __init__(self, upstream_port: int, fail_first: int = 0, delay_s: float = 0.0,
                 deny: bool = False, every: int = 1, methods: tuple[str, ...] | None = None,
                 server_errors: bool = False):
        self.upstream_port = upstream_port
        self.methods = methods  # only these HTTP methods are throttled (None: all)
        self.server_errors = server_errors  # alternate 503 SlowDown with 500 InternalError
        self.every = every  # throttle one request in ``every`` until fail_first are spent
        self.seen = 0
        self.deny = deny
        self.fail_first = fail_first
        self.delay_s = delay_s
        self.throttled = 0
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
                if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
                    chunks = []
                    while size := int(self.rfile.readline().split(b";")[0].strip(), 16):
                        chunks.append(self.rfile.read(size))
                        self.rfile.readline()  # the CRLF after each chunk
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    return b"".join(chunks)
                length = int(self.headers.get("Content-Length") or 0)
                return self.rfile.read(length) if length else None

            def _handle(self) -> None:
                body = self._body()
                with proxy._lock:
                    eligible = proxy.methods is None or self.command in proxy.methods
                    throttle = (eligible and proxy.throttled < proxy.fail_first
                                and proxy.seen % proxy.every == 0)
                    proxy.seen += eligible
                    if throttle:
                        proxy.throttled += 1
                    else:
                        proxy.forwarded += 1
                if throttle or proxy.deny:
                    code, status, message = (
                        ("AccessDenied", 403, "Access Denied") if proxy.deny
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
                    return
                if proxy.delay_s:
                    time.sleep(proxy.delay_s)
                upstream = http.client.HTTPConnection("127.0.0.1", proxy.upstream_port, timeout=60)
                headers = {k: v for k, v in self.headers.items()
                           if k.lower() not in ("transfer-encoding", "content-length")}
                if body is not None:
                    headers["Content-Length"] = str(len(body))
                upstream.request(self.command, self.path, body=body, headers=headers)
                response = upstream.getresponse()
                data = response.read()
                self.send_response(response.status)
                for name, value in response.getheaders():
                    if name.lower() not in ("content-length", "transfer-encoding", "connection"):
                        self.send_header(name, value)
                # a HEAD answer has no body but the object's real length
                length = (response.getheader("Content-Length", "0") if self.command == "HEAD"
                          else str(len(data)))
                self.send_header("Content-Length", length)
                self.end_headers()
                self.wfile.write(data)
                upstream.close()

            do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = _handle

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> ThrottlingProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
