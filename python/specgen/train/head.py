"""An EAGLE-3 head in PyTorch: the forward the engine runs (cpp/src/speculative/drafters/eagle3_head.h,
docs/DESIGN.md section 4.1), with parameters named after llama.cpp's eagle3 GGUF tensors.

Row P of a sequence is the pair (t_{P+1}, g_P); its logits predict t_{P+2} over the reduced draft vocabulary:

    g  = fc(features)   (after enc.output_norm with norm_before_fc)      features: [n, 3 H_t]
    e  = attn_norm(embd(t))            g' = attn_norm_2(g)               [n, H] each
    a  = attention(wq|wk|wv . [e | g'])                                  RoPE on adjacent pairs at P
    r  = wo . a + (norm_before_residual ? g' : g)
    h  = r + ffn_down(silu(ffn_gate . ffn_norm(r)) * ffn_up . ffn_norm(r))    the pre-norm output
    logits = output . output_norm(h)

The token embedding is the target's (frozen, not a parameter): callers pass embedded rows.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Dict, List, Optional, Tuple

import numpy as np
import torch
from torch import nn


@dataclass
class HeadConfig:
    """The head's geometry and the target facts it is tied to (the eagle3 GGUF keys)."""

    n_embd: int                       # H: the head's width (= the target's when it shares token_embd)
    n_head: int
    n_head_kv: int
    head_dim: int
    n_ff: int
    n_draft_vocab: int                # rows of output.weight (the reduced vocabulary)
    target_hidden: int                # H_t
    target_layers: List[int] = field(default_factory=list)
    eps: float = 1e-5
    rope_base: float = 10000.0
    norm_before_residual: bool = False
    norm_before_fc: bool = False

    def to_dict(self) -> dict:
        return asdict(self)


# --- the functional pieces (also the tests' reference of a Llama target's layers) -----------------------
def rms_norm(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    return x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps) * w


def rope(x: torch.Tensor, pos: torch.Tensor, base: float) -> torch.Tensor:
    """llama.cpp's normal RoPE on GGUF's permuted q/k: adjacent pairs (2i, 2i+1) rotated by pos * base^(-2i/d).
    x: [..., n, n_head, d]; pos: [n]."""
    d = x.shape[-1]
    inv = base ** (-torch.arange(0, d, 2, dtype=torch.float64, device=pos.device) / d)
    ang = (pos[:, None].double() * inv[None, :]).to(x.dtype)
    cos, sin = torch.cos(ang)[:, None, :], torch.sin(ang)[:, None, :]
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.stack([a * cos - b * sin, a * sin + b * cos], dim=-1).flatten(-2)


def causal_attention(x_in, wq, wk, wv, wo, pos, n_head: int, n_head_kv: int, head_dim: int, base: float):
    """Causal grouped-query attention of one sequence. x_in: [n, d_in]; wq: [n_head * head_dim, d_in] ...;
    returns [n, wo.shape[0]]."""
    n = x_in.shape[0]
    q = rope((x_in @ wq.T).view(n, n_head, head_dim), pos, base)
    k = rope((x_in @ wk.T).view(n, n_head_kv, head_dim), pos, base)
    v = (x_in @ wv.T).view(n, n_head_kv, head_dim)
    rep = n_head // n_head_kv
    k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
    s = torch.einsum("ihd,jhd->hij", q, k) / math.sqrt(head_dim)
    s = s.masked_fill(torch.triu(torch.ones(n, n, dtype=torch.bool, device=s.device), 1), float("-inf"))
    a = torch.einsum("hij,jhd->ihd", torch.softmax(s, -1), v).reshape(n, -1)
    return a @ wo.T


