"""The routing table (ADR 0139): the shipped one loads and covers every domain and
bucket; a table of one's own replaces it; every problem is one line; domains are
detected from the text."""

from __future__ import annotations

import json

import pytest

from synthfactory.contract import STYLES
from synthfactory.errors import PermanentError
from synthfactory.stitch.routing import (
    DOCUMENT_DOMAINS,
    ROUTING_FILE,
    detect_domain,
    load_routing,
    parse_routing,
    routing_url,
)
from synthfactory.stitch.templates import available, load_folder, shipped_url

SHIPPED = load_folder()
GOOD = {"buckets": {"names": ["low", "high"], "edges": [0.5], "unscored": "low"},
        "routes": {"web": {"low": ["encyclopedic"], "high": ["qa", "distill"]},
                   "code": {"*": ["code_tutorial"]}, "math": {"*": ["math_solution"]}}}


def test_the_shipped_table_routes_every_domain_and_bucket_to_shipped_templates():
    table = load_routing(None, SHIPPED)
    assert table.source == shipped_url() + "/" + ROUTING_FILE
    for domain in DOCUMENT_DOMAINS:
        for bucket in table.names:
            route = table.route(domain, bucket)
            assert route and all(SHIPPED[t].domain in (domain, "any") for t in route)
    assert set(table.template_ids()) <= set(STYLES)
    # Nemotron-CC: low-quality web text gets the clean encyclopedic paraphrase only
    assert table.route("web", "low") == ("encyclopedic",)
    assert {"qa", "distill", "knowledge_list"} == set(table.route("web", "high"))


def test_routing_json_is_not_a_template():
    assert "routing" not in available()
    assert "routing" not in SHIPPED


def test_the_hash_ignores_formatting_and_follows_the_routes(tmp_path):
    a = parse_routing(GOOD, "a", SHIPPED)
    (tmp_path / ROUTING_FILE).write_text(json.dumps(GOOD, indent=3))
    for name in ("encyclopedic", "qa", "distill", "code_tutorial", "math_solution"):
        (tmp_path / f"{name}.json").write_text(json.dumps(SHIPPED[name].document()))
    own = load_routing(f"file://{tmp_path}", load_folder(f"file://{tmp_path}"))
    assert own.source == f"file://{tmp_path}/{ROUTING_FILE}" and own.hash == a.hash
    changed = json.loads(json.dumps(GOOD))
    changed["routes"]["web"]["high"] = ["qa"]
    assert parse_routing(changed, "b", SHIPPED).hash != a.hash


def test_a_folder_without_a_table_uses_the_shipped_one(tmp_path):
    assert routing_url(f"file://{tmp_path}") == shipped_url() + "/" + ROUTING_FILE


def test_buckets_by_edge_and_unscored():
    table = parse_routing(GOOD, "t", SHIPPED)
    assert table.names == ("low", "high") and table.edges == (0.5,)
    assert table.widest() == 2
    assert ("web", "high", "distill") in table.pairs()
    assert ("code", "low", "code_tutorial") in table.pairs()  # "*": every bucket


def _problems(data: dict, allowed=None) -> list[str]:
    with pytest.raises(PermanentError) as caught:
        parse_routing(data, "r.json", SHIPPED, allowed)
    lines = str(caught.value).splitlines()
    assert all(line.startswith("routing r.json: ") for line in lines)
    return [line.removeprefix("routing r.json: ") for line in lines]


def test_every_problem_is_one_line():
    bad = json.loads(json.dumps(GOOD))
    bad["buckets"] = {"names": ["low", "mid", "high"], "edges": [0.3, 0.6], "unscored": "mid"}
    bad["routes"]["web"] = {"low": ["encyclopedic", "nope"], "high": ["math_textbook"]}
    del bad["routes"]["math"]
    assert _problems(bad) == [
        "routes.web.low: unknown template 'nope' (in the templates folder: "
        f"{sorted(SHIPPED)})",
        "routes.web.high: template 'math_textbook' is written for math documents, not web",
        "routes.web: bucket 'mid' has no route",
        "domain 'math' has no template",
    ]


@pytest.mark.parametrize("change, problem", [
    ({"buckets": {"names": ["a", "b"], "edges": [0.7, 0.2], "unscored": "a"}},
     "buckets.edges must be 1 ascending number(s)"),
    ({"buckets": {"names": ["a", "b"], "edges": [0.5], "unscored": "c"}},
     "buckets.unscored must name the bucket"),
    ({"routes": {"prose": {}}}, "routes: unknown domain 'prose'"),
    ({"route": {}}, "unknown key 'route'"),
])
def test_shape_problems(change, problem):
    assert any(p.startswith(problem) for p in _problems({**GOOD, **change}))


def test_templates_restrict_the_routes():
    table = parse_routing(GOOD, "t", SHIPPED,
                          ["encyclopedic", "qa", "code_tutorial", "math_solution"])
    assert table.route("web", "high") == ("qa",)
    assert _problems(GOOD, ["encyclopedic", "code_tutorial", "math_solution"]) == [
        "routes.web: bucket 'high' has no template among --templates "
        "['encyclopedic', 'code_tutorial', 'math_solution']"]


@pytest.mark.parametrize("text, domain", [
    ("Plain prose about rivers. It has two sentences.", "web"),
    ("Intro line.\n```python\nimport os\nprint(os.getcwd())\n```\n", "code"),
    ("def area(r):\n    return 3.14 * r * r\n", "code"),
    ("function add(a, b) {\n  return a + b;\n}\n", "code"),
    ("The area is $\\pi r^2$, so for $r = 2$ it is about 12.57.", "math"),
    ("We compute \\frac{1}{2} and then \\sum_{i=1}^{n} i = n(n+1)/2.", "math"),
    ("Die Donau fließt durch zehn Länder und mündet ins Schwarze Meer.", "web"),
    ("It costs $5 today.", "web"),  # one dollar sign is no formula
    ("", "web"),
])
def test_detect_domain(text, domain):
    assert detect_domain(text) == domain
