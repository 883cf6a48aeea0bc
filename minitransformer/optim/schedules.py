"""Learning-rate schedules: plain functions of the step number.

Each factory returns a callable ``step -> lr`` (a Python float) and keeps no
state, so resuming a run needs only the step count.

Steps count from 1: ``schedule(step)`` is the learning rate of the step-th
update, the one after which ``optimizer.t == step``. The training loop reads

    for step in range(1, total_steps + 1):
        ...
        optimizer.step(lr=schedule(step))

Counting from 1 is what the Noam formula needs (step^-0.5 is undefined at 0),
and it makes the first warmup step a small positive lr instead of a wasted 0.
"""
from __future__ import annotations

import math

from ..validate import check_int, check_number


def constant_schedule(lr: float):
    """lr(step) = lr."""
    lr = check_number("lr", lr, low=0.0, finite=True)

    def schedule(step: int) -> float:
        _check_step(step)
        return lr
    return schedule


def warmup_cosine_schedule(max_lr: float, warmup_steps: int, total_steps: int, min_lr: float = 0.0):
    """Linear warmup to ``max_lr``, then a half cosine down to ``min_lr``, then ``min_lr``.

        step <= W:          lr = max_lr · step / W                (max_lr/W at step 1, max_lr at step W)
        W < step <= N:      lr = min_lr + (max_lr - min_lr) · (1 + cos(π · (step - W) / (N - W))) / 2
        step > N:           lr = min_lr

    with W = warmup_steps (0: no warmup) and N = total_steps (>= W). Halfway
    through the decay the lr is (max_lr + min_lr) / 2; at step N it is min_lr.
    """
    max_lr = check_number("max_lr", max_lr, low=0.0, finite=True)
    min_lr = check_number("min_lr", min_lr, low=0.0, high=max_lr)
    warmup_steps = check_int("warmup_steps", warmup_steps, low=0)
    total_steps = check_int("total_steps", total_steps, low=max(warmup_steps, 1))

    def schedule(step: int) -> float:
        _check_step(step)
        if step <= warmup_steps:
            return max_lr * step / warmup_steps
        if step > total_steps:
            return min_lr
        progress = (step - warmup_steps) / (total_steps - warmup_steps)   # in (0, 1]
        return min_lr + (max_lr - min_lr) * 0.5 * (1.0 + math.cos(math.pi * progress))
    return schedule


def noam_schedule(d_model: int, warmup_steps: int, factor: float = 1.0):
    """The schedule of "Attention Is All You Need" (section 5.3):

        lr = factor · d_model^-0.5 · min(step^-0.5, step · warmup^-1.5)

    It rises linearly for ``warmup_steps`` steps, peaks at step = warmup with
    factor · d_model^-0.5 · warmup^-0.5, then decays as 1/√step.
    """
    d_model = check_int("d_model", d_model, low=1)
    warmup_steps = check_int("warmup_steps", warmup_steps, low=1)
    factor = check_number("factor", factor, low=0.0, finite=True)

    def schedule(step: int) -> float:
        _check_step(step)
        return factor * d_model ** -0.5 * min(step ** -0.5, step * warmup_steps ** -1.5)
    return schedule


def _check_step(step) -> None:
    check_int("step", step, low=1)   # steps count from 1, see the module docstring
