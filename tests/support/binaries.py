"""A program the tests need from the machine (a Debian package `make test` installs):
its path, or a skip naming it, which is a failure under CI=true (docs/adr/0065)."""

from __future__ import annotations

import os
import shutil

import pytest


def required_binary(name: str, package: str) -> str:
    path = shutil.which(name)
    if path is None:
        why = f"{name} is not installed (make test installs Debian's {package})"
        if os.environ.get("CI") == "true":
            pytest.fail(why)
        pytest.skip(why)
    return path
