"""The run report views (plugins/run_report) against run folders the engine wrote, read
through file:// and s3:// (moto's server), finished and in progress, with FastAPI's
TestClient. The page's figures must be report.json's."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient
from lxml import html as lxml_html

from synthfactory_airflow.plugins.run_report import run_files
from synthfactory_airflow.plugins.run_report.app import create_app
from tests.support.moto import moto_s3
from tests.support.paths import ROOT, WORKER_PYTHON

RUN_ID = "manual__2026-01-03T00:00:00+00:00"
PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def engine_run(tmp_path_factory) -> Path:
    """A finished run folder plus the report.json the engine wrote for it."""
    if not WORKER_PYTHON.exists():
        pytest.skip("needs .venv-worker (the engine writes the report)")
    root = tmp_path_factory.mktemp("report") / "out"
    done = subprocess.run([str(WORKER_PYTHON), "-m", "tests.support.run_report_fixture",
                           f"file://{root}"], capture_output=True, text=True, check=True, cwd=ROOT)
    return Path(done.stdout.strip().splitlines()[-1][len("file://"):])


@pytest.fixture
def in_progress_run(engine_run, tmp_path) -> Path:
    """The same run before write_report, with shard 1 still rephrasing."""
    run = tmp_path / "out" / "synthetic_rephrase" / "2026-01-05"
    shutil.copytree(engine_run, run)
    shutil.rmtree(run / "report")
    (run / "generated" / "shard-00001" / "_COMMITTED.json").unlink()
    (run / "validation" / "shard-00001.json").unlink()
    return run


def client_for(root: str, resolve=lambda dag_id, run_id: None) -> TestClient:
    return TestClient(create_app(resolve_run=resolve, roots=lambda: [root], authorize=False),
                      root_path="/synthfactory")


def page(response) -> lxml_html.HtmlElement:
    assert response.status_code == 200, response.text
    return lxml_html.fromstring(response.text)


def figure(doc, key: str) -> str:
    (element,) = doc.xpath(f'//*[@data-figure="{key}"]')
    return element.get("data-value")


def _ratio(value: float | None) -> str:
    """A token yield as the page shows it (three decimals; a dash for none)."""
    return "–" if value is None else f"{value:.3f}"


def check_figures(doc, report: dict) -> None:
    assert figure(doc, "documents_in") == str(report["documents_in"])
    assert figure(doc, "prompt_rows") == str(report["prompts"]["rows"])
    assert figure(doc, "shards") == str(report["prompts"]["shards"])
    assert figure(doc, "rows_generated") == str(report["rephrase"]["rows_generated"])
    assert figure(doc, "rephrase_quarantined") == str(report["rephrase"]["rows_quarantined"])
    assert figure(doc, "output_tokens") == str(report["tokens"]["output"])
    assert figure(doc, "device_seconds") == str(report["tokens"]["device_seconds"])
    assert figure(doc, "engine_startup_s") == str(report["tokens"]["startup_s"])
    assert figure(doc, "generating_fraction") == str(report["tokens"]["generating_fraction"])


def test_finished_run_report_page_shows_report_json(engine_run):
    report = json.loads((engine_run / "report" / "report.json").read_text())
    root = f"file://{engine_run.parents[1]}"
    client = client_for(root)
    run_url = f"file://{engine_run}"
    doc = page(client.get(f"/report?run={quote(run_url, safe='')}"))

    main = doc.get_element_by_id("run-report")
    assert main.get("data-complete") == "true" and main.get("data-so-far") == "false"
    check_figures(doc, report)
    cost = report["cost"]["usd_per_1b_output_tokens"]
    assert figure(doc, "usd_per_1b_output_tokens") == str(cost)
    attempts = report["attempts"]  # what a usable token cost (docs/adr/0141)
    assert figure(doc, "attempts_made") == str(attempts["made"]) and attempts["made"] >= 11
    assert figure(doc, "generated_tokens") == str(report["tokens"]["output"])
    assert figure(doc, "generated_per_usable") == str(attempts["generated_per_usable"] or "")
    assert [k for k in attempts["usable_share_after"]] == ["1", "2", "3"][
        :len(attempts["usable_share_after"])]
    for k, v in attempts["usable_share_after"].items():
        assert figure(doc, f"usable_share_after_{k}") == ("" if v is None else str(v))
    assert report["rephrase"]["rows_generated"] == 9  # 6 + 5 prompt rows, 1 quarantined each
    shards = {tr.get("data-shard"): tr for tr in doc.xpath("//tr[@data-shard]")}
    assert sorted(shards) == ["shard-00000", "shard-00001"]
    for shard in report["shards"]:
        assert shards[shard["name"]].get("data-rows-generated") == str(shard["rows_generated"])
    (reason,) = doc.xpath('//*[@data-quarantine="rephrase"]')
    assert (reason.get("data-reason"), reason.get("data-value")) == ("too_long", "2")

    examples = doc.xpath("//article[@data-example]")
    assert [e.get("data-template") for e in examples] == [
        e["template_id"] for e in report["examples"]]
    assert examples[0].xpath(".//*[@data-rephrasing]")[0].text == report["examples"][0][
        "rephrasing"]

    images = doc.xpath("//img[@data-figure-png]")
    assert {i.get("data-figure-png") for i in images} == set(report["figures"])
    for image in images:
        src = image.get("src")
        assert src.startswith("/synthfactory/figure/")
        response = client.get(src[len("/synthfactory"):])
        assert response.status_code == 200 and response.content.startswith(PNG)
        name = image.get("data-figure-png")
        assert response.content == (engine_run / "report" / f"{name}.png").read_bytes()


def test_the_report_shows_the_storage_requests_each_step_retried(engine_run, tmp_path):
    """report.json's ``storage_retries`` (summed by the report from the steps' records,
    tests/integration/engine/test_storage_faults.py) as a list by step and cause; a run
    that retried nothing shows no section. Break: the template's section removed fails."""
    run = tmp_path / "out" / "synthetic_rephrase" / engine_run.name
    shutil.copytree(engine_run, run)
    client = client_for(f"file://{run.parents[1]}")
    url = f"/report?run={quote(f'file://{run}', safe='')}"
    assert page(client.get(url)).xpath('//*[@id="storage-retries"]') == []
    report_json = run / "report" / "report.json"
    report = json.loads(report_json.read_text())
    report["storage_retries"] = {"rephrase": {"throttled": 1234, "connection": 2},
                                 "validate": {"server_error": 1}}
    report_json.write_text(json.dumps(report))
    items = page(client.get(url)).xpath('//*[@id="storage-retries"]/li')
    assert [(li.get("data-step"), li.get("data-cause"), li.get("data-value"))
            for li in items] == [("rephrase", "throttled", "1234"),
                                 ("rephrase", "connection", "2"),
                                 ("validate", "server_error", "1")]
    assert items[0].text_content() == "rephrase: throttled: 1,234"


