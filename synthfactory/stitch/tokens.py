"""Token estimates with the model's real tokenizer (``tokenizers``, Rust, batched).

The tokenizer travels as its JSON text (a Spark broadcast), so executors need no
access to the model folder. ``encode_batch`` tokenises a whole Arrow batch at once.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from synthfactory.errors import SynthfactoryError

# ChatML framing around the system and user turns plus the assistant prefix:
# "<|im_start|>system\n...<|im_end|>\n<|im_start|>user\n...<|im_end|>\n<|im_start|>assistant\n"
CHATML = "<|im_start|>system\n{system}<|im_end|>\n<|im_start|>user\n{user}<|im_end|>\n" \
         "<|im_start|>assistant\n"


def tokenizer_json(model_dir: str) -> str:
    path = Path(model_dir) / "tokenizer.json"
    if not path.is_file():
        raise SynthfactoryError(
            f"{path}: tokenizer.json not found (run `synthfactory model prepare`)")
    return path.read_text()


@lru_cache(maxsize=2)
def _tokenizer(json_text: str):
    from tokenizers import Tokenizer

    return Tokenizer.from_str(json_text)


def count_tokens(json_text: str, texts: list[str]) -> list[int]:
    encodings = _tokenizer(json_text).encode_batch(texts, add_special_tokens=False)
    return [len(e.ids) for e in encodings]


def template_overhead(json_text: str, system: str, user_without_document: str) -> int:
    """Tokens a template adds around the document, chat framing included."""
    text = CHATML.format(system=system, user=user_without_document)
    return count_tokens(json_text, [text])[0]
