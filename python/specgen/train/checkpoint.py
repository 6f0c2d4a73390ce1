"""Resumable training state: the head, AdamW's moments, the step reached, the loss history, the draft
vocabulary and the configuration, in one torch.save file written atomically (a kill mid-write keeps
the previous checkpoint)."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import List

import numpy as np
import torch

from specgen.train.head import Eagle3Head, HeadConfig


@dataclass
class TrainState:
    head: Eagle3Head
    optimizer: torch.optim.Optimizer
    d2t: np.ndarray
    step: int = 0
    losses: List[float] = field(default_factory=list)

    def save(self, path: os.PathLike) -> None:
        tmp = f"{os.fspath(path)}.tmp"
        torch.save({"head_config": self.head.cfg.to_dict(), "head": self.head.state_dict(),
                    "optimizer": self.optimizer.state_dict(), "d2t": torch.from_numpy(np.asarray(self.d2t)),
                    "step": self.step, "losses": list(self.losses)}, tmp)
        os.replace(tmp, path)


def load_state(path: os.PathLike, make_optimizer, device: str = "cpu") -> TrainState:
    """The state saved at ``path`` with the head on ``device``; make_optimizer(head) builds the optimizer
    whose state is restored (torch moves it to the head's device)."""
    saved = torch.load(os.fspath(path), map_location="cpu", weights_only=True)
    head = Eagle3Head(HeadConfig(**saved["head_config"]))
    head.load_state_dict(saved["head"])
    head.to(device)
    opt = make_optimizer(head)
    opt.load_state_dict(saved["optimizer"])
    return TrainState(head=head, optimizer=opt, d2t=saved["d2t"].numpy(), step=int(saved["step"]),
                      losses=[float(x) for x in saved["losses"]])
