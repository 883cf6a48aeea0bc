"""The training loop: the same for every model family and task.

One step:
    logits, targets = task.forward(model, batch)        forward
    L, cache  = cross_entropy_forward(logits, targets)  the loss
    dlogits   = cross_entropy_backward(1, cache)        dL/dlogits
    model.backward(dlogits)                             every parameter's gradient (accumulated)
    clip_grad_norm(model.parameters(), max_norm)        one global norm
    optimizer.step(lr = schedule(step))                 AdamW, one parameter after the other
    model.zero_grad()

The bookkeeping around it lives next door: a non-finite loss, gradient or update
stops training before anything is saved (divergence.py); Ctrl-C saves the last
completed step (interrupt.py); ``resume`` continues a saved run bit for bit
(resume.py). ``train`` works on the model's own arrays, in this process: it starts
no process and changes no process-wide setting. The loss and its backward go through
the core's one hook for the speed wing, ``twin(task_loss)`` (functional/twins.py):
the plain functions, unless the wing's ``fast.train`` registered its data-parallel
twins for the run (docs/speed.md).
"""
from __future__ import annotations

import math
import time

import numpy as np

from .checkpoint import generator_state, remove_stale_temporaries
from .config import TrainConfig, TrainResult, final_eval_batch_count
from .divergence import TrainingDiverged, check_grad_norm, check_loss, check_weights
from .interrupt import SigintGuard, TrainingInterrupted, save_interrupted
from .loss import task_loss, task_loss_backward
from .resume import BadRunState, ResumeMismatch, dropout_generators, restore, save_run
from ..functional.twins import twin
from ..layers.blocks import set_recompute
from ..layers.module import Module
from ..optim import AdamW, Optimizer, clip_grad_norm, warmup_cosine_schedule
from ..validate import check_flag, check_int, check_path

__all__ = ["TrainConfig", "TrainResult", "train", "train_step", "evaluate", "make_optimizer",
           "final_eval_batch_count", "TrainingDiverged", "TrainingInterrupted", "ResumeMismatch", "BadRunState", "check_run_inputs"]


def make_optimizer(model, cfg: TrainConfig) -> AdamW:
    """The AdamW of ``cfg`` over the model's parameters (their own arrays, updated in place)."""
    return AdamW(model.parameters(), cfg.lr, betas=tuple(cfg.betas), weight_decay=cfg.weight_decay)


def train_step(model, task, batch, optimizer, lr: float, cfg: TrainConfig, device="cpu", *,
               step=None, guard=None) -> float:
    """Forward, backward, clip, update; returns the loss (a Python float).

    ``step``: the step number, for the messages. ``guard``: a ``SigintGuard`` that holds a
    Ctrl-C back while the update runs.
    """
    at = f"at step {step}" if step is not None else "at this step"
    loss, cache = twin(task_loss)(model, task, batch, cfg.smoothing, device)
    check_loss(float(loss), at)
    twin(task_loss_backward)(model, 1.0, cache)
    norm = clip_grad_norm(optimizer.params, cfg.grad_clip or math.inf)
    check_grad_norm(norm, loss, optimizer.params, at)
    if guard is not None:
        guard.active = True
    try:
        optimizer.step(lr, check_finite=False)        # the global norm above was finite
    finally:
        if guard is not None:
            guard.active = False
    model.zero_grad()
    check_weights(optimizer.params, lr, at)
    return float(loss)


def evaluate(model, task, split: str, n_batches: int, seed: int, device="cpu") -> float:
    """Mean loss over ``n_batches`` batches drawn from a generator seeded with ``seed`` (eval mode,
    no backward: the caches are dropped)."""
    rng, was_training = np.random.default_rng(seed), model.training
    model.eval()
    total = 0.0
    for _ in range(n_batches):
        batch = task.batch(split, rng)
        loss, _ = twin(task_loss)(model, task, batch, 0.0, device)
        model.release_caches()                    # evaluation runs no backward
        total += float(loss)
    model.train(was_training)
    return total / n_batches


def check_run_inputs(model, task, cfg) -> None:
    """TypeError naming the argument unless ``model`` is a Module, ``task`` draws and runs batches
    (``batch(split, rng)``, ``forward(model, batch)``) and ``cfg`` is a TrainConfig."""
    if not isinstance(model, Module):
        raise TypeError(f"model: expected a Module (GPT, Encoder, Seq2Seq, ...), got {type(model).__name__}")
    if not all(callable(getattr(task, m, None)) for m in ("batch", "forward", "tokens")):
        raise TypeError(f"task: expected a task with batch(split, rng), forward(model, batch) and "
                        f"tokens(batch) (training/tasks.py), got {type(task).__name__}")
    if not isinstance(cfg, TrainConfig):
        raise TypeError(f"cfg: expected a TrainConfig, got {type(cfg).__name__}")


