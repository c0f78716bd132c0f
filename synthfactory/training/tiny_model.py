"""A tiny decoder-only transformer for the smoke test (torch only, no synthfactory deps).

Packed rows hold several documents, so attention is causal *and* block-diagonal by
``segment_ids``, and position embeddings use the per-document ``positions``: a
document sees neither its neighbours nor where it landed in the row.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass(frozen=True)
class TinyModelConfig:
    vocab_size: int = 49152
    max_seq_len: int = 128
    d_model: int = 64
    n_layers: int = 2
    n_heads: int = 4


class _Block(nn.Module):
    def __init__(self, cfg: TinyModelConfig):
        super().__init__()
        self.n_heads = cfg.n_heads
        self.norm1 = nn.RMSNorm(cfg.d_model)
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model, bias=False)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model, bias=False)
        self.norm2 = nn.RMSNorm(cfg.d_model)
        self.mlp = nn.Sequential(
            nn.Linear(cfg.d_model, 4 * cfg.d_model, bias=False),
            nn.GELU(),
            nn.Linear(4 * cfg.d_model, cfg.d_model, bias=False),
        )

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, t, 3, self.n_heads, d // self.n_heads).unbind(2)
        att = F.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), attn_mask=mask
        )
        x = x + self.proj(att.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.norm2(x))


def document_mask(segment_ids: torch.Tensor) -> torch.Tensor:
    """(B, 1, T, T) bool: attend to earlier tokens of the same document only."""
    t = segment_ids.shape[1]
    causal = torch.ones(t, t, dtype=torch.bool, device=segment_ids.device).tril()
    same = segment_ids[:, :, None] == segment_ids[:, None, :]
    # Padding (segment 0) attends to itself only, so no row of the mask is empty (NaN).
    eye = torch.eye(t, dtype=torch.bool, device=segment_ids.device)
    return ((same & causal & (segment_ids[:, :, None] > 0)) | eye)[:, None]


class TinyDecoder(nn.Module):
    def __init__(self, cfg: TinyModelConfig):
        super().__init__()
        if cfg.d_model % cfg.n_heads:
            raise ValueError(f"d_model {cfg.d_model} is not divisible by n_heads {cfg.n_heads}")
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.pos = nn.Embedding(cfg.max_seq_len, cfg.d_model)
        self.blocks = nn.ModuleList(_Block(cfg) for _ in range(cfg.n_layers))
        self.norm = nn.RMSNorm(cfg.d_model)
        nn.init.normal_(self.embed.weight, std=0.02)
        nn.init.normal_(self.pos.weight, std=0.02)

    def forward(
        self, input_ids: torch.Tensor, positions: torch.Tensor, segment_ids: torch.Tensor
    ) -> torch.Tensor:
        x = self.embed(input_ids) + self.pos(positions)
        mask = document_mask(segment_ids)
        for block in self.blocks:
            x = block(x, mask)
        return self.norm(x) @ self.embed.weight.T  # tied output head: fewer parameters
