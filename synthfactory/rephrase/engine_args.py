"""Where the engine arguments come from, in increasing precedence:
built-in defaults (per device), the tuned file the engine sweep writes next to the
model (``synthfactory-engine.json``), then ``--engine-args`` on the command line."""

from __future__ import annotations

import json
from pathlib import Path

from synthfactory.errors import PermanentError

TUNED_FILE = "synthfactory-engine.json"


def read_tuned(model: str) -> dict | None:
    """The sweep's winner next to the model: ``engine_args``, the ``hardware`` it was
    measured on (None in files written before it was recorded) and its ``path``; None
    when there is none. Whether it applies is decided where the engine starts, on the
    hardware it starts on (engine_choice.tuned_applies)."""
    path = Path(model) / TUNED_FILE
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise PermanentError(f"{path}: not valid JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise PermanentError(f"{path}: expected a JSON object")
    args = data.get("engine_args") or {}
    if not isinstance(args, dict):
        raise PermanentError(f"{path}: 'engine_args' must be an object")
    return {"engine_args": args, "hardware": data.get("hardware"), "path": str(path)}


def tuned_engine_args(model: str) -> dict:
    """The winner's engine arguments, whatever hardware it was measured on."""
    tuned = read_tuned(model)
    return tuned["engine_args"] if tuned else {}


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
