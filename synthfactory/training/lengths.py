"""Length specs: how long each synthetic document is.

Every spec draws a whole vector of lengths at once from a numpy Generator
(``sample(rng, n)``); the caller owns the generator, which is what makes the draws
seeded, rank-aware and resumable (see :mod:`synthfactory.training.length_source`).
Specs round-trip through their JSON forms (``spec_from_dict`` / ``to_dict``;
docs/training-smoke.md, "Length specs (JSON)").
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from synthfactory.errors import SynthfactoryError, same_kind


@dataclass(frozen=True)
class LengthBucket:
    """Lengths uniform in [min_len, max_len], chosen with probability ~ weight."""

    min_len: int
    max_len: int
    weight: float = 1.0

    def __post_init__(self) -> None:
        if int(self.min_len) != self.min_len or self.min_len < 1:
            raise SynthfactoryError(f"length bucket {self}: min_len must be an integer >= 1")
        if int(self.max_len) != self.max_len or self.max_len < self.min_len:
            raise SynthfactoryError(f"length bucket {self}: max_len must be an integer >= min_len")
        if not math.isfinite(self.weight) or self.weight <= 0:
            raise SynthfactoryError(f"length bucket {self}: weight must be finite and > 0")
        object.__setattr__(self, "min_len", int(self.min_len))
        object.__setattr__(self, "max_len", int(self.max_len))


@dataclass(frozen=True)
class BucketLengthSpec:
    """Pick a bucket by weight, then a length uniformly inside it."""

    buckets: tuple[LengthBucket, ...]

    def __post_init__(self) -> None:
        if not self.buckets:
            raise SynthfactoryError("bucket length spec: needs at least one bucket")

    @property
    def min_len(self) -> int:
        return min(b.min_len for b in self.buckets)

    @property
    def max_len(self) -> int:
        return max(b.max_len for b in self.buckets)

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        weights = np.array([b.weight for b in self.buckets], dtype=np.float64)
        lows = np.array([b.min_len for b in self.buckets], dtype=np.int64)
        highs = np.array([b.max_len for b in self.buckets], dtype=np.int64)
        which = rng.choice(len(self.buckets), size=n, p=weights / weights.sum())
        return rng.integers(lows[which], highs[which] + 1, dtype=np.int64)

    def to_dict(self) -> dict:
        return {
            "type": "buckets",
            "buckets": [
                {"min_len": b.min_len, "max_len": b.max_len, "weight": b.weight}
                for b in self.buckets
            ],
        }


# dist -> (allowed params, defaults as a function of (min_len, max_len))
_PARAMETRIC = {
    "uniform": ((), lambda lo, hi: {}),
    "normal": (("mean", "std"), lambda lo, hi: {"mean": (lo + hi) / 2, "std": (hi - lo) / 6}),
    # mean and sigma of the underlying normal, as numpy's lognormal takes them.
    "lognormal": (("mean", "sigma"), lambda lo, hi: {"mean": math.log(lo * 8), "sigma": 1.0}),
    # lengths = min_len - 1 + Zipf(alpha): heavy tail starting at min_len.
    "zipf": (("alpha",), lambda lo, hi: {"alpha": 1.5}),
}


@dataclass(frozen=True)
class ParametricLengthSpec:
    """A named law, rounded to integers and clamped to [min_len, max_len]."""

    dist: str
    min_len: int
    max_len: int
    params: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        name = f"parametric spec {self.dist!r}"
        if self.dist not in _PARAMETRIC:
            raise SynthfactoryError(f"{name}: unknown dist (use one of {sorted(_PARAMETRIC)})")
        LengthBucket(self.min_len, self.max_len)  # same bound checks, same messages
        allowed, defaults = _PARAMETRIC[self.dist]
        unknown = sorted(set(self.params) - set(allowed))
        if unknown:
            raise SynthfactoryError(f"{name}: unknown params {unknown} (allowed: {list(allowed)})")
        merged = {**defaults(self.min_len, self.max_len), **self.params}
        for key, value in merged.items():
            if not isinstance(value, (int, float)) or not math.isfinite(value):
                raise SynthfactoryError(f"{name}: param {key!r} must be a finite number")
        for key in ("std", "sigma"):
            if key in merged and merged[key] <= 0:
                raise SynthfactoryError(f"{name}: param {key!r} must be > 0")
        if self.dist == "zipf" and merged["alpha"] <= 1:
            raise SynthfactoryError(f"{name}: param 'alpha' must be > 1")
        object.__setattr__(self, "params", merged)

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        p, lo, hi = self.params, self.min_len, self.max_len
        if self.dist == "uniform":
            return rng.integers(lo, hi + 1, size=n, dtype=np.int64)
        if self.dist == "normal":
            raw = rng.normal(p["mean"], p["std"], size=n)
        elif self.dist == "lognormal":
            raw = rng.lognormal(p["mean"], p["sigma"], size=n)
        else:
            # Zipf draws can exceed int64 for alpha near 1; clip as float first.
            raw = lo - 1 + np.minimum(rng.zipf(p["alpha"], size=n).astype(np.float64), hi)
        return np.clip(np.rint(raw), lo, hi).astype(np.int64)

    def to_dict(self) -> dict:
        return {
            "type": "parametric",
            "dist": self.dist,
            "min_len": self.min_len,
            "max_len": self.max_len,
            "params": dict(self.params),
        }


@dataclass(frozen=True)
class EmpiricalLengthSpec:
    """Resample (with replacement) lengths that were observed, e.g. a run's output."""

    lengths: np.ndarray = field(repr=False)
    source: str = ""

    def __post_init__(self) -> None:
        arr = np.asarray(self.lengths, dtype=np.int64)
        if arr.ndim != 1 or arr.size == 0:
            raise SynthfactoryError(f"empirical spec {self.source!r}: no lengths to sample from")
        if arr.min() < 1:
            raise SynthfactoryError(
                f"empirical spec {self.source!r}: lengths must be >= 1 (found {int(arr.min())})"
            )
        object.__setattr__(self, "lengths", arr)

    @property
    def min_len(self) -> int:
        return int(self.lengths.min())

    @property
    def max_len(self) -> int:
        return int(self.lengths.max())

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return self.lengths[rng.integers(0, self.lengths.size, size=n)]

    def to_dict(self) -> dict:
        out: dict = {"type": "empirical", "source": self.source}
        if not self.source:
            out["lengths"] = self.lengths.tolist()
        return out


