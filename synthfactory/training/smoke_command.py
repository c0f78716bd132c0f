"""``synthfactory smoke``: train a tiny model a few steps on synthetic or real tokens.

    synthfactory smoke --spec examples/lengths/bimodal.json --steps 20
    synthfactory smoke --run file:///.../run --steps 20            # empirical lengths
    synthfactory smoke --run URL --real-tokens --tokenizer MODEL_DIR  # generated text
"""

from __future__ import annotations

import time

import numpy as np

from synthfactory import storage
from synthfactory.errors import PermanentError, SynthfactoryError

DEFAULT_VOCAB = 49152  # SmolLM2's, the embedded model


def run(args) -> dict:
    if args.d_model % args.heads:
        raise PermanentError(f"--d-model {args.d_model} is not divisible by --heads "
                             f"{args.heads}: each head gets d_model / heads dimensions")
    if args.dp_rank >= args.dp:
        raise PermanentError(f"--dp-rank {args.dp_rank}: must be below --dp {args.dp}")
    from synthfactory.training.loader import LoaderConfig, PackedLoader
    from synthfactory.training.smoke import SmokeConfig, train
    from synthfactory.training.tiny_model import TinyModelConfig

    if args.real_tokens and not (args.run and args.tokenizer):
        raise SynthfactoryError("--real-tokens needs --run URL and --tokenizer MODEL_DIR")
    started = time.perf_counter()
    tokenizer = _load_tokenizer(args.tokenizer) if args.tokenizer else None
    vocab = args.vocab_size or (tokenizer.get_vocab_size() if tokenizer else DEFAULT_VOCAB)
    loader_cfg = LoaderConfig(
        seq_len=args.seq_len, batch_size=args.batch_size,
        packing=args.packing, num_packing_bins=args.num_packing_bins,
    )
    if args.real_tokens:
        documents, counts = _real_documents(args, tokenizer, vocab)
        kind = "real"
    else:
        documents = _synthetic_documents(args, vocab)
        kind, counts = args.token, None
    loader = PackedLoader(documents, loader_cfg)
    model_cfg = TinyModelConfig(
        vocab_size=vocab, max_seq_len=args.seq_len, d_model=args.d_model,
        n_layers=args.layers, n_heads=args.heads,
    )
    smoke_cfg = SmokeConfig(steps=args.steps, lr=args.lr, device=args.device, tokens=kind,
                            seed=args.seed)
    figures = train(model_cfg, loader, smoke_cfg)
    summary = {
        "status": "ok",
        "source": args.spec or args.run,
        "tokens": kind,
        "vocab_size": vocab,
        "seq_len": args.seq_len,
        "batch_size": args.batch_size,
        "packing": loader_cfg.packing.value,
        "overlong": args.overlong,
        **(counts if counts is not None else loader.source_counts()),
        **figures,
        "wall_s": round(time.perf_counter() - started, 3),
    }
    if args.output:
        storage.write_json(args.output, summary)
    return summary


def _synthetic_documents(args, vocab: int):
    from synthfactory.training.length_source import LengthSourceConfig
    from synthfactory.training.lengths import EmpiricalLengthSpec, load_spec
    from synthfactory.training.loader import synthetic_documents
    from synthfactory.training.run_data import read_output_lengths
    from synthfactory.training.token_processors import (
        ConstantTokenProcessor,
        RandomTokenProcessor,
    )

    if args.spec:
        spec = load_spec(args.spec)
    else:
        spec = EmpiricalLengthSpec(read_output_lengths(args.run), source=args.run)
    source = LengthSourceConfig(
        spec, max_len=args.seq_len, seed=args.seed, dp_rank=args.dp_rank, overlong=args.overlong
    )
    processor = (
        RandomTokenProcessor(vocab, seed=args.seed, dp_rank=args.dp_rank)
        if args.token == "random"
        else ConstantTokenProcessor(vocab_size=vocab)
    )
    return synthetic_documents(source, processor)


def _real_documents(args, tokenizer, vocab: int):
    from synthfactory.training.loader import real_documents
    from synthfactory.training.run_data import read_output_texts

    texts = read_output_texts(args.run)
    if not texts:
        raise SynthfactoryError(f"{args.run}: no non-empty output_text to train on")
    docs, dropped, truncated = [], 0, 0
    for enc in tokenizer.encode_batch(texts):
        ids = np.asarray(enc.ids, dtype=np.int32)
        if ids.size == 0:
            continue
        if ids.size > args.seq_len:
            if args.overlong == "drop":
                dropped += 1
                continue
            ids, truncated = ids[: args.seq_len], truncated + 1
        docs.append(ids)
    if not docs:
        raise SynthfactoryError(
            f"{args.run}: every document is longer than --seq-len {args.seq_len} "
            "and --overlong drop dropped them all"
        )
    top = max(int(d.max()) for d in docs)
    if top >= vocab:
        raise SynthfactoryError(f"--vocab-size {vocab}: the tokenizer produced token id {top}")
    counts = {"documents": len(docs), "dropped": dropped, "truncated": truncated}
    return real_documents(docs, seed=args.seed, dp_rank=args.dp_rank, dp=args.dp), counts


def _load_tokenizer(model_dir: str):
    from tokenizers import Tokenizer

    url = storage.join(model_dir, "tokenizer.json")
    try:
        return Tokenizer.from_str(storage.read_bytes(url).decode())
    except SynthfactoryError:
        raise
    except Exception as exc:  # tokenizers raises plain Exception subclasses
        raise SynthfactoryError(f"{url}: not a tokenizers tokenizer.json ({exc})") from exc
