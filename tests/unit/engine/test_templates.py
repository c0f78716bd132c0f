from __future__ import annotations

import json

import pytest

from synthfactory.errors import PermanentError, SynthfactoryError
from synthfactory.stitch.templates import (
    available,
    load_template,
    load_templates,
    load_used,
    parse_template,
    write_copies,
)

GOOD = {"id": "x", "version": 1, "style": "x", "system": "s", "user": "Rewrite: {document}"}


def test_six_styles_ship_and_all_load():
    names = available()
    assert {"encyclopedic", "easy", "qa", "tutorial", "summary", "faq"} <= set(names)
    for template in load_templates(names):
        assert template.version >= 1
        assert template.render_user("Some {braced} text.").count("Some {braced} text.") == 1


@pytest.mark.parametrize("change, message", [
    ({"user": "Rewrite {doc}"}, r"unknown placeholder\(s\) \['doc'\]"),
    ({"system": "Hi {name}"}, r"unknown placeholder\(s\) \['name'\] in 'system'"),
    ({"user": "no placeholder"}, r"'user' must contain \{document\}"),
    ({"version": "1"}, r"field 'version' must be int"),
    ({"user": "Broken {document"}, r"malformed braces"),
])
def test_invalid_templates_are_refused_with_the_reason(change, message):
    with pytest.raises(SynthfactoryError, match=message):
        parse_template({**GOOD, **change}, "t.json")


def test_missing_field_is_named():
    data = dict(GOOD)
    del data["style"]
    with pytest.raises(SynthfactoryError, match=r"t.json: missing field 'style'"):
        parse_template(data, "t.json")


def test_unknown_template_lists_the_available_ones(tmp_path):
    (tmp_path / "a.json").write_text(json.dumps({**GOOD, "id": "a"}))
    with pytest.raises(SynthfactoryError, match=r"'b': not found .* \['a'\]"):
        load_template("b", tmp_path)


def test_duplicate_names_are_refused():
    with pytest.raises(SynthfactoryError, match="duplicate"):
        load_templates(["qa", "qa"])


# -- a folder of one's own (--templates-url): each problem one line naming the file ------

def _folder(tmp_path, **files) -> str:
    """{name: template dict} as name.json files; returns the folder's file:// URL."""
    for name, data in files.items():
        (tmp_path / f"{name}.json").write_text(json.dumps(data, indent=1))
    return f"file://{tmp_path}"


def _own(id_: str, **change) -> dict:
    return {**GOOD, "id": id_, "style": id_, **change}


def test_a_folder_of_ones_own_loads_by_id(tmp_path):
    url = _folder(tmp_path, terse=_own("terse", quality={"max_ratio": 0.5}), chatty=_own("chatty"))
    (tmp_path / "notes.txt").write_text("not a template")
    (tmp_path / "old").mkdir()  # a subfolder's files are not the folder's templates
    (tmp_path / "old" / "terse.json").write_text("{broken")
    (terse,) = load_templates(["terse"], url)
    assert (terse.id, terse.quality) == ("terse", {"max_ratio": 0.5})
    assert available(url) == ["chatty", "terse"]


@pytest.mark.parametrize(("data", "message"), [
    (_own("bad", user="Rewrite this."), r"bad\.json: 'user' must contain \{document\}"),
    (_own("bad", temprature=0.2), r"bad\.json: unknown key\(s\) \['temprature'\]"),
    (_own("bad", quality={"min_ratio": 3, "max_ratio": 2}),
     r"bad\.json: quality bounds need 0 <= min_ratio < max_ratio \(got 3 and 2\)"),
    (_own("bad", quality={"max_ratoi": 2}), r"bad\.json: unknown quality key\(s\) \['max_ratoi'\]"),
    (_own("bad", quality={"max_copy": "high"}), r"bad\.json: quality max_copy must be a number"),
    (_own("Bad"), r"bad\.json: id 'Bad' does not match the file name 'bad\.json'"),
], ids=["no-document", "unknown-key", "bad-bounds", "unknown-bound", "bound-not-a-number",
        "id-not-file-name"])