LengthSpec = BucketLengthSpec | ParametricLengthSpec | EmpiricalLengthSpec


def spec_from_dict(obj: dict, *, name: str = "length spec") -> LengthSpec:
    """Build a spec from its JSON form; ``name`` (usually the file) prefixes errors."""
    if not isinstance(obj, dict) or "type" not in obj:
        raise SynthfactoryError(f"{name}: expected an object with a 'type' key")
    kind = obj["type"]
    try:
        if kind == "buckets":
            buckets = obj.get("buckets")
            if not isinstance(buckets, Sequence) or isinstance(buckets, str):
                raise SynthfactoryError("'buckets' must be a list")
            return BucketLengthSpec(tuple(_bucket(b) for b in buckets))
        if kind == "parametric":
            return ParametricLengthSpec(
                dist=obj.get("dist", ""),
                min_len=obj.get("min_len", 1),
                max_len=obj.get("max_len", 0),
                params=dict(obj.get("params") or {}),
            )
        if kind == "empirical":
            if "lengths" in obj:
                return EmpiricalLengthSpec(obj["lengths"], source=obj.get("source", ""))
            if not obj.get("source"):
                raise SynthfactoryError("empirical spec needs 'source' (a run URL) or 'lengths'")
            from synthfactory.training.run_data import read_output_lengths

            return EmpiricalLengthSpec(read_output_lengths(obj["source"]), source=obj["source"])
    except SynthfactoryError as exc:
        raise same_kind(exc, f"{name}: {exc}") from exc  # reading a run may time out
    except (TypeError, ValueError) as exc:
        raise SynthfactoryError(f"{name}: malformed {kind!r} spec ({exc})") from exc
    raise SynthfactoryError(f"{name}: unknown type {kind!r} (buckets, parametric, empirical)")


def _bucket(obj) -> LengthBucket:
    if not isinstance(obj, dict):
        raise SynthfactoryError(f"bucket {obj!r} must be an object")
    unknown = sorted(set(obj) - {"min_len", "max_len", "weight"})
    if unknown:
        raise SynthfactoryError(f"bucket {obj}: unknown keys {unknown}")
    missing = [k for k in ("min_len", "max_len") if k not in obj]
    if missing:
        raise SynthfactoryError(f"bucket {obj}: missing {missing}")
    return LengthBucket(obj["min_len"], obj["max_len"], float(obj.get("weight", 1.0)))


def load_spec(url: str) -> LengthSpec:
    """Read a spec file (any storage URL or path)."""
    from synthfactory import storage

    return spec_from_dict(storage.read_json(url), name=url)
