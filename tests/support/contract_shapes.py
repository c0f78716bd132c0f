"""Check JSON against the contract's TypedDicts, and read docs/contracts.md's key lists.

Keys are compared as dotted paths (``parts.name``): a list is transparent, a TypedDict
is descended into, any other ``dict[...]`` (a free-form map such as ``engine_args``)
is a leaf. docs/contracts.md lists each file's keys between ``<!-- keys: SHAPE -->``
and ``<!-- /keys -->`` as bullets: the backticked names before a bullet's first
``:`` are its keys, and a bullet's sub-bullets are keys of each of them.
"""

from __future__ import annotations

import re
import types
import typing

from tests.support.paths import ROOT

CONTRACTS_MD = ROOT / "docs" / "contracts.md"
_BLOCK = re.compile(r"<!-- keys: (\w+) -->\n(.*?)<!-- /keys -->", re.S)
_BULLET = re.compile(r"^( *)- (.*)$")


def _fields(shape: type) -> dict[str, object]:
    return typing.get_type_hints(shape)


def _typeddict_in(hint) -> type | None:
    """The TypedDict a hint holds (``X``, ``X | None``, ``list[X]``), if any."""
    if typing.is_typeddict(hint):
        return hint
    for arg in typing.get_args(hint):
        if typing.get_origin(hint) is not dict and (found := _typeddict_in(arg)):
            return found
    return None


def shape_paths(shape: type, prefix: str = "") -> set[str]:
    """Every key path the shape allows."""
    paths = set()
    for key, hint in _fields(shape).items():
        paths.add(prefix + key)
        if (inner := _typeddict_in(hint)) is not None:
            paths |= shape_paths(inner, f"{prefix}{key}.")
    return paths


def _type_ok(value, hint) -> bool:
    if hint is typing.Any:
        return True
    if hint is type(None):
        return value is None
    if hint is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if isinstance(hint, type) and not typing.is_typeddict(hint):
        return isinstance(value, hint)
    origin = typing.get_origin(hint)
    if origin in (types.UnionType, typing.Union):
        return any(_type_ok(value, arg) for arg in typing.get_args(hint))
    args = typing.get_args(hint)
    if origin is list:  # TypedDict elements are checked by check(), key by key
        return isinstance(value, list) and (typing.is_typeddict(args[0])
                                            or all(_type_ok(v, args[0]) for v in value))
    if origin is dict:
        return isinstance(value, dict) and all(
            isinstance(k, str) and _type_ok(v, args[1]) for k, v in value.items())
    if typing.is_typeddict(hint):
        return isinstance(value, dict)
    raise TypeError(f"no check for {hint!r}")


def check(value, shape: type, where: str) -> tuple[list[str], set[str]]:
    """(problems, key paths written) of ``value`` against ``shape``; each problem names
    ``where`` (the file) and the key."""
    if not isinstance(value, dict):
        return [f"{where}: expected an object, got {type(value).__name__}"], set()
    problems, written = [], set()
    fields = _fields(shape)
    for key in sorted(set(value) - set(fields)):
        problems.append(f"{where}: unknown key {key!r} (not in {shape.__name__})")
    for key in sorted(shape.__required_keys__ - set(value)):
        problems.append(f"{where}: required key {key!r} of {shape.__name__} missing")
    for key in sorted(set(value) & set(fields)):
        hint, item = fields[key], value[key]
        written.add(key)
        if not _type_ok(item, hint):
            problems.append(f"{where}: {key!r} is {item!r}, expected {hint}")
            continue
        inner = _typeddict_in(hint)
        if inner is None or item is None:
            continue
        for i, element in enumerate(item if isinstance(item, list) else [item]):
            label = f"{where}: {key}[{i}]" if isinstance(item, list) else f"{where}: {key}"
            more, keys = check(element, inner, label)
            problems += more
            written |= {f"{key}.{k}" for k in keys}
    return problems, written


def documented_keys(text: str | None = None) -> dict[str, set[str]]:
    """Shape name -> the key paths docs/contracts.md lists for it."""
    text = CONTRACTS_MD.read_text() if text is None else text
    blocks: dict[str, set[str]] = {}
    for name, body in _BLOCK.findall(text):
        keys: set[str] = set()
        parents: list[tuple[int, list[str]]] = []  # (indent, key paths) of open bullets
        for line in body.splitlines():
            match = _BULLET.match(line)
            if not match:
                continue
            indent, rest = len(match.group(1)), match.group(2)
            names = re.findall(r"`(\w+)`", rest.split(":", 1)[0])
            while parents and parents[-1][0] >= indent:
                parents.pop()
            prefixes = parents[-1][1] if parents else [""]
            paths = [f"{p}.{n}" if p else n for p in prefixes for n in names]
            keys.update(paths)
            parents.append((indent, paths))
        blocks[name] = keys
    return blocks

