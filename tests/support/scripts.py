"""scripts/*.py loaded as modules: scripts/ is not a package, and a test that imports a
script proves it still parses and its imports resolve."""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

from tests.support.paths import ROOT


def load_script(name: str) -> ModuleType:
    """scripts/NAME.py as a module named NAME (its ``__main__`` block does not run)."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # as an import would: dataclasses look their module up
    spec.loader.exec_module(module)
    return module
