"""The wave contract: the pod groups a DAG is about to launch at one moment.

    [{"pool": "gpu", "count": 2,
      "requests": {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": "1"},
      "node_selector": {...}, "tolerations": [...]}]

Optional keys: "name" (the row label; defaults to the pool) and "flavor" (Kueue mode).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from synthfactory_airflow.plugins.capacity.quantities import (
    PODS,
    QuantityError,
    Resources,
    parse_resources,
)

_KEYS = {"pool", "count", "requests", "node_selector", "tolerations", "name", "flavor"}
_TOLERATION_KEYS = {"key", "operator", "value", "effect", "tolerationSeconds"}


class WaveError(ValueError):
    """A wave that does not follow the contract; the message names the group and the field."""


@dataclass(frozen=True)
class PodGroup:
    """`count` identical pods that must all be placed."""

    name: str
    pool: str
    count: int
    requests: Resources  # integer units, see quantities; always includes pods=1
    node_selector: dict[str, str] = field(default_factory=dict)
    tolerations: tuple[dict[str, Any], ...] = ()
    flavor: str | None = None

    @property
    def shown_resources(self) -> list[str]:
        """The resources this group asks for, without the implicit pod slot."""
        return [n for n in self.requests if n != PODS]


def parse_wave(wave: Any) -> list[PodGroup]:
    """Validate `wave` (as rendered from the DAG or an XCom) and return its pod groups."""
    if isinstance(wave, Mapping):
        wave = [wave]
    if not isinstance(wave, Sequence) or isinstance(wave, str | bytes):
        raise WaveError(f"wave: expected a list of pod groups, got {type(wave).__name__}")
    groups: list[PodGroup] = []
    seen: set[str] = set()
    for i, raw in enumerate(wave):
        group = _parse_group(i, raw)
        if group.name in seen:
            if isinstance(raw, Mapping) and raw.get("name"):
                raise WaveError(f"wave[{i}].name: {group.name!r} is used by an earlier group")
            # Two unnamed groups on one pool (e.g. two pod shapes): label them apart.
            group = replace(group, name=f"{group.pool}#{i}")
        seen.add(group.name)
        groups.append(group)
    return groups


def _parse_group(index: int, raw: Any) -> PodGroup:
    where = f"wave[{index}]"
    if not isinstance(raw, Mapping):
        raise WaveError(f"{where}: expected a mapping, got {type(raw).__name__}")
    unknown = set(raw) - _KEYS
    if unknown:
        raise WaveError(f"{where}: unknown keys {sorted(unknown)}; allowed: {sorted(_KEYS)}")
    pool = raw.get("pool")
    if not isinstance(pool, str) or not pool:
        raise WaveError(f"{where}.pool: expected a non-empty string, got {pool!r}")
    where = f"{where} (pool {pool!r})"
    count = raw.get("count", 1)
    if isinstance(count, str) and count.strip().isdigit():
        count = int(count)  # a Jinja-rendered count arrives as text
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise WaveError(f"{where}.count: expected an integer >= 0, got {count!r}")
    requests = raw.get("requests") or {}
    if not isinstance(requests, Mapping):
        raise WaveError(f"{where}.requests: expected a mapping, got {type(requests).__name__}")
    try:
        parsed = parse_resources(requests)
    except QuantityError as exc:
        raise WaveError(f"{where}.requests: {exc}") from exc
    parsed[PODS] = 1
    selector = raw.get("node_selector") or {}
    if not isinstance(selector, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in selector.items()
    ):
        raise WaveError(f"{where}.node_selector: expected a mapping of strings, got {selector!r}")
    tolerations = raw.get("tolerations") or []
    if not isinstance(tolerations, Sequence) or isinstance(tolerations, str):
        raise WaveError(f"{where}.tolerations: expected a list, got {type(tolerations).__name__}")
    for j, tol in enumerate(tolerations):
        if not isinstance(tol, Mapping) or set(tol) - _TOLERATION_KEYS:
            raise WaveError(f"{where}.tolerations[{j}]: expected keys among "
                            f"{sorted(_TOLERATION_KEYS)}, got {tol!r}")
        if tol.get("operator", "Equal") not in ("Equal", "Exists"):
            raise WaveError(f"{where}.tolerations[{j}].operator: expected Equal or Exists")
    flavor = raw.get("flavor")
    if flavor is not None and not isinstance(flavor, str):
        raise WaveError(f"{where}.flavor: expected a string, got {flavor!r}")
    return PodGroup(
        name=str(raw.get("name") or pool),
        pool=pool,
        count=count,
        requests=parsed,
        node_selector=dict(selector),
        tolerations=tuple(dict(t) for t in tolerations),
        flavor=flavor,
    )
