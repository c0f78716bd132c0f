"""The price of a device-hour: one rule for ``synthfactory report`` and ``estimate``
(a module of its own, so the estimate does not import the report's readers)."""

from __future__ import annotations

import argparse
import os

from synthfactory.contract import GPU_HOUR_USD_ENV as PRICE_ENV
from synthfactory.contract.flag_types import price
from synthfactory.contract.names import DEFAULT_GPU_HOUR_USD
from synthfactory.errors import SynthfactoryError


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