def test_run_list_links_each_run_to_its_report(engine_run, in_progress_run):
    for run in (engine_run, in_progress_run):  # list one root holding both runs
        target = in_progress_run.parent / run.name
        if not target.exists():
            shutil.copytree(run, target)
    client = client_for(f"file://{in_progress_run.parents[1]}")
    doc = page(client.get("/"))
    rows = doc.xpath("//tr[@data-run]")
    assert [r.get("data-run") for r in rows] == ["2026-01-05", "2026-01-02"]  # newest first
    assert [r.get("data-status") for r in rows] == ["in progress or failed", "complete"]
    for row in rows:
        (link,) = row.xpath(".//a[@data-report-link]")
        assert link.get("href").startswith("/synthfactory/report?run=")
        assert page(client.get(link.get("href")[len("/synthfactory"):])).get_element_by_id(
            "run-report").get("data-run-url") == row.get("data-run-url")


def test_finished_run_report_page_shows_the_quality_section(engine_run):
    report = json.loads((engine_run / "report" / "report.json").read_text())
    quality = report["quality"]
    client = client_for(f"file://{engine_run.parents[1]}")
    doc = page(client.get(f"/report?run={quote(f'file://{engine_run}', safe='')}"))

    assert quality["rejected"] > 0 and quality["examples"]  # the fixture's gate rejects rows
    for key in ("usable", "rejected", "yield", "usable_output_tokens", "usable_tokens_per_s",
                "usable_tokens_per_device_s"):
        assert figure(doc, key) == str(quality[key]), key
    assert figure(doc, "usd_per_1b_usable_tokens") == str(report["cost"][
        "usd_per_1b_usable_tokens"])
    assert figure(doc, "truncated_share") == str(report["rephrase"]["truncated_share"])
    shown = {tr.get("data-template"): (int(tr.get("data-generated")), int(tr.get("data-usable")),
                                       float(tr.get("data-yield")))
             for tr in doc.xpath('//table[@id="yield"]//tr[@data-template]')}
    assert shown == {t: (y["generated"], y["usable"], y["yield"])
                     for t, y in quality["by_template"].items()}
    reasons = {li.get("data-rejection-reason"): int(li.get("data-value"))
               for li in doc.xpath("//li[@data-rejection-reason]")}
    assert reasons == quality["reasons"]
    # the fixture's made-up benchmark quotes one generated row (docs/decontamination.md)
    contaminated = {li.get("data-benchmark"): int(li.get("data-value"))
                    for li in doc.xpath('//ul[@id="contaminated"]/li')}
    assert contaminated == quality["contaminated_by"] == {"planted_quiz": 1}
    # the token yield: seed tokens in, usable tokens out, per template beside the rows
    y = report["token_yield"]
    assert y["seed_tokens"] and y["usable_tokens"] is not None and y["yield"] is not None
    for key in ("seed_tokens", "covered_tokens", "usable_tokens"):
        assert figure(doc, key) == str(y[key]), key
    assert figure(doc, "token_yield") == str(y["yield"])
    (shown_yield,) = doc.xpath('//*[@data-figure="token_yield"]/dd')
    assert shown_yield.text_content() == _ratio(y["yield"])  # what the reader sees too
    token_yields = {tr.get("data-template"): (tr.get("data-token-yield"),
                                              tr.xpath("./td")[-1].text_content())
                    for tr in doc.xpath('//table[@id="yield"]//tr[@data-template]')}
    assert token_yields == {t: ("" if v["token_yield"] is None else str(v["token_yield"]),
                                _ratio(v["token_yield"]))
                            for t, v in quality["by_template"].items()}
    # and per domain (ADR 0139): the join's counts by the documents' domain, its yield
    assert quality["by_domain"]
    by_domain = {tr.get("data-domain"): (int(tr.get("data-joined")), int(tr.get("data-usable")),
                                          int(tr.get("data-usable-tokens")),
                                          tr.get("data-token-yield"),
                                          tr.xpath("./td")[-1].text_content())
                 for tr in doc.xpath('//table[@id="yield-by-domain"]//tr[@data-domain]')}
    assert by_domain == {d: (v["joined"], v["usable"], v["usable_tokens"],
                             "" if v["token_yield"] is None else str(v["token_yield"]),
                             _ratio(v["token_yield"]))
                         for d, v in quality["by_domain"].items()}
    # how grounded the usable rows are (ADR 0148): the join's bands and endings, shown
    grounding = quality["grounding"]
    assert grounding and sum(grounding["bands"].values()) == sum(
        d["usable"] for d in quality["by_domain"].values())
    shown_bands = {td.get("data-band"): int(td.get("data-value"))
                   for td in doc.xpath('//tr[@data-grounding="all"]/td')}
    assert shown_bands == grounding["bands"]
    endings = {tr.get("data-ending"): int(tr.get("data-rows"))
               for tr in doc.xpath('//table[@id="grounding-by-ending"]//tr[@data-ending]')}
    assert endings == {e: f["rows"] for e, f in grounding["by_ending"].items()}
    examples = doc.xpath("//article[@data-rejected-example]")
    assert [e.get("data-rejected-example") for e in examples] == [
        e["reason"] for e in quality["examples"]]
    for article, example in zip(examples, quality["examples"], strict=True):
        assert article.xpath(".//*[@data-source]")[0].text == example["source_excerpt"]
        assert article.xpath(".//*[@data-output]")[0].text == example["output_excerpt"]
    (image,) = doc.xpath('//img[@data-figure-png="rejection_reasons"]')
    assert client.get(image.get("src")[len("/synthfactory"):]).content == (
        engine_run / "report" / "rejection_reasons.png").read_bytes()


