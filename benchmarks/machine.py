"""What machine a benchmark's figures were measured on: every figure says it, as one
figure means little without the CPU and the load it was measured under.

Two things for every benchmark in this folder, from ``synthfactory/hardware.py``:

- ``machine_line()``: ``machine: isa=avx2 load 0.12 0.30 0.41``, the CPU's vector
  extensions (``isa()``: of avx2, avx512f, avx512_bf16, amx_bf16; ``none`` without any)
  and ``uptime``'s three load averages. ``print_machine()`` prints it (stdout, flushed);
  a benchmark calls it once before its measurement and once after it, never as its last
  line.
- ``result_line(name, **fields)``: the benchmark's last line,
  ``RESULT <name> k1=v1 k2=v2 ... isa=<isa()>``: the fields in the order given, each
  value as ``str()`` gives it (format floats yourself: ``tokens_per_s=f"{x:.1f}"``),
  then ``isa=`` always last. Scripts split the line on whitespace, so whitespace in a
  value becomes ``_`` (and an empty value ``-``); ``isa`` is not a name a caller passes.

A benchmark runs as ``python benchmarks/<name>.py``, so this folder is on ``sys.path``::

    from machine import print_machine, result_line

    print_machine()
    ...  # the measurement
    print_machine()
    print(result_line("capacity", nodes=1000, fit_ms=f"{fit_ms:.1f}"))

Standard library only (with ``synthfactory.hardware``): it runs under either venv.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # synthfactory from this checkout when not installed
    sys.path.append(str(ROOT))

from synthfactory.hardware import isa, load_line  # noqa: E402


def isa_field() -> str:
    """``isa=<isa()>``: the field every RESULT line ends with."""
    return f"isa={isa()}"


def result_line(name: str, isa_first: bool = False, **fields: object) -> str:
    """``RESULT <name> k=v ... isa=<isa()>``, the fields in the order given;
    ``isa_first``: ``RESULT <name> isa=<isa()> k=v ...``, for a line whose issue spells
    it so (engine_defaults)."""
    if "isa" in fields:
        raise ValueError("isa is appended by result_line itself")
    values = [f"{key}={'_'.join(str(value).split()) or '-'}" for key, value in fields.items()]
    parts = ["RESULT", name, *([isa_field()] if isa_first else []), *values,
             *([] if isa_first else [isa_field()])]
    return " ".join(parts)


def machine_line() -> str:
    """``machine: isa=<isa()> load 1m 5m 15m``."""
    return f"machine: {isa_field()} {load_line()}"


def print_machine() -> None:
    """Print ``machine_line()`` (stdout, flushed): before and after a measurement."""
    print(machine_line(), flush=True)
