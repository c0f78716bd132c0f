"""The ``synthfactory`` OpenLineage run facet (docs/lineage.md).

Its own module because it is built on the openlineage client's ``RunFacet``: imported
only when the provider's listener asks for lineage (operators/lineage.py), never when
the DAG file is parsed.
"""

from __future__ import annotations

from typing import Any

from attrs import Factory, define
from openlineage.client.facet_v2 import RunFacet


@define
class SynthfactoryRunFacet(RunFacet):
    """A finished rephrase, validate or register step: what made its rows and what
    became of them.

    - ``step``: the subcommand; ``runUrl``: the run folder;
    - ``model``: the model the rows were generated with;
    - ``templates``: ``{id, version, hash, hashKind}`` per prompt template of the run
      (``hashKind``: ``content`` where stitch recorded the template's content hash, else
      ``id@version``);
    - ``rows``: rows by verdict: ``usable``, ``rejected`` (the quality gate's) and
      ``quarantined`` (set aside at rephrase); a count the step cannot know is absent.
    """

    step: str
    runUrl: str | None = None  # noqa: N815 (OpenLineage's camelCase)
    model: str | None = None
    templates: list[dict[str, Any]] = Factory(list)
    rows: dict[str, int] = Factory(dict)
