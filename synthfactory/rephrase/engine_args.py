"""Where the engine arguments come from, in increasing precedence:
built-in defaults (per device), the tuned file the engine sweep writes next to the
model (``synthfactory-engine.json``), then ``--engine-args`` on the command line."""

from __future__ import annotations

import json
from pathlib import Path

from synthfactory.errors import PermanentError, SynthfactoryError

TUNED_FILE = "synthfactory-engine.json"


def tuned_engine_args(model: str) -> dict:
    path = Path(model) / TUNED_FILE
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise SynthfactoryError(f"{path}: not valid JSON ({exc})") from exc
    args = data.get("engine_args", {})
    if not isinstance(args, dict):
        raise SynthfactoryError(f"{path}: 'engine_args' must be an object")
    return args


def parse_engine_args(text: str | None) -> dict:
    if not text:
        return {}
    name = "--engine-args"
    if text.startswith("@"):
        name = f"--engine-args {text}"
        try:
            text = Path(text[1:]).read_text()
        except FileNotFoundError as exc:
            raise PermanentError(f"{name}: file not found") from exc
        except (OSError, UnicodeDecodeError) as exc:
            raise PermanentError(f"{name}: cannot read the file ({_reason(exc)})") from exc
    try:
        args = json.loads(text)
    except json.JSONDecodeError as exc:
        raise PermanentError(f"{name}: not valid JSON ({exc})") from exc
    if not isinstance(args, dict):
        raise PermanentError(f"{name}: expected a JSON object")
    return args


def _reason(exc: Exception) -> str:
    return getattr(exc, "strerror", None) or str(exc)
