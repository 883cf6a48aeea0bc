"""The training loop: the same for every model family and task.

One step:
    logits, targets = task.forward(model, batch)        forward
    L, cache  = cross_entropy_forward(logits, targets)  the loss
    dlogits   = cross_entropy_backward(1, cache)        dL/dlogits
    model.backward(dlogits)                             every parameter's gradient (accumulated)
    clip_grad_norm(model.parameters(), max_norm)        one global norm
    optimizer.step(lr = schedule(step))                 AdamW by default
    model.zero_grad()

A non-finite loss stops training with a clear message BEFORE the update, so no
NaN reaches the weights or a checkpoint. Checkpoints (checkpoint.py) keep the
parameters, the optimizer state and both random generators (batches, dropout),
so ``resume`` continues bit for bit: the same losses as an uninterrupted run.

Speed: unless ``TrainConfig.tune_malloc`` is False, ``train`` first asks glibc to keep
freed memory for reuse (perf.tune_malloc): a step frees and allocates the same
megabyte-sized arrays again and again, and fresh pages cost a page fault each.
It is a process-wide setting, and it stays on after ``train`` returns.

The final evaluation is scaled to the run (``final_eval_batch_count``): steps // 25
batches of each split, at least ``eval_batches`` and at most 200, unless
``TrainConfig.final_eval_batches`` names a count. An evaluation batch is a forward
pass without caches (eval mode, ``release_caches``): 0.42-0.49 of a training step
(default run, measured 2026-11-23, AMD Zen 3), so the two splits cost about
2 x 1/25 x 0.45 ~ 3.6% of the training (default run: 80 batches each after 2000
steps; it was 200 each, ~9%); a one-step run evaluates on ``eval_batches`` (20).
It logs a line before it starts and one per split, with the seconds taken.
"""
from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field

import numpy as np

from .checkpoint import generator_state, load_checkpoint, save_checkpoint, set_generator_state
from ..functional.cross_entropy import cross_entropy_backward, cross_entropy_forward
from ..optim import AdamW, clip_grad_norm, warmup_cosine_schedule
from .perf import tune_malloc


class TrainingDiverged(RuntimeError):
    """The loss became NaN or infinite; the weights were left as they were before the step."""


