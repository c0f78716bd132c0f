"""What one stitch job is told: one value, read by the plan (job.py) and by the chunk pass
it runs (chunk_pass.py), each importing it from here and not from the other."""

from __future__ import annotations

from dataclasses import dataclass

from synthfactory.layout import RunLayout
from synthfactory.stitch.routing import RoutingTable
from synthfactory.stitch.templates import PromptTemplate


@dataclass(frozen=True)
class StitchConfig:
    files: list[str]
    run: RunLayout
    templates: list[PromptTemplate]
    model_dir: str
    shard_tokens: int
    styles_per_doc: int = 1
    max_new_tokens: int | str = 256  # or "auto": per row (stitch/budget.py)
    max_model_len: int = 2048
    text_column: str = "text"
    id_column: str = "id"
    quality_column: str | None = None
    min_quality: float | None = None
    domain_column: str | None = None  # the seed column naming each document's domain
    # The routing table in effect (stitch --routing on, ADR 0139): each document draws its
    # styles_per_doc templates from its route only. None: from all of ``templates``.
    routing: RoutingTable | None = None
    seed: int = 0
    master: str = "local[*]"
    partitions: int = 8  # read, range and shuffle partitions; raise it with the executors
    # False: no chunks (ADR 0134): a document that does not fit the window is set aside
    # with the reason stitch gave before chunks, "too long for the context window (P prompt
    # + T new tokens > L)", and the chunk pass is skipped. The baseline of
    # benchmarks/stitch_chunks.py (what chunking costs a corpus that needs none); not a CLI
    # option.
    chunking: bool = True
    # what the prompts are made from, as one hash (stitch/inputs.py), written into
    # shards.json; None: not recorded (a benchmark's own config), so never skipped
    inputs: str | None = None
