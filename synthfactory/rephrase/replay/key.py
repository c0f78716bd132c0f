"""The request key: everything that can change what the engine writes for one attempt.

An attempt's key is a hash of the row's document id, the rendered request (system and
user text), the template (id, version and the hash of its text), the *basis* (the engine kind, the
model's identity and the engine settings that change outputs: ``OUTPUT_SETTINGS``),
the sampling that attempt ran with (temperature, top-p, penalties, its budget, the seed
where one is sent) and the attempt's number. docs/adr/0150 says what is left out and
why (batch sizes, memory, parallelism: they change speed, not the distribution sampled).

The model's identity is a content hash of its folder's files (sha256 per file, kept in
a stat cache so a 140 GB folder is read once per machine, not once per task), the
revision of a Hugging Face snapshot folder, or the name of a model that is not a local
folder (a hub name, an endpoint's served model) with the revision in its engine
arguments when one is given.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

KEY_VERSION = 1  # bumped when what the key covers changes: old entries then never match
KEY_BYTES = 16  # 128 bits of sha256: no collision in 10^15 attempts (birthday bound)
# vLLM's arguments that change what is generated for a request (after the engine's own
# choice per hardware: engine_choice.py). Left out on purpose: batch and memory sizes,
# tensor/pipeline parallelism, eager mode, prefix caching (docs/adr/0150).
OUTPUT_SETTINGS = ("dtype", "quantization", "kv_cache_dtype", "max_model_len", "seed",
                   "tokenizer", "tokenizer_mode", "revision", "tokenizer_revision",
                   "code_revision", "hf_overrides", "generation_config",
                   "override_generation_config", "trust_remote_code")
_SNAPSHOT = re.compile(r"/snapshots/([0-9a-f]{40})(?:/|$)")
_CHUNK = 1 << 22


@dataclass(frozen=True)
class KeyBasis:
    """What besides the request decides an output, for one task's engine."""

    engine: str
    model: str  # the identity: sha256:..., hf-revision:..., or name:...
    settings: tuple[tuple[str, str], ...]  # OUTPUT_SETTINGS present, as sorted JSON pairs
    seeded: bool  # the engine takes a seed per request (it is then in the sampling)

    @property
    def record(self) -> dict:
        return {"engine": self.engine, "model": self.model,
                "settings": {k: json.loads(v) for k, v in self.settings}, "seeded": self.seeded}

    @property
    def digest(self) -> str:
        return hashlib.sha256(json.dumps(self.record, sort_keys=True).encode()).hexdigest()


def basis(engine: str, model: str, args: dict, seeded: bool) -> KeyBasis:
    settings = tuple(sorted((k, json.dumps(args[k], sort_keys=True, default=str))
                            for k in OUTPUT_SETTINGS if k in args))
    return KeyBasis(engine, model, settings, seeded)


def attempt_key(basis_digest: str, doc_id: str, system: str, user: str, template: tuple,
                sampling: str, attempt: int) -> bytes:
    """The key of one attempt; ``sampling``: the attempt's sampling JSON as its attempt
    row records it (attempts.sampling_json), ``template``: (id, version, hash).

    The document's id is in it too: two documents with the same text are two rows, each
    with a sample of its own (replaying one's output as the other's would make two
    identical rows where the run made two draws; a GPU's per-request seed is drawn from
    the id as well, rephrase/attempts.py)."""
    text = json.dumps([KEY_VERSION, basis_digest, doc_id, system, user, list(template),
                       sampling, attempt], ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode()).digest()[:KEY_BYTES]


def model_identity(model: str, revision: str | None = None) -> str:
    """The identity of ``model``'s weights and tokenizer (see the module's docstring)."""
    path = Path(model)
    if not path.is_dir():
        return f"name:{model}" + (f"@{revision}" if revision else "")
    resolved = path.resolve()
    snapshot = _SNAPSHOT.search(str(resolved) + "/")
    if snapshot:  # a hub snapshot's files are links to blobs named by their content
        return f"hf-revision:{snapshot.group(1)}"
    return "sha256:" + folder_hash(resolved)


def folder_hash(folder: Path) -> str:
    """sha256 over each file's relative path and content hash, hidden files left out."""
    cache_file = _cache_file()
    cache = _read_cache(cache_file)
    mine = cache.setdefault(str(folder), {})
    digest, changed = hashlib.sha256(), False
    for file in sorted(p for p in folder.rglob("*") if p.is_file()):
        rel = file.relative_to(folder).as_posix()
        if any(part.startswith(".") for part in rel.split("/")):
            continue
        stat = file.stat()
        stamp = [stat.st_size, stat.st_mtime_ns, stat.st_ino]
        entry = mine.get(rel)
        if not entry or entry[:3] != stamp:  # same size, time and inode: same content
            entry = [*stamp, _file_sha256(file)]
            mine[rel], changed = entry, True
        digest.update(f"{rel}\0{entry[3]}\n".encode())
    if changed:
        _write_cache(cache_file, cache)
    return digest.hexdigest()


def _file_sha256(file: Path) -> str:
    digest = hashlib.sha256()
    with open(file, "rb") as stream:
        while chunk := stream.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _cache_file() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "synthfactory" / "model_hashes.json"


def _read_cache(file: Path) -> dict:
    try:
        return json.loads(file.read_text())
    except (OSError, ValueError):
        return {}


def _write_cache(file: Path, cache: dict) -> None:
    """Best effort: a read-only home only costs the hashing again next time."""
    try:
        file.parent.mkdir(parents=True, exist_ok=True)
        tmp = file.with_name(f".{file.name}.{os.getpid()}")
        tmp.write_text(json.dumps(cache))
        os.replace(tmp, file)
    except OSError as exc:
        log.info("model hashes not cached (%s): the next task hashes the folder again", exc)