@dataclass
class TrainConfig:
    steps: int = 2000                  # optimizer steps in all (a resumed run counts from 0 too)
    lr: float = 1e-3                   # peak learning rate, reached after the warmup
    min_lr: float = 1e-4               # the cosine decay ends here at the last step
    warmup_steps: int = 100            # linear warmup from 0
    betas: tuple = (0.9, 0.99)         # AdamW moment decay rates
    weight_decay: float = 0.1          # AdamW decoupled decay (not on norms, biases, embeddings)
    grad_clip: float = 1.0             # max global gradient norm; 0 = no clipping
    label_smoothing: float = 0.0       # ε of the cross-entropy
    eval_interval: int = 500           # evaluate every this many steps (and at the end)
    eval_batches: int = 20             # batches per intermediate evaluation
    final_eval_batches: int | None = None  # batches of the final evaluation; None: final_eval_batch_count
    log_interval: int = 100            # a progress line every this many steps
    checkpoint_interval: int = 0       # save every this many steps (0 = only at the end)
    seed: int = 0                      # seeds the batch generator (the model has its own)
    tune_malloc: bool = True           # keep freed memory for reuse (perf.tune_malloc): faster steps

    def __post_init__(self):
        for name in ("steps", "eval_interval", "log_interval", "final_eval_batches", "eval_batches"):
            if name == "final_eval_batches" and self.final_eval_batches is None:
                continue
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise ValueError(f"{name}: expected a positive integer, got {getattr(self, name)!r}")
        for name in ("warmup_steps", "checkpoint_interval"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 0:
                raise ValueError(f"{name}: expected an integer >= 0, got {getattr(self, name)!r}")
        if not self.lr > 0 or not 0 <= self.min_lr <= self.lr:
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
    """Batches of each split in the final evaluation: ``cfg.final_eval_batches`` if set,
    else steps // 25 clamped to [eval_batches, 200]: a short run evaluates on few
    batches, and the evaluation stays under 5% of the training (module docstring)."""
    if cfg.final_eval_batches is not None:
        return cfg.final_eval_batches
    return min(FINAL_EVAL_MAX, max(cfg.eval_batches, cfg.steps // FINAL_EVAL_FRACTION))


def dropout_generators(model) -> list:
    """The distinct random generators of the model's dropout layers."""
    gens = {}
    for _, m in model.named_modules():
        if getattr(m, "rng", None) is not None:
            gens[id(m.rng)] = m.rng
    return list(gens.values())


def make_optimizer(model, cfg: TrainConfig) -> AdamW:
    return AdamW(model.parameters(), cfg.lr, betas=tuple(cfg.betas), weight_decay=cfg.weight_decay)


def train_step(model, task, batch, optimizer, lr: float, cfg: TrainConfig, device="cpu") -> float:
    """Forward, backward, clip, update; returns the loss (a Python float)."""
    logits, targets = task.forward(model, batch, device)
    loss, cache = cross_entropy_forward(logits, targets, label_smoothing=cfg.label_smoothing)
    loss = float(loss)
    if not math.isfinite(loss):
        raise TrainingDiverged(f"the loss is {loss} at this step: training stopped before the update "
                               "(lower the learning rate, or check the data); no weight was changed")
    model.backward(cross_entropy_backward(1.0, cache))
    if cfg.grad_clip:
        clip_grad_norm(optimizer.params, cfg.grad_clip)
    optimizer.step(lr)
    model.zero_grad()
    return loss


def evaluate(model, task, split: str, n_batches: int, seed: int, device="cpu") -> float:
    """Mean loss over ``n_batches`` batches drawn from a generator seeded with ``seed`` (eval mode)."""
    rng = np.random.default_rng(seed)
    was_training = model.training
    model.eval()
    total = 0.0
    for _ in range(n_batches):
        logits, targets = task.forward(model, task.batch(split, rng), device)
        total += float(cross_entropy_forward(logits, targets)[0])
        model.release_caches()          # evaluation runs no backward
    model.train(was_training)
    return total / n_batches


def train(model, task, cfg: TrainConfig, *, optimizer=None, checkpoint_path=None, resume=False,
          meta=None, device="cpu", log=print, stop_after=None) -> TrainResult:
    """Train ``model`` on ``task`` for ``cfg.steps`` steps; see the module docstring.

    ``stop_after``: stop (after saving the checkpoint) once this many steps are
    done, as an interruption would; used to test that resuming is exact.
    """
    optimizer = optimizer or make_optimizer(model, cfg)
    if cfg.tune_malloc:
        tune_malloc()      # process-wide, glibc only; 25-30% faster steps measured (perf.py)
    # A run shorter than the warmup warms up over its whole length.
    schedule = warmup_cosine_schedule(cfg.lr, min(cfg.warmup_steps, cfg.steps), cfg.steps, cfg.min_lr)
    batch_rng = np.random.default_rng(cfg.seed)
    result, start = TrainResult(), 0
    if resume:
        start, result = _restore(checkpoint_path, model, optimizer, batch_rng)
        log(f"resumed from {checkpoint_path} at step {start}")
    model.train()
    tokens_per_step = task.tokens(task.batch("train", np.random.default_rng(0)))
    t0 = time.perf_counter()
    for step in range(start + 1, cfg.steps + 1):
        loss = train_step(model, task, task.batch("train", batch_rng), optimizer, schedule(step), cfg, device)
        result.history.append((step, loss))
        if step % cfg.log_interval == 0 or step == cfg.steps:
            elapsed = time.perf_counter() - t0
            done = step - start
            log(_progress(step, cfg.steps, loss, schedule(step), done * tokens_per_step / elapsed,
                          elapsed / done * (cfg.steps - step)))
        if step % cfg.eval_interval == 0 and step != cfg.steps:
            t_eval = time.perf_counter()
            tr, va = (evaluate(model, task, s, cfg.eval_batches, cfg.seed + 7, device) for s in ("train", "val"))
            result.evals.append((step, tr, va))
            log(f"step {step}: eval train {tr:.4f} | val {va:.4f}")
            t0 += time.perf_counter() - t_eval            # evaluation is not training time
        interrupted = stop_after is not None and step == stop_after
        if checkpoint_path and ((cfg.checkpoint_interval and step % cfg.checkpoint_interval == 0)
                                or step == cfg.steps or interrupted):
            t_save = time.perf_counter()
            _save(checkpoint_path, model, optimizer, batch_rng, step, result, cfg, meta)
            t0 += time.perf_counter() - t_save
        if interrupted:
            return result
    result.seconds = time.perf_counter() - t0
    n = result.final_eval_batches = final_eval_batch_count(cfg)
    log(f"final evaluation: {n} batches of train, {n} of val")
    t_eval = time.perf_counter()
    for split, seed in (("train", cfg.seed + 11), ("val", cfg.seed + 13)):
        t_split = time.perf_counter()
        loss = evaluate(model, task, split, n, seed, device)
        setattr(result, f"final_{split}_loss", loss)
        log(f"final evaluation, {split}: loss {loss:.4f} ({time.perf_counter() - t_split:.1f} s)")
    result.eval_seconds = time.perf_counter() - t_eval
    result.evals.append((cfg.steps, result.final_train_loss, result.final_val_loss))
    return result


def _progress(step, steps, loss, lr, tokens_per_s, eta_s) -> str:
    return (f"step {step:>5}/{steps} | loss {loss:.4f} | lr {lr:.2e} | "
            f"{tokens_per_s:,.0f} tok/s | ETA {int(eta_s) // 60}m{int(eta_s) % 60:02d}s")


def _save(path, model, optimizer, batch_rng, step, result, cfg, meta) -> None:
    doc = {**(meta or {}), "step": step, "train_config": asdict(cfg),
           "batch_rng": generator_state(batch_rng),
           "dropout_rngs": [generator_state(g) for g in dropout_generators(model)],
           "history": result.history, "evals": result.evals}
    save_checkpoint(path, model, optimizer_state=optimizer.state_dict(), meta=doc)


def _restore(path, model, optimizer, batch_rng):
    params, optim_state, meta = load_checkpoint(path)
    model.load_state_dict(params)
    optimizer.load_state_dict(optim_state)
    set_generator_state(batch_rng, meta["batch_rng"])
    for g, state in zip(dropout_generators(model), meta["dropout_rngs"]):
        set_generator_state(g, state)
    result = TrainResult(history=[tuple(h) for h in meta["history"]], evals=[tuple(e) for e in meta["evals"]])
    return int(meta["step"]), result
