"""A test double of the Hugging Face Hub's HTTP API, on 127.0.0.1: the Hub cannot be
reached from here. It answers the calls ``huggingface_hub``'s ``create_repo`` and
``upload_folder`` make (create a repo, validate a README's YAML, preupload, list a
repo's tree, commit) the way the Hub's documented API does, keeps each repo's files, and
records every call with its Authorization header, so a test sees what was pushed, with
which token, and that a second push sent nothing.

Regular (non-LFS) uploads only: the double answers every preupload with ``regular``, so
the client sends the files' bytes inside the commit."""

from __future__ import annotations

import base64
import hashlib
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlparse

import yaml

from tests.support.http import send_json
from tests.support.ports import free_port


def git_blob_oid(data: bytes) -> str:
    """The git blob id the Hub reports as a regular file's oid."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@dataclass
class Call:
    method: str
    path: str
    authorization: str | None
    body: bytes


@dataclass
class Repo:
    private: bool
    files: dict[str, bytes] = field(default_factory=dict)
    commits: list[dict] = field(default_factory=list)


class HubDouble:
    def __init__(self) -> None:
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.calls: list[Call] = []
        self.repos: dict[str, Repo] = {}
        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), _handler(self))
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> HubDouble:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()

    def commits(self) -> list[Call]:
        return [c for c in self.calls if "/commit/" in c.path]


def _handler(hub: HubDouble):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def _send(self, status: int, body) -> None:
            send_json(self, status, body)

        def _record(self) -> tuple[list[str], bytes]:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            path = urlparse(self.path).path
            hub.calls.append(Call(self.command, path, self.headers.get("Authorization"), body))
            return [unquote(p) for p in path.strip("/").split("/")], body

        def _repo(self, parts: list[str]) -> tuple[str, Repo | None]:
            repo_id = f"{parts[2]}/{parts[3]}"  # api/datasets/OWNER/NAME/...
            return repo_id, hub.repos.get(repo_id)

        def do_GET(self):
            parts, _ = self._record()
            if parts[:2] == ["api", "datasets"] and len(parts) >= 6 and parts[4] == "tree":
                repo_id, repo = self._repo(parts)
                if repo is None:
                    return self._send(404, {"error": f"Repository {repo_id} not found"})
                return self._send(200, [{"type": "file", "path": p, "oid": git_blob_oid(d),
                                         "size": len(d)} for p, d in sorted(repo.files.items())])
            if parts[:2] == ["api", "datasets"] and len(parts) >= 5 and parts[4] == "revision":
                repo_id, repo = self._repo(parts)
                if repo is None:
                    return self._send(404, {"error": f"Repository {repo_id} not found"})
                sha = repo.commits[-1]["oid"] if repo.commits else "0" * 40
                return self._send(200, {"id": repo_id, "sha": sha, "private": repo.private,
                                        "siblings": [{"rfilename": p} for p in repo.files]})
            self._send(404, {"error": f"no such route: GET {self.path}"})

        def do_POST(self):
            parts, body = self._record()
            if parts == ["api", "repos", "create"]:
                payload = json.loads(body)
                repo_id = f"{payload['organization'] or 'me'}/{payload['name']}"
                if repo_id in hub.repos:  # the Hub names the existing repo's URL too
                    return self._send(409, {"error": "You already created this dataset repo",
                                            "url": f"{hub.endpoint}/datasets/{repo_id}"})
                hub.repos[repo_id] = Repo(private=payload.get("visibility") == "private")
                return self._send(200, {"url": f"{hub.endpoint}/datasets/{repo_id}"})
            if parts == ["api", "validate-yaml"]:
                content = json.loads(body)["content"]
                front = content.split("---\n")[1] if content.startswith("---\n") else ""
                try:
                    yaml.safe_load(front)
                except yaml.YAMLError as exc:
                    return self._send(400, {"errors": [{"message": str(exc)}]})
                return self._send(200, {"warnings": []})
            if parts[:2] == ["api", "datasets"] and len(parts) >= 6:
                repo_id, repo = self._repo(parts)
                if repo is None:
                    return self._send(404, {"error": f"Repository {repo_id} not found"})
                if parts[4] == "preupload":
                    files = json.loads(body)["files"]
                    return self._send(200, {"files": [
                        {"path": f["path"], "uploadMode": "regular", "shouldIgnore": False,
                         "oid": (git_blob_oid(repo.files[f["path"]])
                                 if f["path"] in repo.files else None)} for f in files]})
                if parts[4] == "commit":
                    return self._commit(repo_id, repo, body)
            self._send(404, {"error": f"no such route: POST {self.path}"})

        def _commit(self, repo_id: str, repo: Repo, body: bytes):
            added, deleted = [], []
            for line in body.splitlines():
                item = json.loads(line)
                if item["key"] == "file":
                    value = item["value"]
                    repo.files[value["path"]] = base64.b64decode(value["content"])
                    added.append(value["path"])
                elif item["key"] in ("deletedFile", "deletedFolder"):
                    path = item["value"]["path"]
                    repo.files = {p: d for p, d in repo.files.items()
                                  if p != path and not p.startswith(path.rstrip("/") + "/")}
                    deleted.append(path)
                elif item["key"] == "lfsFile":
                    return self._send(400, {"error": "the double takes regular files only"})
            oid = hashlib.sha1(body).hexdigest()
            repo.commits.append({"oid": oid, "added": added, "deleted": deleted})
            self._send(200, {"commitUrl": f"{hub.endpoint}/datasets/{repo_id}/commit/{oid}",
                             "commitOid": oid, "pullRequestUrl": None})

    return Handler
