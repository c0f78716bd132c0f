"""Routing on a mixed corpus (issue 33, ADR 0139), real Spark stitch in local mode:
prose in three quality buckets, Python and JavaScript, math with numbers and LaTeX, a
German document, one domain given by a column; each document gets templates its
route names only (styles_per_doc of them, or all its route has), the pick stable on a
rerun; then rephrased by an engine that answers as each template asks, validated and
joined: the yield per domain in _JOINED.json and the report adds up to the whole. The
same corpus through the command, `synthfactory stitch --routing on` (argv to
shards.json, in this process on the module's Spark session), and a routing.json naming
an unknown template, which fails the command in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from synthfactory import cli, contract, storage
from synthfactory.contract import paths
from synthfactory.contract.flag_types import AUTO
from synthfactory.demo_summary import yield_lines
from synthfactory.join import join_run
from synthfactory.layout import RunLayout
from synthfactory.model import default_model_dir, is_ready
from synthfactory.rephrase.engines import Completion, EchoEngine
from synthfactory.rephrase.worker import WorkerOptions, rephrase_shard
from synthfactory.report.collect import collect
from synthfactory.stitch import command as stitch_command
from synthfactory.stitch.job import StitchConfig, stitch
from synthfactory.stitch.routing import load_routing
from synthfactory.stitch.spark_session import spark_session
from synthfactory.stitch.templates import load_folder, load_templates
from synthfactory.validate import validate_shard
from tests.support.contract_shapes import check

TEMPLATES = load_folder()
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


# What a model might answer, per template kind and language: clean outputs the gate lets
# through (the same text for two documents of a kind is a duplicate, as it would be).
WEB_EN = ("The settlement developed around a busy seafood market. Fishing vessels returned "
          "at first light, and merchants had finished trading their haul by midday. "
          "Visitors still find the stalls open early each morning, where families have "
          "bought fresh fish for generations and the harbour remains the centre of local life.")
WEB_DE = ("Der Ort entstand rund um einen belebten Markt für Fisch. Die Fischer kehrten bei "
          "Sonnenaufgang zurück, und bis zum Mittag hatten die Kaufleute ihre Ware verkauft. "
          "Noch heute öffnen die Stände früh am Morgen, und der Hafen bleibt das Herz des Ortes.")
QA_EN = ("Question: What did the settlement grow around?\nAnswer: A busy seafood market by "
         "the harbour, which shaped the whole town.\nQuestion: When did the fishing vessels "
         "return?\nAnswer: At first light, and the merchants finished trading by midday.")
QA_DE = ("Question: Worum herum entstand der Ort?\nAnswer: Um einen belebten Fischmarkt am "
         "Hafen, der die ganze Stadt prägte.\nQuestion: Wann kehrten die Fischer zurück?\n"
         "Answer: Bei Sonnenaufgang, und bis zum Mittag war alles verkauft.")
LIST_EN = ("- The settlement grew around a busy seafood market.\n- Fishing vessels returned "
           "at first light each day.\n- Merchants finished trading their haul by midday.\n"
           "- The stalls still open early in the morning.")
LIST_DE = ("- Der Ort entstand um einen belebten Fischmarkt.\n- Die Fischer kehrten bei "
           "Sonnenaufgang zurück.\n- Bis zum Mittag war die Ware verkauft.\n- Die Stände "
           "öffnen noch heute früh am Morgen.")
PY = ("```python\ndef total(values):\n    result = 0\n    for v in values:\n"
      "        result += v\n    return result\n```")
JS = ("```javascript\nfunction mean(xs) {\n  let s = 0;\n  for (const x of xs) {\n"
      "    s += x;\n  }\n  return s / xs.length;\n}\n```")
MATH = ("Consider a circle whose radius is $r = 3$. Its enclosed region is given by "
        "$A = \\pi r^2$, roughly 28.27 square units, while the boundary length follows "
        "$C = 2\\pi r$, roughly 18.85 units. Dividing one by the other, \\frac{A}{C} = 1.5, "
        "which equals half the radius, as expected for every circle.")


def _answer(document: str, template: str) -> str:
    german = "Fischmarkt" in document
    if template.startswith("code_"):
        code = PY if "def total" in document else JS
        return ("This walkthrough explains the routine one line at a time, so a newcomer "
                f"sees why it works.\n\n{code}\n\nEach step keeps a running value and "
                "hands back the result at the end.")
    if template.startswith("math_"):
        return MATH
    if template == "qa":
        return QA_DE if german else QA_EN
    if template == "knowledge_list":
        return LIST_DE if german else LIST_EN
    return WEB_DE if german else WEB_EN


class RoutedEngine(EchoEngine):
    """Answers each prompt as its template asks (``_answer``), found by the prompt."""

    def poll(self) -> list[Completion]:
        batch = [self._queue.popleft() for _ in range(min(self.per_poll, len(self._queue)))]
        out = []
        for row, user, _ in batch:
            document, template = next(
                (text, t.id) for text, *_ in CORPUS.values() for t in TEMPLATES.values()
                if user == t.render_user(text))
            answer = _answer(document, template)
            out.append(Completion(row, answer, len(user.split()), len(answer.split()), "stop"))
        return out


def _write_seeds(root: Path) -> Path:
    """CORPUS as one seed file: id, text, score (quality) and kind (the domain column)."""
    ids = list(CORPUS)
    pq.write_table(pa.table({
        "id": ids, "text": [CORPUS[i][0] for i in ids],
        "score": [CORPUS[i][1] for i in ids] + [],
        "kind": pa.array([CORPUS[i][2] for i in ids], pa.string()),
    }), root / "seeds.parquet")
    return root / "seeds.parquet"


@pytest.fixture(scope="module")
def routed(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("routing")
    _write_seeds(root)
    table = load_routing(None, TEMPLATES)

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
        rephrase_shard(shard["url"], out, lambda: RoutedEngine(), WorkerOptions(model="echo"))
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
    assert check(routed["plan"], contract.ShardsJson, "shards.json")[0] == []
    assert check(routed["joined"], contract.JoinedJson, "_JOINED.json")[0] == []
    assert check(routed["report"], contract.ReportJson, "report.json")[0] == []
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
    assert all(d["usable"] for d in by_domain.values())  # some rows of each domain pass
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


@pytest.fixture(scope="module")
def manifest(tmp_path_factory) -> str:
    """A crawl manifest of the mixed corpus, for `synthfactory stitch` (the command)."""
    root = tmp_path_factory.mktemp("routing-cli")
    seeds = _write_seeds(root)
    (root / "manifest").mkdir()
    pq.write_table(pa.table({"key": [f"file://{seeds}"]}),
                   root / "manifest" / "part-00000.parquet")
    return f"file://{root}/manifest"


def _stitch_cli(manifest: str, run: str, *flags: str) -> int:
    return cli.main(["stitch", "--manifest", manifest, "--run", run, "--routing", "on",
                     "--domain-column", "kind", "--quality-column", "score",
                     "--styles-per-doc", "2", "--shard-tokens", "4096", "--max-model-len",
                     "1024", "--max-new-tokens", "auto", "--master", "local[2]",
                     "--partitions", "2", *flags])


def test_the_stitch_command_routes_each_document_and_records_the_table(
        spark, manifest, tmp_path, monkeypatch, capsys):
    """`synthfactory stitch --routing on` end to end (argv, the shipped routing table,
    real Spark): every prompt row's template is one its document's route allows, and
    shards.json records the table that routed it, by its hash."""
    sessions = []

    def shared_session(*args, **kwargs):  # getOrCreate: the module's session, kept open
        session = spark_session(*args, **kwargs)
        sessions.append(session)
        return session

    monkeypatch.setattr(stitch_command, "spark_session", shared_session)
    monkeypatch.setattr(spark, "stop", lambda: None)
    run = f"file://{tmp_path}/run"
    assert _stitch_cli(manifest, run) == 0, capsys.readouterr().err[-3000:]
    assert len(sessions) == 1 and sessions[0] is spark  # no second Spark
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    plan = storage.read_json(storage.join(run, paths.SHARDS_JSON))
    assert check(plan, contract.ShardsJson, "shards.json")[0] == []
    table = load_routing(None, TEMPLATES)
    assert plan["routing"]["hash"] == table.hash
    assert plan["routing"]["url"].endswith("synthfactory/templates/routing.json")
    assert plan["routing"]["table"] == table.document()
    rows = [r for s in plan["shards"] for r in storage.read_table(s["url"]).to_pylist()]
    assert len(rows) == plan["prompt_rows"] == summary["prompt_rows"] == 15
    assert {r["doc_id"] for r in rows} == set(CORPUS)
    for row in rows:
        _, quality, _, domain = CORPUS[row["doc_id"]]
        assert row["domain"] == domain, row["doc_id"]
        assert row["template_id"] in table.route(domain, _bucket(quality)), (
            row["doc_id"], row["template_id"])
    assert {t["id"] for t in plan["templates"]} == set(table.template_ids())


def test_a_routing_table_naming_an_unknown_template_fails_the_command_in_one_line(
        manifest, tmp_path, capsys):
    """A routing.json in --templates-url naming a template the folder lacks: exit 3 (a
    retry reads the same folder) and one line naming the file, the route and the name,
    before Spark starts or the run folder is written."""
    folder = tmp_path / "templates"
    folder.mkdir()
    (folder / "plain.json").write_text(json.dumps(  # no domain: any document's
        {"id": "plain", "version": 1, "style": "plain", "system": "s",
         "user": "Rewrite: {document}"}))
    (folder / "routing.json").write_text(json.dumps(
        {"buckets": {"names": ["all"], "edges": [], "unscored": "all"},
         "routes": {"web": {"*": ["plain"]}, "code": {"*": ["plain"]},
                    "math": {"*": ["proof_sketch"]}}}))
    run = tmp_path / "run"
    assert _stitch_cli(manifest, f"file://{run}", "--templates-url", f"file://{folder}") == 3
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("synthfactory stitch: error: ")
    assert f"{folder}/routing.json" in line and "routes.math.*" in line
    assert "unknown template 'proof_sketch'" in line
    assert not run.exists()
