"""Small pieces for the HTTP doubles that tests start on 127.0.0.1."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler


def send_json(handler: BaseHTTPRequestHandler, status: int, body) -> None:
    """Answer ``handler``'s request with ``body`` as JSON."""
    data = json.dumps(body).encode()
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)
