"""The price of a device-hour: one rule for ``synthfactory report`` and ``estimate``
(a module of its own, so the estimate does not import the report's readers)."""

from __future__ import annotations

import argparse
import os

from synthfactory.contract import GPU_HOUR_USD_ENV as PRICE_ENV
from synthfactory.errors import SynthfactoryError

DEFAULT_GPU_HOUR_USD = 2.50  # an on-demand H100-class hour, order of magnitude


def price(text: str) -> float:
    """An argparse type: a price in USD >= 0."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a price in USD >= 0")
    return value


def gpu_hour_price(given: float | None) -> float:
    """``given``, else ``$SYNTHFACTORY_GPU_HOUR_USD``, else the default."""
    if given is not None:
        return given
    text = os.environ.get(PRICE_ENV)
    if not text:
        return DEFAULT_GPU_HOUR_USD
    try:
        return price(text)
    except argparse.ArgumentTypeError as exc:
        raise SynthfactoryError(f"${PRICE_ENV}={text!r}: expected a price in USD >= 0") from exc
