"""Small stand-ins for the training tests: a fake generated run and a tiny tokenizer.

They let the smoke test's ``--run`` and ``--real-tokens`` paths run without vLLM
or a downloaded model. Needs pyarrow (always) and tokenizers (``make_tokenizer``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa

from synthfactory import storage

TEXTS = [
    "the cat sat on the mat and the dog sat on the log",
    "a short note",
    "the quick brown fox jumps over the lazy dog again and again and again",
    "tokens are counted per document and packed into rows",
]


def make_run(root: Path, output_tokens: list[int], texts: list[str] | None = None) -> str:
    """A run folder as ``synthfactory join`` leaves it (two joined parts listed in
    ``_JOINED.json``), plus files that must be skipped."""
    run = storage.normalize(str(root / "run"))
    texts = texts or [TEXTS[i % len(TEXTS)] for i in range(len(output_tokens))]
    half = len(output_tokens) // 2
    parts = []
    for shard, sl in enumerate((slice(0, half), slice(half, None))):
        table = pa.table({
            "id": [f"d{i}" for i in range(len(output_tokens))][sl],
            "output_text": texts[sl],
            "output_tokens": output_tokens[sl],
        })
        name = f"shard-{shard:05d}.parquet"
        storage.write_table(table, storage.join(run, "joined", name))
        parts.append({"name": name, "rows": table.num_rows})
    # Not joined parts: one an earlier join left (not listed), and a generated part.
    stray = pa.table({"output_tokens": [10**6], "output_text": ["x"]})
    storage.write_table(stray, storage.join(run, "joined/shard-00007.parquet"))
    storage.write_table(stray, storage.join(run, "generated/shard-00000/part-00000.parquet"))
    storage.write_json(storage.join(run, "joined/_JOINED.json"), {"parts": parts})
    return run


def make_tokenizer(root: Path) -> str:
    """A word-level tokenizer folder (tokenizer.json), like a model folder has."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(TEXTS, trainers.WordLevelTrainer(special_tokens=["[UNK]"]))
    folder = root / "model"
    folder.mkdir()
    (folder / "tokenizer.json").write_text(tok.to_str())
    return str(folder)


def write_spec(root: Path, spec: dict, name: str = "spec.json") -> str:
    path = root / name
    path.write_text(json.dumps(spec))
    return str(path)
