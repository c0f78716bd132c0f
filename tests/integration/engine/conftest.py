"""The engine's integration tests share the unit tests' prompt-shard fixtures."""

from __future__ import annotations

import sys
from pathlib import Path

UNIT_ENGINE = str(Path(__file__).resolve().parents[2] / "unit" / "engine")
if UNIT_ENGINE not in sys.path:
    sys.path.append(UNIT_ENGINE)  # rephrase_fixtures.py
