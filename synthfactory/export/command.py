"""``synthfactory export --run URL --out URL``: the run's usable rows as Parquet files of a
bounded size under ``{out}/data/``, with the dataset card as ``{out}/README.md``, so
``datasets.load_dataset(out)`` and the Hub read it through the card's ``configs``
(docs/export.md). ``--hub-repo ID`` also pushes the folder to the Hub with
``huggingface_hub``'s ``upload_folder``; the token comes from the environment (``HF_TOKEN``:
an Airflow connection's password, never argv).

Idempotent: a rerun writes the same bytes and so rewrites nothing, and pushes nothing
when the last push to that repo (``{out}/_PUSHED.json``) holds the same files."""

from __future__ import annotations

import argparse
import hashlib
import logging
import os
import tempfile
from pathlib import Path

from synthfactory import storage
from synthfactory.contract.names import HUB_TOKEN_ENV
from synthfactory.errors import RetryableError, SynthfactoryError
from synthfactory.export import dataset_files
from synthfactory.export.card import card_text, read_facts
from synthfactory.export.license import hub_license

log = logging.getLogger(__name__)

CARD_NAME = "README.md"
PUSHED = "_PUSHED.json"
TOKEN_ENV = HUB_TOKEN_ENV  # what huggingface_hub itself reads


def run(args: argparse.Namespace) -> dict:
    license_id = hub_license(args.license)
    token = os.environ.get(TOKEN_ENV) or None
    if args.hub_repo and not token:
        raise SynthfactoryError(f"--hub-repo {args.hub_repo}: no token (${TOKEN_ENV}: the "
                                "hub connection's password, set by the DAG's hub_conn_id)")
    run_url, out_url = storage.normalize(args.run), storage.normalize(args.out)
    storage.prepare_folder(out_url)  # an --out under a file: one line, before any read
    facts = read_facts(run_url, args.dag_id, args.airflow_run_id)
    files = dataset_files.write(run_url, out_url, args.max_file_mb)
    card = card_text(facts, license_id, files).encode()
    card_url = storage.join(out_url, CARD_NAME)
    old = storage.read_bytes(card_url) if storage.exists(card_url) else None
    if old != card:
        storage.write_bytes(card_url, card)
    summary = {
        "out": out_url, "card": card_url, "license": license_id,
        "rows": sum(f.rows for f in files), "files": len(files),
        "bytes": sum(f.bytes for f in files),
        "files_written": sum(f.written for f in files) + (old != card),
        "pushed": None,
    }
    if args.hub_repo:
        summary["pushed"] = push(out_url, args.hub_repo, token,
                                 {f.name: f.sha256 for f in files},
                                 hashlib.sha256(card).hexdigest())
    return summary


def push(out_url: str, repo_id: str, token: str, data: dict[str, str], card_sha: str) -> str:
    """The export folder to the Hub dataset repo ``repo_id`` (created when missing), or
    nothing when its last push there holds the same files: returns the commit's URL, or
    ``unchanged``."""
    import httpx
    from huggingface_hub import HfApi
    from huggingface_hub.errors import HfHubHTTPError

    state = {"repo_id": repo_id, "card": card_sha, "data": data}
    pushed_url = storage.join(out_url, PUSHED)
    last = storage.read_json_or_none(pushed_url)
    if last is not None and {k: last.get(k) for k in state} == state:
        log.info("%s: the last push holds these files; nothing to push", repo_id)
        return "unchanged"
    api = HfApi(token=token)
    try:
        api.create_repo(repo_id, repo_type="dataset", exist_ok=True, private=True)
        with tempfile.TemporaryDirectory(prefix="synthfactory-export-") as tmp:
            folder = Path(tmp)
            (folder / "data").mkdir()
            (folder / CARD_NAME).write_bytes(storage.read_bytes(storage.join(out_url,
                                                                             CARD_NAME)))
            for name in data:
                (folder / name).write_bytes(storage.read_bytes(storage.join(out_url, name)))
            commit = api.upload_folder(
                repo_id=repo_id, repo_type="dataset", folder_path=folder,
                allow_patterns=[CARD_NAME, dataset_files.DATA_FILES],
                # a data file of an earlier push that this export no longer has
                delete_patterns=[dataset_files.DATA_FILES],
                commit_message=f"synthfactory export of {out_url}")
    except httpx.TransportError as exc:  # the Hub out of reach: a later try may pass
        raise RetryableError(f"--hub-repo {repo_id}: the Hub is out of reach "
                             f"({type(exc).__name__}: {exc})") from exc
    except HfHubHTTPError as exc:
        status = exc.response.status_code if exc.response is not None else None
        kind = (SynthfactoryError if status in (400, 401, 403, 404, 409, 422)
                else RetryableError)
        raise kind(f"--hub-repo {repo_id}: the Hub answered {status} "
                   f"({str(exc).splitlines()[0]})") from exc
    storage.write_json(pushed_url, {**state, "commit": commit.commit_url})
    return commit.commit_url
