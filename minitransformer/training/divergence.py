"""Stop training on a non-finite loss, gradient or update, before anything is saved.

Checked where it is cheap, once per step:
  - the loss, before the backward;
  - the global gradient norm, before the update: ``clip_grad_norm`` computes it anyway
    (with no clipping, an infinite ``max_norm`` only measures it), and an inf/NaN
    anywhere in any gradient makes it inf/NaN; the weights are untouched;
  - the weights, after the update: one sum for all parameters (NaN and inf propagate
    into a sum). Finite gradients and a finite lr give a finite AdamW update, so this
    only fires for an absurd lr (or a bug); the update has been applied by then, and
    the message says so. Undoing it would need a copy of every weight at every step;
    the loop never saves those weights (and ``save_checkpoint`` refuses non-finite ones).
"""
from __future__ import annotations

import math


class TrainingDiverged(RuntimeError):
    """The loss, the gradient norm or the updated weights became NaN or infinite.

    The message says which step and what was non-finite, and whether the weights in
    memory are still those of the step before (loss, gradient norm) or not (update).
    """


UNTOUCHED = ("training stopped before the update (lower the learning rate, or check the data); "
             "no weight was changed, the weights are those of the step before")


def check_loss(loss: float, at: str) -> None:
    if not math.isfinite(loss):
        raise TrainingDiverged(f"the loss is {loss} {at}: {UNTOUCHED}")


def check_grad_norm(norm: float, loss: float, params, at: str) -> None:
    """``params``: the (name, param, grad) triples; the non-finite gradients are named, then cleared."""
    if math.isfinite(norm):
        return
    bad = [name for name, _, g in params if not math.isfinite(float(g.sum()))]
    for _, _, g in params:
        g[...] = 0
    what = (f"non-finite gradient of {_names(bad)}" if bad else "finite gradients too large to square")
    raise TrainingDiverged(f"the gradient norm is {norm} {at} ({what}) while the loss is {loss:.4g}: {UNTOUCHED}")


def check_weights(params, lr: float, at: str) -> None:
    """After the update. One scalar for all parameters (sums added on the device): one host sync."""
    sums = [p.sum() for _, p, _ in params]                # 0-d each, on the parameters' device
    if math.isfinite(float(sum(sums[1:], sums[0]))):      # from sums[0], not the int 0 (NumPy 1.x: float64)
        return
    bad = [name for name, p, _ in params if not math.isfinite(float(p.sum()))] or ["their sum"]
    raise TrainingDiverged(f"the update {at} (lr {lr:.3g}) made the weights non-finite ({_names(bad)}): "
                           "the weights in memory are NOT those of the step before and must not be used; "
                           "nothing was saved, the last checkpoint is intact (lower the learning rate)")


def _names(names) -> str:
    return ", ".join(names[:3]) + (" ..." if len(names) > 3 else "")
