"""Versioned prompt templates: those shipped in the package (``synthfactory/templates/``)
or a folder of your own (``--templates-url``, file:// or s3://; docs/templates.md).

Each file holds one template: ``id`` (its file name without ``.json``), ``version``,
``style``, ``system`` and ``user`` messages, and optionally ``domain`` (the kind of
source it is written for: web, code, math or any; ``any`` when not declared) and
``quality``, the bounds and checks the quality gate applies to its outputs
(synthfactory/quality_bounds.py); ``{document}`` is the only placeholder. A folder is
checked whole at load, each problem one line naming the file, so a typo fails the job
before any Spark or GPU time is spent.
"""

from __future__ import annotations

import hashlib
import json
import string
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from pathlib import Path
from typing import Any

from synthfactory import storage
from synthfactory.errors import PermanentError, SynthfactoryError
from synthfactory.quality_bounds import bounds_from

PLACEHOLDER = "document"
_FIELDS = {"id": str, "version": int, "style": str, "system": str, "user": str}
KEYS = (*_FIELDS, "domain", "quality")  # anything else is a typo its author wants to hear of
SUFFIX = ".json"
# Not a template: the folder's routing table (synthfactory/stitch/routing.py, ADR 0139).
ROUTING_STEM = "routing"
# What a template is written for: web prose, code, math, or any text. A file without
# a domain is "any": a folder of one's own written before domains keeps working, and a
# template that does not say it needs code or math is not kept from either (ADR 0138).
DOMAINS = ("web", "code", "math", "any")
DEFAULT_DOMAIN = "any"


@dataclass(frozen=True)
class PromptTemplate:
    id: str
    version: int
    style: str
    system: str
    user: str
    domain: str = DEFAULT_DOMAIN
    quality: dict[str, Any] = dataclass_field(default_factory=dict)  # checked by quality_bounds

    def render_user(self, document: str) -> str:
        # str.replace, not str.format: documents are full of braces.
        return self.user.replace("{" + PLACEHOLDER + "}", document)

    def document(self) -> dict[str, Any]:
        """The template as a JSON object (what stitch copies into the run folder)."""
        data: dict[str, Any] = {name: getattr(self, name) for name in _FIELDS}
        if self.domain != DEFAULT_DOMAIN:  # "any" said or not: one template, one hash
            data["domain"] = self.domain
        if self.quality:
            data["quality"] = self.quality
        return data

    @property
    def hash(self) -> str:
        """sha256 of the canonical JSON (sorted keys, no spaces): the same for any
        formatting of the file, and for the copy in the run folder."""
        canonical = json.dumps(self.document(), sort_keys=True, separators=(",", ":"),
                               ensure_ascii=False)
        return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()


def _placeholders(text: str) -> set[str]:
    try:
        return {field for _, field, _, _ in string.Formatter().parse(text) if field is not None}
    except ValueError as exc:
        raise ValueError(f"malformed braces ({exc})") from exc


def parse_template(data: object, source: str) -> PromptTemplate:
    if not isinstance(data, dict):
        raise PermanentError(f"template {source}: expected a JSON object")
    unknown = sorted(set(data) - set(KEYS))
    if unknown:
        raise PermanentError(f"template {source}: unknown key(s) {unknown} (known: {list(KEYS)})")
    for field, kind in _FIELDS.items():
        if field not in data:
            raise PermanentError(f"template {source}: missing field {field!r}")
        if not isinstance(data[field], kind) or isinstance(data[field], bool):
            raise PermanentError(
                f"template {source}: field {field!r} must be {kind.__name__}, "
                f"got {type(data[field]).__name__}"
            )
    for field in ("system", "user"):
        try:
            found = _placeholders(data[field])
        except ValueError as exc:
            raise PermanentError(f"template {source}: field {field!r}: {exc}") from exc
        unknown = found - {PLACEHOLDER}
        if unknown:
            raise PermanentError(
                f"template {source}: unknown placeholder(s) {sorted(unknown)} in {field!r}; "
                f"only {{{PLACEHOLDER}}} is allowed"
            )
    if "{" + PLACEHOLDER + "}" not in data["user"]:
        raise PermanentError(f"template {source}: 'user' must contain {{{PLACEHOLDER}}}")
    domain = data.get("domain", DEFAULT_DOMAIN)
    if domain not in DOMAINS:
        raise PermanentError(f"template {source}: field 'domain' must be one of "
                             f"{list(DOMAINS)}, got {domain!r}")
    quality = data.get("quality", {})
    if not isinstance(quality, dict):
        raise PermanentError(f"template {source}: field 'quality' must be an object")
    try:  # bad bounds fail here, at load, not in the gate after generation
        bounds_from(quality, f"template {source}")
    except SynthfactoryError as exc:
        raise PermanentError(str(exc)) from exc
    return PromptTemplate(**{name: data[name] for name in _FIELDS}, domain=domain,
                          quality=quality)


