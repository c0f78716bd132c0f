"""Engine arguments checked against vLLM's own definitions, before any engine starts:
a misspelt key otherwise surfaces minutes later, after the model has loaded, as a
TypeError deep inside vLLM (docs/adr/0061).

The names are read from the installed vLLM's source with ``ast`` (the fields of
``EngineArgs``, the parameters of ``LLM.__init__``, the fields of ``SamplingParams``),
so a new vLLM version needs no list here, and the check costs a parse (about a
second), not vLLM's import (15 s of CPU, paid for nothing when every shard of a group
is already committed). If the source no longer has that shape, vLLM is imported.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib.util
import inspect
from functools import lru_cache
from pathlib import Path

from synthfactory.errors import PermanentError
from synthfactory.rephrase.engine_choice import OWN_ENGINE_KEYS, check_own_args

# Set from other options, never from engine arguments.
RESERVED_ENGINE_KEYS = {"model": "--model"}


@lru_cache(maxsize=1)
def engine_arg_names() -> frozenset[str]:
    try:
        names = _fields(_class("engine/arg_utils.py", "EngineArgs"))  # a dataclass
        llm_init = _method(_class("entrypoints/llm.py", "LLM"), "__init__")
        names |= {a.arg for a in llm_init.args.args + llm_init.args.kwonlyargs} - {"self"}
        if names:
            return frozenset(names)
    except (LookupError, OSError, SyntaxError):
        pass
    from vllm import LLM  # the slow, sure way
    from vllm.engine.arg_utils import EngineArgs

    names = {f.name for f in dataclasses.fields(EngineArgs)}
    names |= {name for name, p in inspect.signature(LLM.__init__).parameters.items()
              if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL) and name != "self"}
    return frozenset(names)


@lru_cache(maxsize=1)
def sampling_param_names() -> frozenset[str]:
    try:
        names = _fields(_class("sampling_params.py", "SamplingParams"))
    except (LookupError, OSError, SyntaxError):
        from vllm import SamplingParams

        names = set(inspect.signature(SamplingParams).parameters)
    return frozenset(n for n in names if not n.startswith("_"))  # internal state


def check_engine_args(args: dict, source: str) -> None:
    """Refuse keys vLLM's engine does not take, naming ``source`` and the key."""
    for key in args:
        if key in RESERVED_ENGINE_KEYS:
            raise PermanentError(f"{source}: {key!r} is set by {RESERVED_ENGINE_KEYS[key]}, "
                                 "not by engine arguments")
    check_own_args(args, source)
    unknown = sorted(k for k in args if k not in engine_arg_names() and k not in OWN_ENGINE_KEYS)
    if not unknown:
        return
    sampling = [k for k in unknown if k in sampling_param_names()]
    hint = (f"; {', '.join(map(repr, sampling))} is a sampling parameter, not an engine "
            "argument (rephrase sets sampling with --temperature, --top-p, --max-new-tokens)"
            if sampling else "")
    raise PermanentError(f"{source}: {', '.join(map(repr, unknown))}: not a vLLM engine "
                         f"argument (vllm.EngineArgs){hint}")


def _vllm_root() -> Path:
    spec = importlib.util.find_spec("vllm")
    if spec is None or not spec.submodule_search_locations:
        raise LookupError("vllm is not installed")
    return Path(next(iter(spec.submodule_search_locations)))


def _class(relative: str, name: str) -> ast.ClassDef:
    tree = ast.parse((_vllm_root() / relative).read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return node
    raise LookupError(f"{relative}: no class {name}")


def _fields(node: ast.ClassDef) -> set[str]:
    """Annotated class attributes: a dataclass's or a msgspec Struct's fields."""
    return {s.target.id for s in node.body
            if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)}


def _method(node: ast.ClassDef, name: str) -> ast.FunctionDef:
    for item in node.body:
        if isinstance(item, ast.FunctionDef) and item.name == name:
            return item
    raise LookupError(f"class {node.name}: no {name}")
