"""A run's grounding figures: a document's chunks' scores joined into its row, and the
usable rows counted by grounding band, by template, domain and how they ended
(stopped by themselves or trimmed), for the join's summary, report.json, the Run
report, the card and the demo summary (docs/adr/0148)."""

from __future__ import annotations

from dataclasses import dataclass, field
from statistics import median

# Bands of a usable row's ``grounded`` score (the share of its content its source has),
# each named "low-high" so that the names sort as the bands do (JSON files are written
# with sorted keys); a row lands in the last band whose lower bound it reaches.
BANDS = (("0.0-0.5", 0.0), ("0.5-0.7", 0.5), ("0.7-0.9", 0.7), ("0.9-1.0", 0.9))
UNSCORED = "unscored"  # gated before scores were kept, or not scored (another language)
ENDINGS = ("stopped", "trimmed")


def band(grounded: float | None) -> str:
    if grounded is None:
        return UNSCORED
    return [name for name, low in BANDS if grounded >= low][-1]


def _weighted(values: list[float | None], weights: list[int | None]) -> float | None:
    if not values or any(v is None for v in values):
        return None
    total = sum(w or 0 for w in weights)
    if not total:
        return round(sum(values) / len(values), 4)
    return round(sum(v * (w or 0) for v, w in zip(values, weights, strict=True)) / total, 4)


def joined_scores(chunks: list[dict]) -> dict:
    """A document's row from its chunks' score columns, in chunk order: word counts
    summed; grounded weighted by each chunk's output words, content kept by its source
    words (each share of its own text); drift and end_kept the lowest (one chunk that
    drifts or stops halfway is the row's fault); invented terms and repeats together."""
    def column(name: str) -> list:
        return [c.get(name) for c in chunks]

    src, out = column("source_words"), column("output_words")
    invented = column("invented_terms")
    repeated = column("repeated_sentences")
    return {
        "grounded": _weighted(column("grounded"), out),
        "drift": None if None in column("drift") else min(column("drift"), default=None),
        "content_kept": _weighted(column("content_kept"), src),
        "end_kept": None if None in column("end_kept") else min(column("end_kept"),
                                                                 default=None),
        "invented_terms": (None if None in invented
                           else sorted({t for terms in invented for t in terms})),
        "repeated_sentences": None if None in repeated else sum(repeated),
        "source_words": None if None in src else sum(src),
        "output_words": None if None in out else sum(out),
    }


@dataclass
class _Ending:
    ratios: list[float] = field(default_factory=list)
    kept: list[float] = field(default_factory=list)
    grounded: list[float] = field(default_factory=list)
    rows: int = 0

    def figures(self) -> dict:
        def mid(values: list[float]) -> float | None:
            return round(median(values), 3) if values else None

        return {"rows": self.rows, "output_source_ratio": mid(self.ratios),
                "content_kept": mid(self.kept), "grounded": mid(self.grounded)}


@dataclass
class GroundingTotals:
    """The usable joined rows by band, overall, by template and by domain, and the
    medians of the rows that stopped by themselves and of those trimmed."""

    bands: dict[str, int] = field(default_factory=dict)
    by_template: dict[str, dict[str, int]] = field(default_factory=dict)
    by_domain: dict[str, dict[str, int]] = field(default_factory=dict)
    endings: dict[str, _Ending] = field(default_factory=lambda: {e: _Ending() for e in ENDINGS})

    def add(self, row: dict, template: str, domain: str) -> None:
        name = band(row.get("grounded"))
        for counts in (self.bands, self.by_template.setdefault(template, {}),
                       self.by_domain.setdefault(domain, {})):
            counts[name] = counts.get(name, 0) + 1
        ending = self.endings["trimmed" if row.get("trimmed_chunks") else "stopped"]
        ending.rows += 1
        if row.get("source_words") and row.get("output_words") is not None:
            ending.ratios.append(row["output_words"] / row["source_words"])
        if row.get("content_kept") is not None:
            ending.kept.append(row["content_kept"])
        if row.get("grounded") is not None:
            ending.grounded.append(row["grounded"])

    def summary(self) -> dict:
        order = [name for name, _ in BANDS] + [UNSCORED]

        def ordered(counts: dict[str, int]) -> dict[str, int]:
            return {name: counts.get(name, 0) for name in order
                    if name != UNSCORED or counts.get(name)}

        return {"bands": ordered(self.bands),
                "by_template": {t: ordered(c) for t, c in sorted(self.by_template.items())},
                "by_domain": {d: ordered(c) for d, c in sorted(self.by_domain.items())},
                "by_ending": {e: self.endings[e].figures() for e in ENDINGS}}
