"""Kubernetes resource quantities as integers, parsed by the Kubernetes client's own parser.

CPU is kept in millicores and everything else in base units (bytes, devices), so the fit
works on plain ints: exact, and several times faster than Decimal arithmetic.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from decimal import Decimal
from functools import lru_cache

CPU = "cpu"
MEMORY = "memory"
GPU = "nvidia.com/gpu"
PODS = "pods"

Resources = dict[str, int]

_BINARY_UNITS = (("Ti", 1 << 40), ("Gi", 1 << 30), ("Mi", 1 << 20), ("Ki", 1 << 10))


class QuantityError(ValueError):
    """A resource quantity that Kubernetes would reject."""


@lru_cache(maxsize=4096)
def parse_resource(name: str, value: str | int | float) -> int:
    """Return `value` of resource `name` as an int: millicores for cpu, base units otherwise.

    Rounded up, as Kubernetes rounds a request it cannot represent exactly.
    """
    # imported here: `kubernetes.utils` loads the whole client (seconds of CPU), and every
    # task process parses the DAG file, which imports the sensor (benchmarks/orchestration.py)
    from kubernetes.utils.quantity import parse_quantity

    try:
        quantity = parse_quantity(value)
    except (ValueError, TypeError) as exc:
        raise QuantityError(f"resource {name!r}: invalid quantity {value!r} ({exc})") from exc
    if quantity < 0:
        raise QuantityError(f"resource {name!r}: negative quantity {value!r}")
    if name == CPU:
        quantity *= 1000
    return math.ceil(quantity)


def parse_resources(values: Mapping[str, str | int | float] | None) -> Resources:
    """Parse a `{"cpu": "500m", "memory": "1Gi", ...}` mapping into integer units."""
    if not values:
        return {}
    return {name: parse_resource(name, value) for name, value in values.items()}


def add_into(total: Resources, more: Mapping[str, int]) -> None:
    for name, value in more.items():
        total[name] = total.get(name, 0) + value


def max_into(total: Resources, other: Mapping[str, int]) -> None:
    for name, value in other.items():
        if value > total.get(name, 0):
            total[name] = value


def format_resource(name: str, value: int) -> str:
    """Render an integer quantity the way a Kubernetes user writes it (8, 500m, 64Gi)."""
    if name == CPU:
        return str(value // 1000) if value % 1000 == 0 else f"{value}m"
    if name == MEMORY or name.startswith("hugepages-") or name == "ephemeral-storage":
        for suffix, size in _BINARY_UNITS:
            if value >= size:
                if value % size == 0:
                    return f"{value // size}{suffix}"
                return f"{Decimal(value) / size:.1f}{suffix}"
    return str(value)


def format_resources(values: Mapping[str, int], names: list[str] | None = None) -> str:
    keys = names if names is not None else sorted(values, key=_display_order)
    return " ".join(f"{_short(n)}={format_resource(n, values.get(n, 0))}" for n in keys)


def _display_order(name: str) -> tuple[int, str]:
    return ({CPU: 0, MEMORY: 1, GPU: 2}.get(name, 3), name)


def _short(name: str) -> str:
    return {MEMORY: "mem", GPU: "gpu"}.get(name, name)
