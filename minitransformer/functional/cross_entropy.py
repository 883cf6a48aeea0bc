"""Cross-entropy from logits, with ignored targets and label smoothing.

For each position n with target y_n != ignore_index, with log p = log_softmax(z_n):

    ℓ_n = (1 - ε) · (-log p_{y_n})  +  ε · mean_c (-log p_c)      (all V classes)
    L   = Σ_kept ℓ_n / N_kept,                 N_kept = #{n : y_n != ignore_index}

ε = smoothing, label smoothing (Szegedy et al., 2016): the target distribution is
q = (1 - ε) · onehot(y) + ε / V, and ℓ_n is the cross-entropy -Σ_c q_c log p_c.
ε = 0 gives the plain negative log-likelihood. log p comes from
``log_softmax_forward``: the log-sum-exp with the row max subtracted, so logits
of magnitude 1e4 stay finite in float32 (exp of a large logit never happens).

A batch whose targets are ALL ignored has no term to average: its loss is 0.0
and its gradient is zero, never 0/0 = NaN. The sum over targets is taken in float64
and the mean returned in the logits' dtype: a sum of N losses can overflow where
their mean does not (100 float16 losses of 1000 sum past float16's 65504).

Backward (the softmax and the log cancel into a simple difference):

    dz_n = dL · (softmax(z_n) - q_n) / N_kept        on kept rows,   0 on ignored rows

Shapes: logits (..., V), targets (...) integers; flattened to N = prod(...) rows.

Stored vs recomputed: the cache keeps log p (N, V); softmax = exp(log p) is
recomputed in backward (one pass) rather than stored as a second (N, V) array.

This is the plain form. The speed wing has a twin with the same arguments and
cache (minitransformer/fast/kernels/cross_entropy.py); a test ties the two.
"""
from __future__ import annotations

from typing import NamedTuple

from ..backend import get_xp
from ..validate import (check_class_targets, check_float, check_int, check_min_ndim,
                        check_number, check_same_shape)
from .softmax import log_softmax_forward


class CrossEntropyCache(NamedTuple):
    logp: object            # (N, V) log-probabilities. softmax = exp(logp) is recomputed in
                            # backward (one pass) rather than stored as a second (N, V) array
    targets: object         # (N,) targets with ignored ones replaced by class 0 (a safe index)
    keep: object            # (N,) bool, False on ignored rows
    n_kept: int             # N_kept, the denominator of the mean
    smoothing: float        # ε
    logits_shape: tuple     # (..., V), the shape of dlogits


def _check_inputs(logits, targets, ignore_index, smoothing):
    """Validate the forward's arguments; returns V, ignore_index (int), ε (float)."""
    check_min_ndim("logits", logits, 1)
    check_float("logits", logits)
    V = logits.shape[-1]
    ignore_index = check_int("ignore_index", ignore_index)
    smoothing = check_number("smoothing", smoothing, low=0.0, high=1.0)
    if V == 0:
        raise ValueError(f"logits: expected at least 1 class on the last axis, got shape {tuple(logits.shape)}")
    check_same_shape("targets", targets, logits.shape[:-1],
                     f"logits' shape {tuple(logits.shape)} without its last axis")
    check_class_targets("targets", targets, V, ignore_index)
    return V, ignore_index, smoothing


def cross_entropy_forward(logits, targets, ignore_index: int = -100, smoothing: float = 0.0):
    """L = mean over kept targets of (1-ε)(-log p_y) + ε · mean_c(-log p_c).

    Inputs: logits (..., V) floating point; targets (...) integers in [0, V) or == ignore_index;
            ignore_index (int); smoothing ε in [0, 1].
    Returns: L as a 0-d array of logits' dtype (0.0 when every target is ignored),
             CrossEntropyCache.
    """
    xp = get_xp(logits, targets)
    V, ignore_index, smoothing = _check_inputs(logits, targets, ignore_index, smoothing)
    z = logits.reshape(-1, V)                                  # (N, V)
    logp, _ = log_softmax_forward(z, axis=-1)                  # (N, V)
    targets_flat = targets.reshape(-1)                         # (N,)
    keep = targets_flat != ignore_index                        # (N,)
    y = xp.where(keep, targets_flat, 0)                        # (N,) ignored rows read class 0, unused
    n_kept = int(keep.sum())
    nll = -logp[xp.arange(y.shape[0]), y]                      # (N,) -log p_y
    if smoothing > 0.0:
        smooth = -logp.mean(axis=-1)                           # (N,) mean_c(-log p_c)
        loss_n = (1.0 - smoothing) * nll + smoothing * smooth              # (N,)
    else:
        loss_n = nll                                           # (N,) ε = 0: skip the mean (a -inf log p would give 0·inf)
    kept_loss = xp.where(keep, loss_n, 0)                      # (N,) where, not *: an ignored row may be inf
    total = kept_loss.astype(xp.float64).sum(keepdims=True)    # (1,) in float64: 100 float16 losses of 1000 overflow 65504
    loss = (total / max(n_kept, 1)).astype(z.dtype).reshape(())   # () the mean, back in the logits' dtype; 0 / 1 when all are ignored
    return loss, CrossEntropyCache(logp, y, keep, n_kept, smoothing, tuple(logits.shape))


def check_dloss(dloss) -> float:
    """The upstream gradient of the scalar loss: a real finite number or a 0-d real array
    (the forward output's shape); returned as a Python float (no dtype promotion)."""
    shape = tuple(getattr(dloss, "shape", ()))
    if shape != ():
        raise ValueError(f"dloss: expected a scalar (shape (), the loss's), got shape {shape}")
    if hasattr(dloss, "item"):
        dloss = dloss.item()                                   # NumPy/CuPy scalar or 0-d array
    return check_number("dloss", dloss, finite=True)


def cross_entropy_backward(dloss, cache: CrossEntropyCache):
    """dlogits = dL · (softmax - q) / N_kept on kept rows, 0 on ignored rows.

    q = (1 - ε) · onehot(y) + ε / V, the smoothed target distribution.
    Inputs: dloss, a scalar (Python number or 0-d array); the cache.
    Returns: dlogits (..., V) of the logits' dtype.
    """
    xp = get_xp(cache.logp)
    logp, y, keep, n_kept, smoothing, shape = cache
    dloss = check_dloss(dloss)
    V = logp.shape[-1]
    p = xp.exp(logp)                                           # (N, V) softmax, from the log-probs
    q = xp.full(p.shape, smoothing / V, dtype=p.dtype)               # (N, V) ε / V ...
    q[xp.arange(y.shape[0]), y] += 1.0 - smoothing                   # (N, V) ... + (1 - ε) onehot(y)
    dz_n = p - q                                               # (N, V) reverses: loss_n = -Σ_c q_c logp_c, logp = log_softmax(z)
    dloss_n = keep.astype(p.dtype) * (float(dloss) / max(n_kept, 1))  # (N,) reverses: loss = Σ_kept loss_n / N_kept
    dz = dz_n * dloss_n[:, None]                               # (N, V)
    return dz.reshape(shape)                                   # (..., V) reverses: z = logits.reshape(-1, V)
