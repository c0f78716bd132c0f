"""The run folder's format: folders of the older formats read, through the one reader
(``RunFolder`` and contract/run_format.py's upgrade), in the current shape; and no second
reader of the format anywhere in the engine or the Airflow layer (docs/adr/0146)."""

from __future__ import annotations

import re

import pytest

from synthfactory.contract import RUN_FORMAT, RunFolder, paths
from synthfactory.contract import run_format as fmt
from synthfactory.report_figures import build_report, shard_figures
from tests.support.paths import ROOT

PLAN = {"shards": [{"name": "shard-00000", "url": "mem://p0", "rows": 3, "tokens": 9},
                   {"name": "shard-00001", "url": "mem://p1", "rows": 2, "tokens": 6}],
        "templates": [{"id": "qa", "version": 1, "style": "qa"}], "rows_in": 5,
        "prompt_rows": 5, "quarantined": 0, "styles_per_doc": 1, "shard_tokens": 8192,
        "quarantine_reasons": {}, "seed_tokens": 100}
COMMIT = {"rows_in": 3, "rows_generated": 3, "rows_quarantined": 0, "output_tokens": 30,
          "parts": [], "device_seconds": 2.0}
ATTEMPTS = {"made": 3, "chosen_at": {"1": 3}, "max_attempts": 2}
QUALITY = {"usable": 2, "rejected": 1, "reasons": {"empty": 1}, "usable_output_tokens": 20,
           "by_template": {"qa": {"generated": 3, "usable": 2}}}
VALIDATION = {"shard": "", "rows": 3, "rows_in": 3, "rows_quarantined": 0,
              "flags": {"empty": 1, "truncated": 1, "repetition": 0, "refusal": 0},
              "rows_flagged": 1}
JOINED = {"generated": 6, "joined": 6, "usable": 4, "usable_output_tokens": 40,
          "source_tokens": 100,
          "by_template": {"qa": {"rows": 6, "usable": 4, "source_tokens": 100,
                                 "usable_output_tokens": 40}}}
DOMAINS = {"web": {"rows": 6, "usable": 4, "source_tokens": 100, "usable_output_tokens": 40}}
JOIN_ATTEMPTS = {"usable_at_attempt": {"1": 4}, "chunked_usable": 0, "chunked_saved": 0,
                 "trimmed": 0}


def _folder(plan=None, commit=None, validation=None, joined=None) -> RunFolder:
    """A two-shard run folder in memory, every shard's file alike."""
    files = {paths.SHARDS_JSON: {**PLAN, **(plan or {})}}
    for entry in PLAN["shards"]:
        name = entry["name"]
        files[paths.commit(name)] = commit
        files[paths.validation(name)] = validation and {**validation, "shard": name}
    files[paths.JOINED_SUMMARY] = joined
    return RunFolder("mem://run", lambda url: files.get(url.removeprefix("mem://run/")))


# The older formats as the existing tests build them: validation files with their
# quality key dropped (test_run_report_quality's "validated before the gate"), a run with
# no joined/ (test_contract_module's run before join_chunks), and the keys each later
# ADR added left out.
BEFORE_THE_GATE = _folder(commit=COMMIT, validation=VALIDATION)
BEFORE_THE_JOIN = _folder(commit={**COMMIT, "attempts": ATTEMPTS},
                          validation={**VALIDATION, "quality": QUALITY})
BEFORE_DOMAINS = _folder(commit={**COMMIT, "attempts": ATTEMPTS},
                         validation={**VALIDATION, "quality": QUALITY}, joined=JOINED)
GROUNDING = {"bands": {"0.0-0.5": 0, "0.5-0.7": 1, "0.7-0.9": 1, "0.9-1.0": 2},
             "by_template": {"qa": {"0.0-0.5": 0, "0.5-0.7": 1, "0.7-0.9": 1, "0.9-1.0": 2}},
             "by_domain": {"web": {"0.0-0.5": 0, "0.5-0.7": 1, "0.7-0.9": 1, "0.9-1.0": 2}},
             "by_ending": {"stopped": {"rows": 4, "output_source_ratio": 1.1,
                                       "content_kept": 0.5, "grounded": 0.9},
                           "trimmed": {"rows": 0, "output_source_ratio": None,
                                       "content_kept": None, "grounded": None}}}
BEFORE_GROUNDING = _folder(commit={**COMMIT, "attempts": ATTEMPTS},
                           validation={**VALIDATION, "quality": {**QUALITY,
                                                                 "contaminated_by": {}}},
                           joined={**JOINED, **JOIN_ATTEMPTS, "by_domain": DOMAINS})
REPLAY = {"rows": 2, "attempts": 3, "tokens": 40, "keys": True, "lookup": True,
          "keys_looked_up": 9, "lookup_s": 0.01, "basis": {}}
BEFORE_REPLAY = _folder(commit={**COMMIT, "attempts": ATTEMPTS},
                        validation={**VALIDATION, "quality": {**QUALITY, "contaminated_by": {}}},
                        joined={**JOINED, **JOIN_ATTEMPTS, "by_domain": DOMAINS,
                                "grounding": GROUNDING})
CURRENT = _folder(plan={"run_format": RUN_FORMAT},
                  commit={**COMMIT, "attempts": ATTEMPTS, "replay": REPLAY},
                  validation={**VALIDATION, "quality": {**QUALITY, "contaminated_by": {}}},
                  joined={**JOINED, **JOIN_ATTEMPTS, "by_domain": DOMAINS,
                          "grounding": GROUNDING})


