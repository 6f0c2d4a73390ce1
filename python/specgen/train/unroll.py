"""EAGLE-3's training-time test: the head unrolled k steps on its own hidden states, as it drafts.

Step 0 is the forward over context rows: row P = (t_{P+1}, fc(F_P)). At step j >= 1 row P reads
g = h^{j-1}_{P-1}, the head's own pre-norm output one position back at the step before, as the j-th
drafted token does at inference (speculative/eagle3.h). Its attention sees what the drafted row sees
in the head's KV cache: the context rows up to P - j (step 0's keys) and the rows drafted since,
step i's key at position P - j + i for i = 1..j (a diagonal per step). Tokens stay the data's (teacher
forcing); row P of every step predicts t_{P+2}, and is valid for P >= j.
"""
from __future__ import annotations

import math
from typing import List

import torch

from specgen.train.head import Eagle3Head, rope


def _shift(x: torch.Tensor, by: int) -> torch.Tensor:
    """x moved `by` rows later along dim 1 (zeros in front). x: [B, n, ...]."""
    if by == 0:
        return x
    return torch.cat([torch.zeros_like(x[:, :by]), x[:, :-by]], dim=1)


def unrolled_logits(head: Eagle3Head, embeds: torch.Tensor, g0: torch.Tensor, steps: int) -> List[torch.Tensor]:
    """Logits of each step [B, n, n_draft_vocab] for rows (embeds, g0) of B sequences from position 0.
    embeds: [B, n, H] (the target's embedding rows of t_{P+1}); g0: [B, n, H] (fc of the features at P)."""
    cfg = head.cfg
    B, n, _ = embeds.shape
    H, Hkv, D = cfg.n_head, cfg.n_head_kv, cfg.head_dim
    rep = H // Hkv
    pos = torch.arange(n, device=embeds.device)
    rows = pos
    context_mask = rows[None, :] > rows[:, None]  # key j after query i
    keys: List[torch.Tensor] = []
    values: List[torch.Tensor] = []
    out: List[torch.Tensor] = []
    g = g0
    for j in range(steps):
        cat, gn = head._inputs(embeds, g)
        q = rope((cat @ head.wq.T).view(B, n, H, D), pos, cfg.rope_base)
        k = rope((cat @ head.wk.T).view(B, n, Hkv, D), pos, cfg.rope_base).repeat_interleave(rep, dim=2)
        v = (cat @ head.wv.T).view(B, n, Hkv, D).repeat_interleave(rep, dim=2)
        keys.append(k)
        values.append(v)
        scale = 1.0 / math.sqrt(D)
        # Context rows 0..P-j (step 0's keys).
        s0 = torch.einsum("bihd,bjhd->bhij", q, keys[0]) * scale
        s0 = s0.masked_fill(context_mask | (rows[None, :] > rows[:, None] - j), float("-inf"))
        # Rows drafted at steps 1..j: one key each, at position P - j + i.
        diag_scores, diag_values = [], []
        for i in range(1, j + 1):
            ks, vs = _shift(keys[i], j - i), _shift(values[i], j - i)
            d = (q * ks).sum(-1).permute(0, 2, 1) * scale   # [B, H, n]
            d = d.masked_fill((rows < j - i)[None, None, :], float("-inf"))
            diag_scores.append(d.unsqueeze(-1))
            diag_values.append(vs)
        p = torch.softmax(torch.cat([s0] + diag_scores, dim=-1), dim=-1)
        p = torch.nan_to_num(p)  # no row is empty (step j's own key), but keep -inf rows harmless
        a = torch.einsum("bhij,bjhd->bihd", p[..., :n], values[0])
        for i, vs in enumerate(diag_values):
            a = a + p[..., n + i].permute(0, 2, 1).unsqueeze(-1) * vs
        h = head._after_attention(a.reshape(B, n, H * D), g, gn)
        out.append(head.logits(h))
        g = _shift(h, 1)
    return out