def test_a_bad_file_fails_the_whole_folder_naming_the_file(tmp_path, data, message):
    """Any bad file fails the load, also when another template was asked for: the folder
    is checked whole, before any Spark or GPU work."""
    url = _folder(tmp_path, good=_own("good"), bad=data)
    with pytest.raises(PermanentError, match=message) as refused:
        load_templates(["good"], url)
    assert str(refused.value).startswith(f"template {url}/bad.json: ")
    assert "\n" not in str(refused.value)


def test_two_files_with_one_id_are_refused_naming_both(tmp_path):
    url = _folder(tmp_path, **{"qa": _own("qa"), "qa-v2": _own("qa", version=2)})
    with pytest.raises(PermanentError, match=(rf"template {url}/qa-v2\.json: duplicate id 'qa' "
                                              rf"\(also in {url}/qa\.json\)")):
        load_templates(["qa"], url)


def test_an_id_not_in_the_folder_lists_what_is_there(tmp_path):
    url = _folder(tmp_path, terse=_own("terse"))
    with pytest.raises(PermanentError,
                       match=rf"template 'qa': not found in {url} \(available: \['terse'\]\)"):
        load_templates(["qa"], url)
    with pytest.raises(PermanentError, match=rf"{tmp_path}/nothing: no template \*\.json"):
        load_templates(["qa"], f"file://{tmp_path}/nothing")


def test_the_hash_is_of_the_content_not_the_formatting(tmp_path):
    data = _own("terse", quality={"max_ratio": 0.5})
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "terse.json").write_text(json.dumps(data))
    (tmp_path / "b" / "terse.json").write_text(json.dumps(dict(reversed(data.items())), indent=4))
    first, second = load_template("terse", tmp_path / "a"), load_template("terse", tmp_path / "b")
    assert first.hash == second.hash and first.hash.startswith("sha256:")
    changed = parse_template({**data, "system": "Be brief."}, "t.json")
    assert changed.hash != first.hash  # one word of the text: another template


def test_the_runs_copy_hashes_as_the_original_and_is_found_first(tmp_path):
    (tmp_path / "own").mkdir()
    own = load_templates(["qa"], _folder(tmp_path / "own", qa=_own("qa", system="Mine.")))[0]
    run_copies = f"file://{tmp_path}/run/prompts/templates"
    write_copies([own], run_copies)
    found = load_used("qa", run_copies)
    assert (found.system, found.hash) == ("Mine.", own.hash)
    assert load_used("summary", run_copies) == load_template("summary")  # no copy: shipped


def test_shipped_templates_keep_their_hash_across_loads():
    assert [t.hash for t in load_templates(["qa", "faq"])] == [
        load_template("qa").hash, load_template("faq").hash]


def test_a_folder_on_s3_loads_and_is_checked_the_same(monkeypatch):
    from tests.support.moto import moto_s3

    with moto_s3(monkeypatch) as s3:
        s3.create_bucket("prompts-lab")
        s3.seed("prompts-lab", ["team/v3/terse.json"], json.dumps(_own("terse")).encode())
        (terse,) = load_templates(["terse"], "s3://prompts-lab/team/v3/")
        assert terse.id == "terse"
        s3.seed("prompts-lab", ["team/v3/wordy.json"], json.dumps(_own("wordy", user="x")).encode())
        with pytest.raises(PermanentError, match=r"template s3://prompts-lab/team/v3/wordy\.json: "
                                                 r"'user' must contain \{document\}"):
            load_templates(["terse"], "s3://prompts-lab/team/v3")


def test_stitch_refuses_a_bad_folder_in_one_line_before_spark(tmp_path):
    import subprocess
    import sys

    (tmp_path / "own").mkdir()
    url = _folder(tmp_path / "own", terse=_own("terse", user="Make it short."))
    proc = subprocess.run(
        [sys.executable, "-m", "synthfactory.cli", "stitch", "--manifest",
         f"file://{tmp_path}/no-manifest", "--run", f"file://{tmp_path}/run",
         "--templates", "terse", "--templates-url", url, "--shard-tokens", "4096"],
        capture_output=True, text=True, timeout=120)
    assert proc.returncode == 3  # PermanentError: Airflow does not retry it
    assert proc.stderr.strip().splitlines()[-1] == (
        f"synthfactory stitch: error: template {url}/terse.json: 'user' must contain {{document}}")
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "run").exists()  # refused before the manifest, Spark or a write