def test_the_report_links_the_runs_dataset_card(engine_run, tmp_path):
    client = client_for(f"file://{engine_run.parents[1]}")
    doc = page(client.get(f"/report?run={quote(f'file://{engine_run}', safe='')}"))
    (link,) = doc.xpath('//a[@data-link="card"]')
    card = client.get(link.get("href")[len("/synthfactory"):])
    assert card.status_code == 200 and card.headers["content-type"].startswith("text/markdown")
    assert card.text == (engine_run / "card" / "README.md").read_text()
    assert card.text.startswith("---\n") and "license: cc-by-4.0" in card.text
    # a run without a card: no link
    bare = tmp_path / "out" / "synthetic_rephrase" / "2026-01-09"
    shutil.copytree(engine_run, bare)
    shutil.rmtree(bare / "card")
    client = client_for(f"file://{bare.parents[1]}")
    doc = page(client.get(f"/report?run={quote(f'file://{bare}', safe='')}"))
    assert doc.xpath('//a[@data-link="card"]') == []


def test_in_progress_run_shows_the_quality_counts_so_far(in_progress_run):
    client = client_for(f"file://{in_progress_run.parents[1]}")
    doc = page(client.get(f"/report?run={quote(f'file://{in_progress_run}', safe='')}"))
    shard0 = json.loads((in_progress_run / "validation" / "shard-00000.json").read_text())
    assert figure(doc, "usable") == str(shard0["quality"]["usable"])  # the validated shard's
    assert figure(doc, "rejected") == str(shard0["quality"]["rejected"]) != "0"
    assert doc.xpath("//*[@data-quality-partial]")  # 1 of 2 shards
    assert doc.xpath("//article[@data-rejected-example]") == []  # they need the parquet
    assert doc.xpath('//*[@data-rejected-examples="later"]')