def test_a_folder_from_before_the_gate_reads_in_the_current_shape():
    files = BEFORE_THE_GATE.read()
    assert files.format == fmt.BEFORE_THE_GATE
    for shard in files.shards:
        assert shard.validation["quality"] is None  # no verdicts, not a missing key
        assert shard.validation["flags"] == VALIDATION["flags"]  # kept as written
        assert shard.commit["attempts"] is None  # one attempt a row
    assert files.outdated == tuple(
        f"validation/{n}.json: no quality verdicts (validated before the quality gate; "
        "rerun shard.validate)" for n in ("shard-00000", "shard-00001"))
    report = build_report("mem://run", files, [shard_figures(s) for s in files.shards])
    assert report["quality"] is None and list(files.outdated) == report["missing"][-2:]
    assert report["attempts"]["made"] == 6 and report["attempts"]["chosen_at"] == {"1": 6}


def test_a_folder_from_before_the_join_reads_in_the_current_shape():
    files = BEFORE_THE_JOIN.read()
    assert files.format == fmt.BEFORE_THE_JOIN and files.outdated == ()
    assert files.joined is None
    for shard in files.shards:
        assert shard.validation["quality"]["contaminated_by"] == {}  # before decontamination
    report = build_report("mem://run", files, [shard_figures(s) for s in files.shards])
    assert report["quality"]["by_domain"] == {}
    assert report["quality"]["by_template"]["qa"]["joined"] is None
    assert report["token_yield"]["usable_tokens"] is None
    assert report["attempts"]["trimmed"] is None and report["attempts"]["usable_share_after"] == {}


def test_a_join_from_before_domains_and_attempts_reads_in_the_current_shape():
    files = BEFORE_DOMAINS.read()
    assert files.format == fmt.BEFORE_DOMAINS
    assert files.joined["by_domain"] == {} and files.joined["usable_at_attempt"] == {}
    assert files.joined["chunked_saved"] is None and files.joined["joined"] == 6


def test_a_current_folder_reads_unchanged():
    files = CURRENT.read()
    assert files.format == RUN_FORMAT and files.outdated == ()
    assert files.joined == {**JOINED, **JOIN_ATTEMPTS, "by_domain": DOMAINS,
                            "grounding": GROUNDING}
    report = build_report("mem://run", files, [shard_figures(s) for s in files.shards])
    assert report["quality"]["grounding"] == GROUNDING
    assert fmt.upgrade(files) == files  # upgrading twice changes nothing
    assert CURRENT.shard(PLAN["shards"][0]) == files.shards[0]


def test_a_join_from_before_grounding_reads_with_no_grounding():
    files = BEFORE_GROUNDING.read()
    assert files.format == fmt.BEFORE_GROUNDING and files.outdated == ()
    assert files.joined["grounding"] is None and files.joined["by_domain"] == DOMAINS
    report = build_report("mem://run", files, [shard_figures(s) for s in files.shards])
    assert report["quality"]["grounding"] is None


def test_commits_from_before_replay_read_with_nothing_replayed():
    files = BEFORE_REPLAY.read()
    assert files.format == fmt.BEFORE_REPLAY and files.outdated == ()
    assert all(s.commit["replay"] is None for s in files.shards)
    report = build_report("mem://run", files, [shard_figures(s) for s in files.shards])
    assert report["replay"]["rows"] == 0 and report["replay"]["generated_tokens"] == 60
    current = build_report("mem://run", CURRENT.read(),
                           [shard_figures(s) for s in CURRENT.read().shards])
    assert current["replay"]["rows"] == 4 and current["replay"]["tokens"] == 80


def test_an_old_lineage_row_registered_every_generated_row():
    assert fmt.registered_rows({"rows_generated": 9, "rows_registered": None}) == 9
    assert fmt.registered_rows({"rows_generated": 9, "rows_registered": 7}) == 7


# What reading a format looks like: asking whether a file has a key an older engine did
# not write. Only contract/run_format.py may (the readers read the upgraded shape).
FORMAT_KEYS = ("quality", "by_domain", "usable_at_attempt", "chunked_usable",
               "chunked_saved", "trimmed", "contaminated_by", "attempts", "rows_registered",
               "grounding",
               "run_format")
FORMAT_READ = re.compile(r"""["'](%s)["']\s+(not\s+)?in\s""" % "|".join(FORMAT_KEYS)  # noqa: UP031
                         + r"""|\.get\(\s*["'](rows_registered|run_format)["']""")
THE_ONE_PLACE = ROOT / "synthfactory" / "contract" / "run_format.py"


def _format_reads(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if FORMAT_READ.search(line)]


def test_no_second_reader_of_the_format():
    sources = [p for folder in ("synthfactory", "plugins", "operators", "dags")
               for p in sorted((ROOT / folder).rglob("*.py")) if p != THE_ONE_PLACE]
    found = {str(p.relative_to(ROOT)): _format_reads(p.read_text()) for p in sources}
    assert {k: v for k, v in found.items() if v} == {}
    # the upgrade is called by the reader alone
    callers = [str(p.relative_to(ROOT)) for p in sources
               if re.search(r"\bupgrade(_shard)?\(", p.read_text())]
    assert callers == ["synthfactory/contract/run_folder.py"]


@pytest.mark.parametrize("line", [
    'if validation is not None and "quality" not in validation:',
    "    registered = run.get('rows_registered')",
    'domains = joined["by_domain"] if "by_domain" in joined else {}',
])
def test_the_guard_sees_a_format_read(line):
    assert _format_reads(line) == [line.strip()]
