"""The training loop: windows of self-distilled sequences, the head unrolled ``ttt_steps`` steps on its
own hidden states (unroll.py), cross-entropy against the target's next tokens over the reduced vocabulary
(rows whose next token is outside it, or was the prompt's rather than the target's, carry no loss),
step j weighted ``step_decay ** j`` (later steps are harder and rarer), AdamW at a constant rate or on a
cosine schedule with linear warm-up. Runs on any torch device: the data's features are moved there once."""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np
import torch

from specgen.train.checkpoint import TrainState
from specgen.train.data import DistillData
from specgen.train.head import Eagle3Head, HeadConfig
from specgen.train.unroll import unrolled_logits
from specgen.train.vocab import reduced_vocabulary, target_to_draft


@dataclass
class TrainConfig:
    steps: int = 200              # total optimizer steps (a resumed run continues up to it)
    batch_size: int = 4           # windows per step
    seq_len: int = 128            # tokens per window
    ttt_steps: int = 3            # training-time test: steps the head is unrolled
    step_decay: float = 0.8
    lr: float = 1e-3
    weight_decay: float = 0.0
    seed: int = 0
    save_every: int = 50          # checkpoint period (steps); the last step is always saved
    lr_schedule: str = "constant"  # or "cosine": decays to min_lr_ratio * lr at the last step
    warmup: int = 0               # steps of linear warm-up from 0 to lr
    min_lr_ratio: float = 0.1
    device: str = "cpu"           # torch device of the head and the batches


def learning_rate(cfg: TrainConfig, step: int) -> float:
    """The rate of optimizer step ``step`` (0-based)."""
    if step < cfg.warmup:
        return cfg.lr * (step + 1) / cfg.warmup
    if cfg.lr_schedule == "constant":
        return cfg.lr
    span = max(1, cfg.steps - cfg.warmup)
    progress = min(1.0, (step - cfg.warmup) / span)
    floor = cfg.min_lr_ratio * cfg.lr
    return floor + (cfg.lr - floor) * 0.5 * (1.0 + np.cos(np.pi * progress))


def make_optimizer(head: Eagle3Head, cfg: TrainConfig) -> torch.optim.Optimizer:
    return torch.optim.AdamW(head.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)


class Batches:
    """Random windows of the data as the head's training rows (row P: (t_{P+1}, features at P) -> t_{P+2})."""

    def __init__(self, data: DistillData, embedding: Callable[[np.ndarray], np.ndarray], d2t: np.ndarray,
                 n_vocab: int, cfg: TrainConfig):
        self.data, self.cfg = data, cfg
        self.device = torch.device(cfg.device)
        self.ids = np.unique(data.tokens)
        self.table = torch.from_numpy(embedding(self.ids)).to(self.device)  # [n_used, H]: the target's rows, frozen
        # [rows, n_layers * H_t], moved to the device once: a batch is then a gather there.
        self.features = torch.from_numpy(data.features.reshape(len(data.features), -1)).to(self.device)
        self.t2d = target_to_draft(d2t, n_vocab)
        lengths = np.diff(data.offsets)
        self.usable = np.flatnonzero(lengths >= 3)                  # a row and its label need 3 tokens

    def sample(self, rng: np.random.Generator):
        cfg, B = self.cfg, self.cfg.batch_size
        picks = rng.choice(self.usable, size=B)
        L = min(cfg.seq_len, int(max(np.diff(self.data.offsets)[picks])))
        n = L - 1
        emb_idx = np.zeros((B, n), dtype=np.int64)
        feature_rows = np.zeros((B, n), dtype=np.int64)
        filled = np.zeros((B, n), dtype=bool)
        labels = np.full((B, n), -100, dtype=np.int64)
        for b, i in enumerate(picks):
            tokens, _, n_prompt = self.data.sequence(int(i))
            start = int(rng.integers(0, max(1, len(tokens) - L + 1)))
            w = tokens[start:start + L]
            m = len(w) - 1
            emb_idx[b, :m] = np.searchsorted(self.ids, w[1:])
            feature_rows[b, :m] = int(self.data.offsets[i]) + start + np.arange(m)
            filled[b, :m] = True
            if m >= 2:
                target_rows = np.arange(2, m + 1) + start >= n_prompt   # t_{P+2} chosen by the target
                lab = self.t2d[w[2:]]
                labels[b, :m - 1] = np.where(target_rows & (lab >= 0), lab, -100)
        put = lambda a: torch.from_numpy(a).to(self.device)  # noqa: E731
        feats = self.features[put(feature_rows)] * put(filled)[..., None]  # rows past a short window: zeros
        return self.table[put(emb_idx)], feats, put(labels)