def _check_options(optimizer, checkpoint_path, resume, meta, log, stop_after, allow_config_change):
    """train()'s keyword arguments, each refused by name (an empty path is not None, "no" is not
    False); returns the checkpoint path as a str, or None."""
    if optimizer is not None and not isinstance(optimizer, Optimizer):
        raise TypeError(f"optimizer: expected an Optimizer (SGD, Adam, AdamW) or None, got {type(optimizer).__name__}")
    if checkpoint_path is not None:
        checkpoint_path = check_path("checkpoint_path", checkpoint_path)
    if check_flag("resume", resume) and checkpoint_path is None:
        raise ValueError("checkpoint_path: resume=True needs the checkpoint to continue from, got None")
    check_flag("allow_config_change", allow_config_change)
    if meta is not None and not isinstance(meta, dict):
        raise TypeError(f"meta: expected a dict (saved in the checkpoint) or None, got {type(meta).__name__}")
    if not callable(log):
        raise TypeError(f"log: expected a function of one line (print), got {type(log).__name__}")
    if stop_after is not None:
        check_int("stop_after", stop_after, low=1)
    return checkpoint_path


def train(model, task, cfg: TrainConfig, *, optimizer=None, checkpoint_path=None, resume=False, meta=None,
          device="cpu", log=print, stop_after=None, allow_config_change=False) -> TrainResult:
    """Train ``model`` on ``task`` for ``cfg.steps`` steps; see the module docstring.

    ``resume``: continue from ``checkpoint_path`` (resume.py; ``allow_config_change``: a
    TrainConfig that differs is taken, never a model that differs). ``stop_after``: stop
    after saving once this many steps are done, as an interruption would (tests resume
    from there). Ctrl-C saves the last completed step and raises ``TrainingInterrupted``; a
    divergence raises ``TrainingDiverged``.
    """
    check_run_inputs(model, task, cfg)
    checkpoint_path = _check_options(optimizer, checkpoint_path, resume, meta, log, stop_after,
                                     allow_config_change)
    for name in remove_stale_temporaries(checkpoint_path) if checkpoint_path else ():
        log(f"removed {name}: the temporary file of an earlier save that was cut short")
    optimizer = optimizer or make_optimizer(model, cfg)
    if cfg.recompute:
        set_recompute(model)
    schedule = warmup_cosine_schedule(cfg.lr, min(cfg.warmup_steps, cfg.steps), cfg.steps, cfg.min_lr)
    batch_rng = np.random.default_rng(cfg.seed)
    result, start = TrainResult(), 0
    if resume:
        start, result = restore(checkpoint_path, model, optimizer, batch_rng, cfg, meta, allow_config_change)
        log(f"resumed from {checkpoint_path} at step {start}")
    model.train()
    tokens_per_step = task.tokens(task.batch("train", np.random.default_rng(0)))
    generators = [batch_rng] + dropout_generators(model)
    done, states = start, None       # steps completed; the generators' states when step done+1 began
    save = lambda step: save_run(checkpoint_path, model, optimizer, batch_rng, step, result, cfg, meta)
    t0 = time.perf_counter()
    with SigintGuard() as guard:
        try:
            for step in range(start + 1, cfg.steps + 1):
                states = [generator_state(g) for g in generators]     # a few small dicts: cheap
                lr = schedule(step)
                loss = train_step(model, task, task.batch("train", batch_rng), optimizer, lr, cfg, device,
                                  step=step, guard=guard)
                result.history.append((step, loss))
                done, states = step, None
                guard.check()                     # a Ctrl-C held back during the update
                if step % cfg.log_interval == 0 or step == cfg.steps:
                    elapsed = time.perf_counter() - t0
                    log(_progress(step, cfg.steps, loss, lr, (step - start) * tokens_per_step / elapsed,
                                  elapsed / (step - start) * (cfg.steps - step)))
                t_pause = time.perf_counter()     # evaluation and saving are not training time
                if step % cfg.eval_interval == 0 and step != cfg.steps:
                    tr, va = (evaluate(model, task, s, cfg.eval_batches, cfg.seed + 7, device)
                              for s in ("train", "val"))
                    result.evals.append((step, tr, va))
                    log(f"step {step}: eval train {tr:.4f} | val {va:.4f}")
                stopping = stop_after is not None and step == stop_after
                if checkpoint_path and ((cfg.checkpoint_interval and step % cfg.checkpoint_interval == 0)
                                        or step == cfg.steps or stopping):
                    save(step)
                t0 += time.perf_counter() - t_pause
                if stopping:
                    return result
        except KeyboardInterrupt:
            save_interrupted(checkpoint_path, model, optimizer, batch_rng, states, done, result, cfg, meta, log)
    result.seconds = time.perf_counter() - t0
    _final_evaluation(model, task, cfg, result, device, log)
    return result


def _final_evaluation(model, task, cfg, result, device, log) -> None:
    """Both splits on ``final_eval_batch_count(cfg)`` batches each, into ``result``."""
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


def _progress(step, steps, loss, lr, tokens_per_s, eta_s) -> str:
    return (f"step {step:>5}/{steps} | loss {loss:.4f} | lr {lr:.2e} | "
            f"{tokens_per_s:,.0f} tok/s | ETA {int(eta_s) // 60}m{int(eta_s) % 60:02d}s")
