"""``synthfactory card --run URL``: the run's dataset card, ``{run}/card/README.md`` (or
``--out``), for the data ``synthfactory export`` writes (docs/export.md)."""

from __future__ import annotations

import argparse

from synthfactory import storage
from synthfactory.contract import paths
from synthfactory.export.card import card_text, read_facts
from synthfactory.export.license import hub_license


def run(args: argparse.Namespace) -> dict:
    license_id = hub_license(args.license)  # a bad license: one line, before any read
    facts = read_facts(storage.normalize(args.run), args.dag_id, args.airflow_run_id)
    url = storage.normalize(args.out) if args.out else storage.join(facts.run_url, paths.CARD)
    text = card_text(facts, license_id)
    storage.write_bytes(url, text.encode())
    quality = facts.report.get("quality") or {}
    return {"card": url, "license": license_id, "usable": quality.get("usable"),
            "contaminated_by": quality.get("contaminated_by") or {}}
