"""The shipped routing table as one line for the trigger form (ADR 0139).

Stdlib only, like the rest of the contract: the Airflow side reads the JSON file
(``synthfactory/templates/routing.json``) and imports nothing of the engine. Where the
file is not installed (the Airflow image carries the contract module alone), the line
points at it instead.
"""

from __future__ import annotations

import json
from pathlib import Path

SHIPPED_ROUTING = Path(__file__).resolve().parents[1] / "templates" / "routing.json"


def routes_line(path: Path = SHIPPED_ROUTING) -> str:
    """``web low: encyclopedic | web medium: encyclopedic, qa | ... | code *: ...`` with
    the bucket edges, or a pointer to the file when it cannot be read."""
    try:
        table = json.loads(path.read_text(encoding="utf-8"))
        buckets = table["buckets"]
        names, edges = buckets["names"], buckets.get("edges", [])
        bounds = ", ".join(
            f"{name} {'<' + str(edges[i]) if i < len(edges) else '>=' + str(edges[-1])}"
            if edges else name for i, name in enumerate(names))
        routes = " | ".join(f"{domain} {bucket}: {', '.join(ids)}"
                            for domain, by in table["routes"].items()
                            for bucket, ids in by.items())
        return (f"buckets of quality_column: {bounds} (none: {buckets.get('unscored')}); "
                f"routes: {routes}")
    except (OSError, ValueError, KeyError, TypeError, IndexError):
        return "the shipped table: synthfactory/templates/routing.json (docs/templates.md)"
