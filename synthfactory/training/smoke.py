"""The smoke-test training loop and its health checks (torch + numpy only).

A few AdamW steps with gradient clipping on packed batches. The run fails with a
:class:`SynthfactoryError` as soon as the loss or the gradient norm is not finite or
the loss leaves its expected range: cross-entropy of a uniform guess is ln(vocab), so
on random tokens a loss far *above* it means divergence and one far *below* it means
the model sees its targets (a broken causal or document mask).
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from synthfactory.errors import SynthfactoryError
from synthfactory.training.tiny_model import TinyModelConfig

TOKEN_KINDS = ("random", "constant", "real")


@dataclass(frozen=True)
class SmokeConfig:
    steps: int = 10
    lr: float = 3e-3
    weight_decay: float = 0.1
    max_grad_norm: float = 1.0
    device: str = "auto"
    tokens: str = "random"  # what the batches hold; decides the expected loss range
    seed: int = 0

    def __post_init__(self) -> None:
        if self.steps < 1:
            raise SynthfactoryError(f"steps {self.steps}: must be >= 1")
        if not (math.isfinite(self.lr) and self.lr > 0):
            raise SynthfactoryError(f"lr {self.lr}: must be finite and > 0")
        if self.tokens not in TOKEN_KINDS:
            raise SynthfactoryError(f"tokens {self.tokens!r}: use one of {TOKEN_KINDS}")


def expected_loss_range(vocab_size: int, tokens: str) -> tuple[float, float]:
    ln_v = math.log(vocab_size)
    # Random tokens cannot be predicted: the loss must stay near ln(V) from both sides.
    # Constant or real tokens can be learnt, so only the upper bound applies.
    low = 0.5 * ln_v if tokens == "random" else 0.0
    return low, 1.5 * ln_v


def resolve_device(name: str) -> str:
    import torch

    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if name not in ("cpu", "cuda"):
        raise SynthfactoryError(f"device {name!r}: use auto, cpu or cuda")
    if name == "cuda" and not torch.cuda.is_available():
        raise SynthfactoryError("device 'cuda': no CUDA device is available to torch")
    return name


def train(model_cfg: TinyModelConfig, batches: Iterator[dict], cfg: SmokeConfig) -> dict:
    """Train ``cfg.steps`` steps; return the summary figures or raise on a bad step."""
    import torch
    import torch.nn.functional as F

    from synthfactory.training.tiny_model import TinyDecoder

    device = resolve_device(cfg.device)
    torch.manual_seed(cfg.seed)
    model = TinyDecoder(model_cfg).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    low, high = expected_loss_range(model_cfg.vocab_size, cfg.tokens)
    losses, grad_norms = [], []
    real_tokens = cells = timed_tokens = 0
    timed_start = None
    for step in range(1, cfg.steps + 1):
        if step == 2:  # step 1 pays for allocation and kernel warm-up: not timed
            _sync(device)
            timed_start = time.perf_counter()
        batch = next(batches)
        t = {k: torch.as_tensor(np.asarray(batch[k])).to(device) for k in _KEYS}
        logits = model(t["input_ids"], t["positions"], t["segment_ids"].int())
        per_token = F.cross_entropy(
            logits.float().flatten(0, 1), t["labels"].flatten(), reduction="none"
        )
        mask = t["loss_mask"].flatten().float()
        loss = (per_token * mask).sum() / mask.sum().clamp(min=1)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.max_grad_norm)
        loss_v, grad_v = loss.detach().item(), grad_norm.item()
        _check(step, loss_v, grad_v, low, high, cfg)
        opt.step()
        losses.append(loss_v)
        grad_norms.append(grad_v)
        n_real = int(np.count_nonzero(np.asarray(batch["segment_ids"])))
        real_tokens += n_real
        cells += int(np.asarray(batch["segment_ids"]).size)
        if step >= 2:
            timed_tokens += n_real
    _sync(device)
    timed_s = time.perf_counter() - timed_start if timed_start is not None else 0.0
    return {
        "device": device,
        "steps": cfg.steps,
        "loss_first": round(losses[0], 4),
        "loss_last": round(losses[-1], 4),
        "loss_expected": round(math.log(model_cfg.vocab_size), 4),
        "loss_range": [round(low, 4), round(high, 4)],
        "grad_norm_max": round(max(grad_norms), 4),
        "tokens_trained": real_tokens,
        "tokens_per_s": round(timed_tokens / timed_s, 1) if timed_s > 0 else None,
        "padding_waste_fraction": round(1.0 - real_tokens / cells, 4) if cells else 0.0,
        "params": sum(p.numel() for p in model.parameters()),
    }


_KEYS = ("input_ids", "labels", "positions", "segment_ids", "loss_mask")


def _check(step: int, loss: float, grad: float, low: float, high: float, cfg: SmokeConfig):
    hint = f"(lr={cfg.lr}, tokens={cfg.tokens})"
    if not math.isfinite(loss):
        raise SynthfactoryError(f"smoke step {step}: loss is not finite ({loss}) {hint}")
    if not math.isfinite(grad):
        raise SynthfactoryError(f"smoke step {step}: grad norm is not finite ({grad}) {hint}")
    if not low <= loss <= high:
        raise SynthfactoryError(
            f"smoke step {step}: loss {loss:.3f} left the expected range "
            f"[{low:.3f}, {high:.3f}] around ln(vocab) {hint}"
        )


def _sync(device: str) -> None:
    if device == "cuda":
        import torch

        torch.cuda.synchronize()
