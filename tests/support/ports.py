"""Free TCP ports, on 127.0.0.1 only (test traffic never leaves the machine)."""

from __future__ import annotations

import socket


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
