"""Versioned prompt templates shipped in the package (``synthfactory/templates/*.json``).

Each file holds one template: ``id``, ``version``, ``style``, ``system`` and ``user``
messages, and optionally ``quality``, the bounds the quality gate applies to its outputs
(synthfactory/quality/bounds.py); ``{document}`` is the only placeholder. Templates are
validated at load so a typo fails the job before any Spark or GPU time is spent.
"""

from __future__ import annotations

import json
import string
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from pathlib import Path
from typing import Any

from synthfactory.errors import SynthfactoryError

PLACEHOLDER = "document"
_FIELDS = {"id": str, "version": int, "style": str, "system": str, "user": str}


@dataclass(frozen=True)
class PromptTemplate:
    id: str
    version: int
    style: str
    system: str
    user: str
    quality: dict[str, Any] = dataclass_field(default_factory=dict)  # checked by quality.bounds

    def messages(self, document: str) -> list[dict[str, str]]:
        """Chat messages for one document (the form ``LLM.chat`` takes)."""
        return [
            {"role": "system", "content": self.system},
            {"role": "user", "content": self.render_user(document)},
        ]

    def render_user(self, document: str) -> str:
        # str.replace, not str.format: documents are full of braces.
        return self.user.replace("{" + PLACEHOLDER + "}", document)


def _placeholders(text: str) -> set[str]:
    try:
        return {field for _, field, _, _ in string.Formatter().parse(text) if field is not None}
    except ValueError as exc:
        raise ValueError(f"malformed braces ({exc})") from exc


def parse_template(data: object, source: str) -> PromptTemplate:
    if not isinstance(data, dict):
        raise SynthfactoryError(f"template {source}: expected a JSON object")
    for field, kind in _FIELDS.items():
        if field not in data:
            raise SynthfactoryError(f"template {source}: missing field {field!r}")
        if not isinstance(data[field], kind) or isinstance(data[field], bool):
            raise SynthfactoryError(
                f"template {source}: field {field!r} must be {kind.__name__}, "
                f"got {type(data[field]).__name__}"
            )
    for field in ("system", "user"):
        try:
            found = _placeholders(data[field])
        except ValueError as exc:
            raise SynthfactoryError(f"template {source}: field {field!r}: {exc}") from exc
        unknown = found - {PLACEHOLDER}
        if unknown:
            raise SynthfactoryError(
                f"template {source}: unknown placeholder(s) {sorted(unknown)} in {field!r}; "
                f"only {{{PLACEHOLDER}}} is allowed"
            )
    if "{" + PLACEHOLDER + "}" not in data["user"]:
        raise SynthfactoryError(f"template {source}: 'user' must contain {{{PLACEHOLDER}}}")
    quality = data.get("quality", {})
    if not isinstance(quality, dict):
        raise SynthfactoryError(f"template {source}: field 'quality' must be an object")
    return PromptTemplate(**{name: data[name] for name in _FIELDS}, quality=quality)


def _builtin_dir() -> Path:
    return Path(__file__).resolve().parent.parent / "templates"


def available(directory: Path | None = None) -> list[str]:
    return sorted(p.stem for p in (directory or _builtin_dir()).glob("*.json"))


def load_template(name: str, directory: Path | None = None) -> PromptTemplate:
    path = (directory or _builtin_dir()) / f"{name}.json"
    if not path.is_file():
        raise SynthfactoryError(
            f"template {name!r}: not found in {path.parent} (available: {available(directory)})"
        )
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise SynthfactoryError(f"template {path}: not valid JSON ({exc})") from exc
    template = parse_template(data, str(path))
    if template.id != name:
        raise SynthfactoryError(f"template {path}: id {template.id!r} does not match file name")
    return template


def load_templates(names: list[str], directory: Path | None = None) -> list[PromptTemplate]:
    if not names:
        raise SynthfactoryError("--templates: at least one template name is needed")
    if len(set(names)) != len(names):
        raise SynthfactoryError(f"--templates: duplicate names in {names}")
    return [load_template(name, directory) for name in names]
