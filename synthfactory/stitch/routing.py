"""Routing: which templates a document may get, from its domain and its quality bucket,
the way Nemotron-CC routes (low-quality web text to a clean encyclopedic paraphrase,
high-quality text to question/answer, distillation and knowledge lists; ADR 0139).

A routing table is one JSON file, ``routing.json``: the shipped one beside the shipped
templates (``synthfactory/templates/routing.json``), or one of your own in your
``--templates-url`` folder, which replaces it. It is in effect only with ``stitch
--routing on`` (DAG Param ``routing``); without it every document draws from
``--templates`` exactly as before. Its shape::

    {"buckets": {"names": ["low", "medium", "high"], "edges": [0.35, 0.7],
                 "unscored": "medium"},
     "routes": {"web": {"low": ["encyclopedic"], "medium": [...], "high": [...]},
                "code": {"*": ["code_tutorial", "code_commented"]},
                "math": {"*": ["math_solution", "math_textbook"]}}}

A document's bucket is the first whose upper edge its ``--quality-column`` value is below
(the last bucket: at or above the last edge); without ``--quality-column`` every
document is in the ``unscored`` bucket. ``"*"`` routes every bucket of a domain. A
document's domain is its ``--domain-column`` value, or detected from its text
(``detect_domain``): code fences and indented code, else math markup, else web.

The table is checked with the templates folder, every problem one line: an unknown
template, a bucket with no route, a domain with no template, a template written for
another domain.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any

from synthfactory import storage
from synthfactory.errors import PermanentError
from synthfactory.stitch.templates import PromptTemplate, shipped_url

ROUTING_FILE = "routing.json"
# The domains a document can have (a template's "any" is not one: it fits all three).
DOCUMENT_DOMAINS = ("web", "code", "math")
EVERY_BUCKET = "*"
KEYS = ("description", "buckets", "routes")
BUCKET_KEYS = ("names", "edges", "unscored")

_FENCE = re.compile(r"^\s*(```|~~~)")
_CODE_LINE = re.compile(
    r"^(\t| {4,})\S|^\s*(def |class |import |from \S+ import |return\b|for .*:$|if .*:$|"
    r"#include|fn |let |const |var |function |public |package )|[;{}]\s*$")
_MATH = re.compile(
    r"\$\$|\$[^$\n]{1,200}\$|\\\[|\\\(|\\begin\{(equation|align|eqnarray|gather)|"
    r"\\(frac|dfrac|sum|prod|int|sqrt|lim|cdot|times|leq|geq|neq|infty|alpha|beta|theta|"
    r"lambda|sigma|pi|partial|mathbb|mathrm)(?![A-Za-z])")
CODE_SHARE = 0.3  # of a document's non-empty lines, in fences or looking like code
MATH_HITS = 2  # math markers outside code


def detect_domain(text: str | None) -> str:
    """web, code or math, from the text alone: code when at least ``CODE_SHARE`` of its
    non-empty lines are inside code fences or look like code (indented four spaces or a
    tab, or a keyword of a common language at the line's start, or ending in ; { });
    else math when it holds ``MATH_HITS`` math markers (``$...$``, ``\\frac``, ``\\sum``,
    ``\\[``, an equation environment, ...) outside code; else web."""
    if not text:
        return "web"
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return "web"
    inside = False
    code = 0
    prose: list[str] = []
    for line in lines:
        if _FENCE.match(line):
            inside = not inside
            code += 1
            continue
        if inside or _CODE_LINE.search(line):
            code += 1
        else:
            prose.append(line)
    if code / len(lines) >= CODE_SHARE:
        return "code"
    if len(_MATH.findall("\n".join(prose))) >= MATH_HITS:
        return "math"
    return "web"


@dataclass(frozen=True)
class RoutingTable:
    names: tuple[str, ...]  # bucket names, low to high
    edges: tuple[float, ...]  # len(names) - 1 ascending upper edges
    unscored: str  # the bucket of every document when no quality column is given
    routes: dict[str, dict[str, tuple[str, ...]]]  # domain -> bucket -> template ids
    source: str  # the file's URL
    description: str = ""

    def document(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "buckets": {"names": list(self.names), "edges": list(self.edges),
                        "unscored": self.unscored},
            "routes": {d: {b: list(t) for b, t in by.items()} for d, by in self.routes.items()},
        }
        if self.description:
            data["description"] = self.description
        return data

    @property
    def hash(self) -> str:
        """sha256 of the canonical JSON, as a template's hash: any formatting of the file
        hashes the same."""
        canonical = json.dumps(self.document(), sort_keys=True, separators=(",", ":"),
                               ensure_ascii=False)
        return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()

    def route(self, domain: str, bucket: str) -> tuple[str, ...]:
        by = self.routes.get(domain, {})
        return by.get(bucket, by.get(EVERY_BUCKET, ()))

    def pairs(self) -> list[tuple[str, str, str]]:
        """(domain, bucket, template id) for every domain and bucket: what stitch joins."""
        return [(d, b, t) for d in DOCUMENT_DOMAINS for b in self.names
                for t in self.route(d, b)]

    def template_ids(self) -> list[str]:
        """Every template some route names, in the order first named."""
        return list(dict.fromkeys(t for _, _, t in self.pairs()))

    def widest(self) -> int:
        """The most templates one route allows: styles_per_doc's upper bound."""
        return max(len(self.route(d, b)) for d in DOCUMENT_DOMAINS for b in self.names)

    def restricted(self, allowed: list[str]) -> RoutingTable:
        """The table with only the ``allowed`` templates (stitch's ``--templates``)."""
        keep = set(allowed)
        return RoutingTable(self.names, self.edges, self.unscored,
                            {d: {b: tuple(t for t in ts if t in keep) for b, ts in by.items()}
                             for d, by in self.routes.items()},
                            self.source, self.description)


def _problems_of_shape(data: object) -> list[str]:
    if not isinstance(data, dict):
        return ["expected a JSON object with 'buckets' and 'routes'"]
    found = [f"unknown key {k!r} (known: {list(KEYS)})" for k in sorted(set(data) - set(KEYS))]
    buckets = data.get("buckets")
    if not isinstance(buckets, dict):
        return [*found, "'buckets' must be an object with names, edges and unscored"]
    found += [f"buckets: unknown key {k!r} (known: {list(BUCKET_KEYS)})"
              for k in sorted(set(buckets) - set(BUCKET_KEYS))]
    names, edges = buckets.get("names"), buckets.get("edges", [])
    if (not isinstance(names, list) or not names
            or not all(isinstance(n, str) and n and n != EVERY_BUCKET for n in names)
            or len(set(names)) != len(names)):
        found.append("buckets.names must be a non-empty list of distinct bucket names")
    elif (not isinstance(edges, list)
          or not all(isinstance(e, int | float) and not isinstance(e, bool) for e in edges)
          or len(edges) != len(names) - 1 or sorted(set(edges)) != edges):
        found.append(f"buckets.edges must be {len(names) - 1} ascending number(s), one "
                     f"between each two of the {len(names)} bucket names, got {edges!r}")
    elif buckets.get("unscored", names[0] if len(names) == 1 else None) not in names:
        found.append(f"buckets.unscored must name the bucket of documents without a quality "
                     f"score, one of {names}, got {buckets.get('unscored')!r}")
    routes = data.get("routes")
    if not isinstance(routes, dict):
        return [*found, "'routes' must be an object: domain -> bucket -> template ids"]
    for domain, by in routes.items():
        if domain not in DOCUMENT_DOMAINS:
            found.append(f"routes: unknown domain {domain!r} (documents are "
                         f"{', '.join(DOCUMENT_DOMAINS)})")
        elif not isinstance(by, dict) or not all(
                isinstance(ts, list) and all(isinstance(t, str) for t in ts)
                for ts in by.values()):
            found.append(f"routes.{domain} must be an object: bucket (or \"*\") -> a list "
                         "of template ids")
    return found


def parse_routing(data: object, source: str, templates: dict[str, PromptTemplate],
                  allowed: list[str] | None = None) -> RoutingTable:
    """The table, checked against the templates folder (and ``allowed``: stitch's
    ``--templates`` when given); every problem one line of one PermanentError."""
    found = _problems_of_shape(data)
    if found:
        raise PermanentError("\n".join(f"routing {source}: {p}" for p in found))
    assert isinstance(data, dict)
    buckets = data["buckets"]
    names = tuple(buckets["names"])
    table = RoutingTable(
        names=names, edges=tuple(float(e) for e in buckets.get("edges", [])),
        unscored=buckets.get("unscored", names[0]),
        routes={d: {b: tuple(ts) for b, ts in by.items()} for d, by in data["routes"].items()},
        source=source, description=str(data.get("description", "")))
    for domain, by in table.routes.items():
        for bucket, ids in by.items():
            if bucket != EVERY_BUCKET and bucket not in names:
                found.append(f"routes.{domain}.{bucket}: unknown bucket (buckets: "
                             f"{list(names)})")
            for t in ids:
                if t not in templates:
                    found.append(f"routes.{domain}.{bucket}: unknown template {t!r} (in the "
                                 f"templates folder: {sorted(templates)})")
                elif templates[t].domain not in (domain, "any"):
                    found.append(f"routes.{domain}.{bucket}: template {t!r} is written for "
                                 f"{templates[t].domain} documents, not {domain}")
            if len(set(ids)) != len(ids):
                found.append(f"routes.{domain}.{bucket}: a template named twice in {list(ids)}")
    if allowed:
        table = table.restricted(allowed)
    for domain in DOCUMENT_DOMAINS:
        by = table.routes.get(domain)
        if not by or not any(by.values()):
            found.append(f"domain {domain!r} has no template"
                         + (f" among --templates {allowed}" if allowed else ""))
            continue
        for bucket in names:
            if bucket not in by and EVERY_BUCKET not in by:
                found.append(f"routes.{domain}: bucket {bucket!r} has no route")
            elif not table.route(domain, bucket):
                found.append(f"routes.{domain}: bucket {bucket!r} has no template"
                             + (f" among --templates {allowed}" if allowed else ""))
    if found:
        raise PermanentError("\n".join(f"routing {source}: {p}" for p in found))
    return table


def routing_url(folder: str | None) -> str:
    """The table in effect: the folder's routing.json if it has one, else the shipped."""
    if folder:
        own = storage.join(storage.normalize(folder).rstrip("/"), ROUTING_FILE)
        if storage.exists(own):
            return own
    return storage.join(shipped_url(), ROUTING_FILE)


def load_routing(folder: str | None, templates: dict[str, PromptTemplate],
                 allowed: list[str] | None = None) -> RoutingTable:
    url = routing_url(folder)
    try:
        data = json.loads(storage.read_bytes(url))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise PermanentError(f"routing {url}: not valid JSON ({exc})") from exc
    return parse_routing(data, url, templates, allowed)
