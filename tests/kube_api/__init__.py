"""A Kubernetes API double for tests: an HTTP + websocket server on 127.0.0.1 that acts as
API server, scheduler and kubelet for the calls synthfactory makes (see server.py)."""

from .server import KubeApiDouble, node

__all__ = ["KubeApiDouble", "node"]