# --- the head ---------------------------------------------------------------------------------------
class Eagle3Head(nn.Module):
    """The head's parameters (GGUF names in ``GGUF_NAMES``) and its forward."""

    # parameter -> llama.cpp's tensor name
    GGUF_NAMES = {
        "fc": "fc.weight", "fc_norm": "enc.output_norm.weight",
        "attn_norm": "blk.0.attn_norm.weight", "hidden_norm": "blk.0.attn_norm_2.weight",
        "wq": "blk.0.attn_q.weight", "wk": "blk.0.attn_k.weight", "wv": "blk.0.attn_v.weight",
        "wo": "blk.0.attn_output.weight", "ffn_norm": "blk.0.ffn_norm.weight",
        "w_gate": "blk.0.ffn_gate.weight", "w_up": "blk.0.ffn_up.weight", "w_down": "blk.0.ffn_down.weight",
        "output_norm": "output_norm.weight", "output": "output.weight",
    }

    def __init__(self, cfg: HeadConfig, seed: int = 0):
        super().__init__()
        self.cfg = cfg
        gen = torch.Generator().manual_seed(seed)
        E, F = cfg.n_embd, len(cfg.target_layers) * cfg.target_hidden
        Q, KV = cfg.n_head * cfg.head_dim, cfg.n_head_kv * cfg.head_dim

        def mat(n_out, n_in):
            return nn.Parameter(torch.randn(n_out, n_in, generator=gen) / math.sqrt(n_in))

        def ones(n):
            return nn.Parameter(torch.ones(n))

        self.fc = mat(E, F)
        self.fc_norm = ones(F) if cfg.norm_before_fc else None
        self.attn_norm, self.hidden_norm, self.ffn_norm, self.output_norm = ones(E), ones(E), ones(E), ones(E)
        self.wq, self.wk, self.wv = mat(Q, 2 * E), mat(KV, 2 * E), mat(KV, 2 * E)
        self.wo = nn.Parameter(mat(E, Q).detach() * 0.5)
        self.w_gate, self.w_up = mat(cfg.n_ff, E), mat(cfg.n_ff, E)
        self.w_down = nn.Parameter(mat(E, cfg.n_ff).detach() * 0.5)
        self.output = mat(cfg.n_draft_vocab, E)

    # -- conversion to and from llama.cpp's tensor names --------------------------------------------
    def gguf_tensors(self) -> Dict[str, np.ndarray]:
        """The head's tensors under llama.cpp's names, float32 (d2t and token_embd are the caller's)."""
        out = {}
        for attr, name in self.GGUF_NAMES.items():
            p = getattr(self, attr)
            if p is not None:
                out[name] = p.detach().to(torch.float32).cpu().numpy().copy()
        return out

    @classmethod
    def from_gguf_tensors(cls, cfg: HeadConfig, tensors: Dict[str, np.ndarray],
                          dtype: torch.dtype = torch.float32) -> "Eagle3Head":
        """A head holding ``tensors`` (llama.cpp's names; every parameter of cfg's variant)."""
        head = cls(cfg).to(dtype)
        with torch.no_grad():
            for attr, name in cls.GGUF_NAMES.items():
                p = getattr(head, attr)
                if p is None:
                    continue
                if name not in tensors:
                    raise KeyError(f"tensor {name} missing")
                x = torch.from_numpy(np.asarray(tensors[name], dtype=np.float64)).to(dtype)
                if tuple(x.shape) != tuple(p.shape):
                    raise ValueError(f"tensor {name} has shape {tuple(x.shape)}, expected {tuple(p.shape)}")
                p.copy_(x)
        return head

    # -- the forward -------------------------------------------------------------------------------
    def fuse(self, features: torch.Tensor) -> torch.Tensor:
        """g = fc(features). features: [..., 3 H_t] -> [..., H]."""
        if self.fc_norm is not None:
            features = rms_norm(features, self.fc_norm, self.cfg.eps)
        return features @ self.fc.T

    def _inputs(self, embeds: torch.Tensor, g: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        gn = rms_norm(g, self.hidden_norm, self.cfg.eps)
        return torch.cat([rms_norm(embeds, self.attn_norm, self.cfg.eps), gn], dim=-1), gn

    def _after_attention(self, attn: torch.Tensor, g: torch.Tensor, gn: torch.Tensor) -> torch.Tensor:
        r = attn @ self.wo.T + (gn if self.cfg.norm_before_residual else g)
        x = rms_norm(r, self.ffn_norm, self.cfg.eps)
        return r + (torch.nn.functional.silu(x @ self.w_gate.T) * (x @ self.w_up.T)) @ self.w_down.T

    def logits(self, h: torch.Tensor) -> torch.Tensor:
        return rms_norm(h, self.output_norm, self.cfg.eps) @ self.output.T

    def forward(self, embeds: torch.Tensor, g: torch.Tensor, pos: Optional[torch.Tensor] = None):
        """The decoder layer over one sequence's rows (embeds[i], g[i]) at positions pos (default 0..n-1),
        causal: (pre-norm outputs [n, H], logits [n, n_draft_vocab])."""
        cfg = self.cfg
        pos = torch.arange(embeds.shape[0], device=embeds.device) if pos is None else pos
        cat, gn = self._inputs(embeds, g)
        attn = causal_attention(cat, self.wq, self.wk, self.wv, torch.eye(cfg.n_head * cfg.head_dim, dtype=cat.dtype, device=cat.device),
                                pos, cfg.n_head, cfg.n_head_kv, cfg.head_dim, cfg.rope_base)
        h = self._after_attention(attn, g, gn)
        return h, self.logits(h)