def test_a_report_json_of_an_older_engine_still_shows(engine_run, tmp_path):
    """report.json written before the quality gate: no quality keys at all."""
    run = tmp_path / "out" / "synthetic_rephrase" / "2026-01-02"
    shutil.copytree(engine_run, run)
    path = run / "report" / "report.json"
    report = json.loads(path.read_text())
    for section, key in [("stitch", "documents_below_min_quality"),
                         ("stitch", "documents_without_quality"), ("stitch", "documents_stitched"),
                         ("rephrase", "rows_truncated"), ("rephrase", "truncated_share"),
                         ("cost", "usd_per_1b_usable_tokens")]:
        del report[section][key]
    del report["quality"]
    for shard in report["shards"]:
        del shard["usable"]
    path.write_text(json.dumps(report))
    doc = page(TestClient(create_app(roots=lambda: [f"file://{tmp_path}/out"], authorize=False),
                          root_path="/synthfactory").get(
        f"/report?run={quote(f'file://{run}', safe='')}"))
    check_figures(doc, report)
    assert doc.xpath('//*[@data-quality="none"]')
    assert figure(doc, "truncated_share") == ""


def test_in_progress_run_shows_what_exists_so_far(in_progress_run):
    client = client_for(f"file://{in_progress_run.parents[1]}")
    run_url = f"file://{in_progress_run}"
    doc = page(client.get(f"/report?run={quote(run_url, safe='')}"))
    main = doc.get_element_by_id("run-report")
    assert main.get("data-complete") == "false" and main.get("data-so-far") == "true"
    missing = [li.text for li in doc.xpath("//li[@data-missing]")]
    assert any("report/report.json: not written" in m for m in missing)
    assert any("generated/shard-00001/_COMMITTED.json" in m for m in missing)
    # a running run opens with its progress; the files not written yet are folded after it
    folded = doc.get_element_by_id("missing")
    assert folded.tag == "details" and folded.get("open") is None
    assert "Not written yet" in folded.find("summary").text_content()
    order = [e.get("id") for e in doc.xpath("//*[@id='progress' or @id='missing']")]
    assert order == ["progress", "missing"]
    assert not [h for h in doc.xpath("//h2") if h.text_content().strip() == "Missing"]
    commit0 = json.loads((in_progress_run / "generated/shard-00000/_COMMITTED.json").read_text())
    assert figure(doc, "rows_generated") == str(commit0["rows_generated"])  # committed only
    assert figure(doc, "shards_committed") == "1"
    assert figure(doc, "prompt_rows") == "11"
    assert doc.xpath("//img[@data-figure-png]") == []
    assert client.get(f"/figure/rows_generated?run={quote(run_url, safe='')}").status_code == 404