def train_step(state: TrainState, batches: Batches, cfg: TrainConfig, rng: np.random.Generator) -> Optional[float]:
    """One AdamW step; returns the weighted loss (None when the batch had no labelled row)."""
    embeds, feats, labels = batches.sample(rng)
    head = state.head
    logits = unrolled_logits(head, embeds, head.fuse(feats), cfg.ttt_steps)
    total, weight = 0.0, 0.0
    rows = torch.arange(labels.shape[1], device=labels.device)
    for j, lj in enumerate(logits):
        lab = labels.masked_fill((rows < j)[None, :], -100)
        if not bool((lab >= 0).any()):
            continue
        w = cfg.step_decay ** j
        total = total + w * torch.nn.functional.cross_entropy(lj.reshape(-1, lj.shape[-1]), lab.reshape(-1),
                                                              ignore_index=-100)
        weight += w
    if weight == 0.0:
        return None
    loss = total / weight
    for group in state.optimizer.param_groups:
        group["lr"] = learning_rate(cfg, state.step)
    state.optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(head.parameters(), 1.0)
    state.optimizer.step()
    return float(loss.detach())


def fresh_state(target, data: DistillData, layers, cfg: TrainConfig, vocab: int, ff: int = 0,
                norm_before_fc: bool = True, seed: int = 0) -> TrainState:
    """A new head for ``target`` (train/target.py's TargetGGUF) on cfg.device: its draft vocabulary is the
    ``vocab`` most frequent ids of the data's continuations, its reduced LM head starts from the target's
    rows of them (it predicts what they predict), its FFN is ``ff`` wide (0: the target's). ValueError when
    the continuations are empty."""
    facts = target.facts
    d2t = reduced_vocabulary(data.generated(), vocab, facts.n_vocab)
    if len(d2t) == 0:
        raise ValueError("the continuations are empty: nothing to train on")
    head_cfg = HeadConfig(n_embd=facts.n_embd, n_head=facts.n_head, n_head_kv=facts.n_head_kv, head_dim=facts.head_dim,
                          n_ff=ff or facts.n_ff, n_draft_vocab=len(d2t), target_hidden=facts.n_embd,
                          target_layers=list(layers), eps=facts.eps, norm_before_fc=norm_before_fc)
    head = Eagle3Head(head_cfg, seed=seed)
    with torch.no_grad():
        head.output.copy_(torch.from_numpy(target.output_rows(d2t)))
    head.to(cfg.device)
    return TrainState(head=head, optimizer=make_optimizer(head, cfg), d2t=d2t)


def train(state: TrainState, batches: Batches, cfg: TrainConfig, checkpoint_path=None, show_progress=None,
          deadline: Optional[float] = None) -> TrainState:
    """Runs steps state.step .. cfg.steps - 1, saving a checkpoint every cfg.save_every steps and at the end.
    The batch order depends on (seed, step) only, so a resumed run sees the batches an unbroken one would.
    deadline (time.time() seconds): no step starts after it; the step reached is checkpointed like the last."""
    from tqdm import tqdm

    if show_progress is None:
        show_progress = sys.stderr.isatty()
    torch.manual_seed(cfg.seed)
    bar = tqdm(total=cfg.steps, initial=state.step, disable=not show_progress, unit="step", dynamic_ncols=True)
    while state.step < cfg.steps and (deadline is None or time.time() < deadline):
        rng = np.random.default_rng([cfg.seed, state.step])
        loss = train_step(state, batches, cfg, rng)
        state.step += 1
        if loss is not None:
            state.losses.append(loss)
            bar.set_postfix(loss=f"{loss:.3f}")
        bar.update(1)
        last = state.step == cfg.steps or (deadline is not None and time.time() >= deadline)
        if checkpoint_path is not None and (state.step % cfg.save_every == 0 or last):
            state.save(checkpoint_path)
    bar.close()
    return state


def plot_losses(losses, path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot(np.arange(1, len(losses) + 1), losses, lw=1)
    ax.set_xlabel("step")
    ax.set_ylabel("loss (weighted cross-entropy)")
    ax.set_title("EAGLE-3 head training")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
