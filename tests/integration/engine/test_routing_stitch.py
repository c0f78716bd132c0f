"""Routing on a mixed corpus (issue 33, ADR 0139), real Spark stitch in local mode:
prose in three quality buckets, Python and JavaScript, math with numbers and LaTeX, a
German document, one domain given by a column; each document gets templates its
route names only (styles_per_doc of them, or all its route has), the pick stable on a
rerun; then rephrased by the echo engine, validated and joined: the yield per domain
in _JOINED.json and the report adds up to the whole."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from synthfactory import storage
from synthfactory.cli_types import AUTO
from synthfactory.contract import paths
from synthfactory.demo_summary import yield_lines
from synthfactory.join import join_run
from synthfactory.layout import RunLayout
from synthfactory.model import default_model_dir, is_ready
from synthfactory.rephrase.engines import EchoEngine
from synthfactory.rephrase.worker import WorkerOptions, rephrase_shard
from synthfactory.report.collect import collect
from synthfactory.stitch.job import StitchConfig, stitch
from synthfactory.stitch.routing import load_routing
from synthfactory.stitch.templates import load_folder, load_templates
from synthfactory.validate import validate_shard

pytestmark = [pytest.mark.slow, pytest.mark.skipif(
    not is_ready(default_model_dir()), reason="run `synthfactory model prepare` (make setup)")]

PROSE = ("The harbour town grew around its fish market. Boats came in at dawn, and the "
         "traders sold the catch before noon. ")
# id -> (text, quality, domain column value, domain expected)
CORPUS = {
    "prose-low": ("click here best deals " * 8 + PROSE, 0.1, None, "web"),
    "prose-mid": (PROSE * 3, 0.5, None, "web"),
    "prose-high": (PROSE * 4 + "The market still opens at six every morning.", 0.9, None,
                   "web"),
    "german-high": ("Die Stadt wuchs um ihren Fischmarkt herum. Die Boote kamen im "
                    "Morgengrauen, und die Händler verkauften den Fang vor Mittag. " * 3,
                    0.8, None, "web"),
    "python": ("How to total a list:\n\n```python\ndef total(values):\n    result = 0\n"
               "    for v in values:\n        result += v\n    return result\n```\n", 0.9,
               None, "code"),
    "javascript": ("function mean(xs) {\n  let s = 0;\n  for (const x of xs) {\n"
                   "    s += x;\n  }\n  return s / xs.length;\n}\n", 0.2, None, "code"),
    "math": ("A circle of radius $r = 3$ has area $A = \\pi r^2$, about 28.27. Its "
             "circumference is $C = 2\\pi r$, about 18.85, and \\frac{A}{C} = 1.5.", 0.5,
             None, "math"),
    "told-math": (PROSE, 0.9, "math", "math"),  # the column says so: no detection
}


@pytest.fixture(scope="module")
def routed(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("routing")
    ids = list(CORPUS)
    pq.write_table(pa.table({
        "id": ids, "text": [CORPUS[i][0] for i in ids],
        "score": [CORPUS[i][1] for i in ids] + [],
        "kind": pa.array([CORPUS[i][2] for i in ids], pa.string()),
    }), root / "seeds.parquet")
    folder = load_folder()
    table = load_routing(None, folder)

    def run(name: str):
        out = f"file://{root}/{name}"
        plan = stitch(StitchConfig(
            files=[f"file://{root}/seeds.parquet"], run=RunLayout(out),
            templates=load_templates(table.template_ids()), model_dir=str(default_model_dir()),
            shard_tokens=4096, styles_per_doc=2, max_new_tokens=AUTO, max_model_len=1024,
            quality_column="score", domain_column="kind", routing=table, partitions=2),
            spark)
        rows = [r for s in plan["shards"] for r in storage.read_table(s["url"]).to_pylist()]
        return out, plan, rows

    out, plan, rows = run("run")
    _, _, again = run("rerun")
    for shard in plan["shards"]:  # the echo engine, the real worker, gate and join
        rephrase_shard(shard["url"], out, lambda: EchoEngine(), WorkerOptions(model="echo"))
        validate_shard(shard["url"], out, 0.5)
    joined = join_run(out)
    report, _ = collect(out, 2.0)
    return {"out": out, "plan": plan, "rows": rows, "again": again, "table": table,
            "root": root, "joined": joined, "report": report}


def _bucket(quality: float) -> str:
    return "low" if quality < 0.35 else "medium" if quality < 0.7 else "high"


def test_each_document_gets_templates_its_route_names(routed):
    table = routed["table"]
    by_doc: dict[str, set[str]] = {}
    for row in routed["rows"]:
        by_doc.setdefault(row["doc_id"], set()).add(row["template_id"])
        assert row["domain"] == CORPUS[row["doc_id"]][3], row["doc_id"]
    assert set(by_doc) == set(CORPUS)
    for doc, got in by_doc.items():
        _, quality, _, domain = CORPUS[doc]
        route = table.route(domain, _bucket(quality))
        assert got <= set(route), (doc, got, route)
        assert len(got) == min(2, len(route)), (doc, got, route)
    assert by_doc["prose-low"] == {"encyclopedic"}  # Nemotron-CC: low web -> paraphrase
    assert by_doc["python"] == by_doc["javascript"] == {"code_tutorial", "code_commented"}
    assert by_doc["told-math"] == {"math_solution", "math_textbook"}
    assert routed["plan"]["prompt_rows"] == len(routed["rows"]) == 15


def test_the_pick_is_stable_and_the_table_is_in_shards_json(routed):
    pick = sorted((r["doc_id"], r["template_id"]) for r in routed["rows"])
    assert pick == sorted((r["doc_id"], r["template_id"]) for r in routed["again"])
    entry = routed["plan"]["routing"]
    assert entry["hash"] == routed["table"].hash and entry["url"].endswith("routing.json")
    assert entry["table"] == routed["table"].document()
    used = {t["id"] for t in routed["plan"]["templates"]}
    assert used == set(routed["table"].template_ids())


def test_the_yield_by_domain_adds_up(routed):
    joined, report = routed["joined"], routed["report"]
    by_domain = joined["by_domain"]
    assert set(by_domain) == {"web", "code", "math"}
    rows = [r for p in joined["parts"] for r in storage.read_table(
        storage.join(routed["out"], paths.JOINED, p["name"])).to_pylist()]
    assert {r["domain"] for r in rows} == set(by_domain)
    for key, total in (("rows", "joined"), ("usable", "usable"),
                       ("source_tokens", "source_tokens"),
                       ("usable_output_tokens", "usable_output_tokens")):
        assert sum(d[key] for d in by_domain.values()) == joined[total], key
        assert sum(t[key] for t in joined["by_template"].values()) == joined[total], key
    assert by_domain["code"]["rows"] == 4 and by_domain["math"]["rows"] == 4
    assert by_domain["web"]["rows"] == 7
    reported = report["quality"]["by_domain"]
    assert {d: (f["joined"], f["usable"], f["usable_tokens"]) for d, f in reported.items()} == {
        d: (g["rows"], g["usable"], g["usable_output_tokens"]) for d, g in by_domain.items()}
    assert sum(f["usable_tokens"] for f in reported.values()) == \
        report["token_yield"]["usable_tokens"]
    line = next(x for x in yield_lines(report) if x.startswith("by domain"))
    for domain in by_domain:
        assert f"{domain} " in line
    print("\n".join(yield_lines(report)))
    print({d: {k: f[k] for k in ("joined", "usable", "source_tokens", "usable_tokens",
                                  "token_yield")} for d, f in reported.items()})