def test_in_progress_run_shows_its_progress_and_reloads_itself(in_progress_run):
    """Rows and tokens against the plan, the rate and the time left, from the committed
    shard, and a page that refreshes while no report.json exists; the finished run's
    page does not refresh."""
    client = client_for(f"file://{in_progress_run.parents[1]}")
    doc = page(client.get(f"/report?run={quote(f'file://{in_progress_run}', safe='')}"))
    commit0 = json.loads((in_progress_run / "generated/shard-00000/_COMMITTED.json").read_text())
    assert figure(doc, "progress_rows") == str(commit0["rows_in"])
    assert float(figure(doc, "progress_share")) == round(commit0["rows_in"] / 11, 4)
    assert figure(doc, "progress_tokens") == str(commit0["output_tokens"])
    assert float(figure(doc, "progress_eta_s")) > 0  # rows are left
    assert "shard-00000" in doc.xpath("string(//*[@data-slowest])")
    (refresh,) = doc.xpath('//meta[@http-equiv="refresh"]')
    assert int(refresh.get("content")) == 30


def test_a_finished_runs_page_does_not_reload(engine_run):
    client = client_for(f"file://{engine_run.parents[1]}")
    doc = page(client.get(f"/report?run={quote(f'file://{engine_run}', safe='')}"))
    assert doc.xpath('//meta[@http-equiv="refresh"]') == []
    assert figure(doc, "progress_eta_s") == "0.0"


def test_dag_run_view_resolves_the_run_folder(engine_run, in_progress_run):
    folders = {RUN_ID: f"file://{engine_run}", "manual__later": f"file://{in_progress_run}"}
    client = client_for("file:///nowhere", resolve=lambda dag_id, run_id: folders.get(run_id))
    doc = page(client.get(f"/dags/synthetic_rephrase/runs/{quote(RUN_ID, safe='')}"))
    assert doc.get_element_by_id("run-report").get("data-complete") == "true"
    assert doc.xpath("//*[@data-note]") == []
    src = doc.xpath('//img[@data-figure-png="rows_generated"]')[0].get("src")
    assert src == f"/synthfactory/dags/synthetic_rephrase/runs/{quote(RUN_ID, safe='')}" \
                  "/figure/rows_generated"
    assert client.get(src[len("/synthfactory"):]).content.startswith(PNG)
    assert client.get("/dags/synthetic_rephrase/runs/manual__later").status_code == 200
    missing = client.get("/dags/synthetic_rephrase/runs/nope")
    assert missing.status_code == 404 and "no such DAG run" in missing.text
    assert client.get("/dags/engine_sweep/runs/x").status_code == 404


