"""What ``train`` is told (``TrainConfig``) and what it returns (``TrainResult``)."""
from __future__ import annotations

from dataclasses import dataclass, field

from ..validate import check_number


@dataclass
class TrainConfig:
    steps: int = 2000                  # optimizer steps in all (a resumed run counts from 0 too)
    lr: float = 1e-3                   # peak learning rate, reached after the warmup
    min_lr: float = 1e-4               # the cosine decay ends here at the last step
    warmup_steps: int = 100            # linear warmup from 0
    betas: tuple = (0.9, 0.99)         # AdamW moment decay rates
    weight_decay: float = 0.1          # AdamW decoupled decay (not on norms, biases, embeddings)
    grad_clip: float = 1.0             # max global gradient norm; 0 = no clipping
    smoothing: float = 0.0             # label smoothing ε of the cross-entropy
    eval_interval: int = 500           # evaluate every this many steps (and at the end)
    eval_batches: int = 20             # batches per intermediate evaluation
    final_eval_batches: int | None = None  # batches of the final evaluation; None: final_eval_batch_count
    log_interval: int = 100            # a progress line every this many steps
    checkpoint_interval: int = 0       # save every this many steps (0 = only at the end)
    seed: int = 0                      # seeds the batch generator (the model has its own)
    recompute: bool = False            # activation recomputation (layers/blocks.py): each block keeps
                                       # only its input and redoes its forward in backward; less
                                       # memory, a slower step, the same numbers

    def __post_init__(self):
        for name in ("steps", "eval_interval", "log_interval", "final_eval_batches", "eval_batches"):
            if name == "final_eval_batches" and self.final_eval_batches is None:
                continue
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise ValueError(f"{name}: expected a positive integer, got {getattr(self, name)!r}")
        if not isinstance(self.recompute, bool):
            raise TypeError(f"recompute: expected True or False, got {self.recompute!r}")
        for name in ("warmup_steps", "checkpoint_interval"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 0:
                raise ValueError(f"{name}: expected an integer >= 0, got {getattr(self, name)!r}")
        check_number("lr", self.lr, low=0.0, low_open=True, finite=True)
        check_number("min_lr", self.min_lr, low=0.0, finite=True)
        if not 0 <= self.min_lr <= self.lr:
            raise ValueError(f"lr, min_lr: expected 0 <= min_lr <= lr and lr > 0, got {self.lr}, {self.min_lr}")


@dataclass
class TrainResult:
    history: list = field(default_factory=list)     # (step, train loss) per step
    evals: list = field(default_factory=list)       # (step, train eval loss, val eval loss)
    seconds: float = 0.0                            # time spent in training steps (no evaluation)
    final_train_loss: float = float("nan")
    final_val_loss: float = float("nan")
    final_eval_batches: int = 0                     # batches of each split in the final evaluation
    eval_seconds: float = 0.0                       # time of the final evaluation (both splits)


FINAL_EVAL_FRACTION = 25     # final evaluation: steps // 25 batches per split ...
FINAL_EVAL_MAX = 200         # ... but at most this many


def final_eval_batch_count(cfg: TrainConfig) -> int:
    """Batches of each split in the final evaluation: ``cfg.final_eval_batches`` if set, else
    steps // 25 clamped to [eval_batches, 200]. An evaluation batch is a forward pass without
    a backward, about half a training step, so the two splits cost a few percent of the
    training; a short run evaluates on few batches."""
    if cfg.final_eval_batches is not None:
        return cfg.final_eval_batches
    return min(FINAL_EVAL_MAX, max(cfg.eval_batches, cfg.steps // FINAL_EVAL_FRACTION))
