from __future__ import annotations

import json

import pytest

from synthfactory.errors import SynthfactoryError
from synthfactory.stitch.templates import available, load_template, load_templates, parse_template

GOOD = {"id": "x", "version": 1, "style": "x", "system": "s", "user": "Rewrite: {document}"}


def test_six_styles_ship_and_all_load():
    names = available()
    assert {"encyclopedic", "easy", "qa", "tutorial", "summary", "faq"} <= set(names)
    for template in load_templates(names):
        assert template.version >= 1
        messages = template.messages("Some {braced} text.")
        assert messages[1]["content"].count("Some {braced} text.") == 1


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