def test_refuses_urls_outside_the_output_roots(engine_run):
    client = client_for(f"file://{engine_run.parents[1]}")
    assert client.get("/report?run=" + quote("file:///etc", safe="")).status_code == 403
    assert client.get("/report?run=" + quote(f"file://{engine_run}/../../..", safe="")
                      ).status_code == 400
    assert client.get("/report?run=http%3A%2F%2Fexample.com").status_code == 400
    bad = client.get(f"/figure/secrets?run={quote(f'file://{engine_run}', safe='')}")
    assert bad.status_code == 404


def test_views_need_an_airflow_login(engine_run):
    app = create_app(roots=lambda: [f"file://{engine_run.parents[1]}"])
    response = TestClient(app).get("/")
    assert response.status_code == 401


@pytest.fixture(scope="module")
def s3_run(engine_run):
    """The finished run uploaded to a moto S3 server, minus its report.json (in progress)."""
    with moto_s3():
        s3 = run_files._s3()
        s3.create_bucket(Bucket="runs")
        prefix = "data/synthetic_rephrase/2026-01-02"
        for path in engine_run.rglob("*"):
            if path.is_file():
                s3.put_object(Bucket="runs", Body=path.read_bytes(),
                              Key=f"{prefix}/{path.relative_to(engine_run)}")
        s3.delete_object(Bucket="runs", Key=f"{prefix}/report/report.json")
        yield f"s3://runs/{prefix}", engine_run


def test_s3_run_folder(s3_run):
    run_url, local = s3_run
    client = client_for("s3://runs/data")
    doc = page(client.get("/"))
    (row,) = doc.xpath("//tr[@data-run]")
    assert (row.get("data-run-url"), row.get("data-status")) == (run_url, "in progress or failed")
    doc = page(client.get(f"/report?run={quote(run_url, safe='')}"))
    assert doc.get_element_by_id("run-report").get("data-so-far") == "true"
    report = json.loads((local / "report" / "report.json").read_text())
    assert figure(doc, "rows_generated") == str(report["rephrase"]["rows_generated"])
    assert figure(doc, "output_tokens") == str(report["tokens"]["output"])
    png = client.get(f"/figure/output_lengths?run={quote(run_url, safe='')}")
    assert png.content == (local / "report" / "output_lengths.png").read_bytes()

    run_files._s3().put_object(Bucket="runs", Key=run_url[len("s3://runs/"):] +
                               "/report/report.json", Body=json.dumps(report).encode())
    doc = page(client.get(f"/report?run={quote(run_url, safe='')}"))
    check_figures(doc, report)
    assert page(client.get("/report?run=s3%3A%2F%2Fruns%2Fdata%2Fsynthetic_rephrase%2Fnone")
                ).get_element_by_id("run-report").get("data-so-far") == "true"


def test_plugin_module_is_cheap_to_import():
    """Every Airflow component imports plugins/: the app, Jinja and boto3 wait for a request."""
    code = ("import json, sys, time\nimport airflow.plugins_manager\nbefore = set(sys.modules)\n"
            "t = time.perf_counter()\nimport synthfactory_airflow.plugins.run_report.plugin\n"
            "print(json.dumps({'s': time.perf_counter() - t, 'new': sorted(set(sys.modules) - "
            "before)}))")
    out = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True,
                                    text=True, check=True, cwd=ROOT).stdout.splitlines()[-1])
    heavy = {"synthfactory_airflow.plugins.run_report.app", "boto3", "jinja2", "fastapi"}
    assert not heavy & set(out["new"])
    assert out["s"] < 0.2