def shipped_url() -> str:
    return "file://" + str(Path(__file__).resolve().parent.parent / "templates")


def _folder(folder: str | Path | None) -> str:
    return storage.normalize(str(folder)).rstrip("/") if folder else shipped_url()


def _files(folder: str) -> dict[str, str]:
    """File name stem -> URL of the folder's own ``*.json`` files (not its subfolders)."""
    return {url[len(folder) + 1:-len(SUFFIX)]: url
            for url in storage.list_files(folder, suffix=SUFFIX)
            if "/" not in url[len(folder) + 1:]
            and url[len(folder) + 1:-len(SUFFIX)] != ROUTING_STEM}


def _read(url: str) -> PromptTemplate:
    try:
        data = json.loads(storage.read_bytes(url))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise PermanentError(f"template {url}: not valid JSON ({exc})") from exc
    return parse_template(data, url)


def _named(template: PromptTemplate, stem: str, url: str) -> PromptTemplate:
    if template.id != stem:
        raise PermanentError(f"template {url}: id {template.id!r} does not match the file "
                             f"name {stem + SUFFIX!r}")
    return template


def available(folder: str | Path | None = None) -> list[str]:
    return sorted(_files(_folder(folder)))


def load_folder(folder: str | Path | None = None) -> dict[str, PromptTemplate]:
    """Every template of ``folder`` (default: the shipped ones), by id, all checked:
    each file alone, then no id twice, then each id its file's name."""
    url = _folder(folder)
    files = _files(url)
    if not files:
        raise PermanentError(f"--templates-url {url}: no template *{SUFFIX} files in the folder")
    read = {stem: _read(file) for stem, file in sorted(files.items())}
    seen: dict[str, str] = {}
    for stem, template in read.items():
        if template.id in seen:  # e.g. qa.json and qa-v2.json both saying "qa"
            raise PermanentError(f"template {files[stem]}: duplicate id {template.id!r} "
                                 f"(also in {seen[template.id]})")
        seen[template.id] = files[stem]
    return {stem: _named(t, stem, files[stem]) for stem, t in read.items()}


def load_template(name: str, folder: str | Path | None = None) -> PromptTemplate:
    """One template by id, from ``folder`` (default: the shipped ones)."""
    url = _folder(folder)
    file = storage.join(url, name + SUFFIX)
    if "/" in name or name == ROUTING_STEM or not storage.exists(file):
        raise PermanentError(
            f"template {name!r}: not found in {url} (available: {available(url)})")
    return _named(_read(file), name, file)


def load_templates(names: list[str], folder: str | Path | None = None) -> list[PromptTemplate]:
    """The named templates, after checking the whole folder (stitch's --templates)."""
    if not names:
        raise PermanentError("--templates: at least one template name is needed")
    if len(set(names)) != len(names):
        raise PermanentError(f"--templates: duplicate names in {names}")
    templates = load_folder(folder)
    missing = [n for n in names if n not in templates]
    if missing:
        named = ("template " if len(missing) == 1 else "templates ") + ", ".join(map(repr, missing))
        raise PermanentError(f"{named}: not found in {_folder(folder)} "
                             f"(available: {sorted(templates)})")
    return [templates[n] for n in names]


def load_used(name: str, run_templates: str) -> PromptTemplate:
    """A template a run was stitched with: stitch's copy in the run folder, else (a run
    stitched before copies were kept) the shipped one."""
    if storage.exists(storage.join(run_templates, name + SUFFIX)):
        return load_template(name, run_templates)
    return load_template(name)


def write_copies(templates: list[PromptTemplate], folder: str) -> None:
    """Each template used, as ``{folder}/{id}.json``: a run stitched from a folder of
    one's own can be validated without it, and the copy hashes as the original."""
    for template in templates:
        storage.write_json(storage.join(folder, template.id + SUFFIX), template.document())
