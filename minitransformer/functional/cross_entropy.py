"""Cross-entropy from logits, with ignored targets and label smoothing.

For each position n with target y_n != ignore_index, with log p = log_softmax(z_n):

    ℓ_n = (1 - ε) · (-log p_{y_n})  +  ε · mean_c (-log p_c)      (all V classes)
    L   = Σ_kept ℓ_n / N_kept,                 N_kept = #{n : y_n != ignore_index}

ε = label_smoothing (Szegedy et al., 2016): the target distribution is
q = (1 - ε) · onehot(y) + ε / V, and ℓ_n is the cross-entropy -Σ_c q_c log p_c.
ε = 0 gives the plain negative log-likelihood. log p comes from
``log_softmax_forward``: the log-sum-exp with the row max subtracted, so logits
of magnitude 1e4 stay finite in float32 (exp of a large logit never happens).

A batch whose targets are ALL ignored has no term to average: its loss is 0.0
and its gradient is zero, never 0/0 = NaN.

Backward (the softmax and the log cancel into a simple difference):

    dz_n = dL · (softmax(z_n) - q_n) / N_kept        on kept rows,   0 on ignored rows

Shapes: logits (..., V), targets (...) integers; flattened to N = prod(...) rows.
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
    label_smoothing: float  # ε
    logits_shape: tuple     # (..., V), the shape of dlogits


def cross_entropy_forward(logits, targets, ignore_index: int = -100, label_smoothing: float = 0.0):
    """L = mean over kept targets of (1-ε)(-log p_y) + ε · mean_c(-log p_c).

    Inputs: logits (..., V) floating point; targets (...) integers in [0, V) or == ignore_index;
            ignore_index (int); label_smoothing ε in [0, 1].
    Returns: L as a 0-d array of logits' dtype (0.0 when every target is ignored),
             CrossEntropyCache.
    """
    xp = get_xp(logits, targets)
    check_min_ndim("logits", logits, 1)
    check_float("logits", logits)
    V = logits.shape[-1]
    ignore_index = check_int("ignore_index", ignore_index)
    eps = check_number("label_smoothing", label_smoothing, low=0.0, high=1.0)
    if V == 0:
        raise ValueError(f"logits: expected at least 1 class on the last axis, got shape {tuple(logits.shape)}")
    check_same_shape("targets", targets, logits.shape[:-1])
    check_class_targets("targets", targets, V, ignore_index)
    logp, _ = log_softmax_forward(logits.reshape(-1, V), axis=-1)  # (N, V)
    y = targets.reshape(-1)                                    # (N,)
    keep = y != ignore_index                                   # (N,)
    y = xp.where(keep, y, 0)                                   # (N,) ignored rows read class 0, unused
    n_kept = int(keep.sum())
    loss_n = -logp[xp.arange(y.shape[0]), y]                   # (N,) -log p_y
    if eps > 0.0:
        loss_n *= 1.0 - eps
        loss_n -= eps * logp.mean(axis=-1)                     # (N,) + ε · mean_c(-log p_c)
    total = xp.where(keep, loss_n, 0).sum()                    # where, not *: an ignored row may be inf
    loss = xp.asarray(total / max(n_kept, 1), dtype=logits.dtype)  # 0-d; 0 / 1 when all are ignored
    return loss, CrossEntropyCache(logp, y, keep, n_kept, eps, tuple(logits.shape))


def cross_entropy_backward(dloss, cache: CrossEntropyCache):
    """dlogits = dL · (softmax - q) / N_kept on kept rows, 0 on ignored rows.

    q = (1 - ε) · onehot(y) + ε / V, the smoothed target distribution.
    Inputs: dloss, a scalar (Python number or 0-d array); the cache.
    Returns: dlogits (..., V) of the logits' dtype.
    """
    xp = get_xp(cache.logp)
    logp, y, keep, n_kept, eps, shape = cache
    V = logp.shape[-1]
    dz = xp.exp(logp)                                          # (N, V) softmax, from the log-probs
    dz[xp.arange(y.shape[0]), y] -= 1.0 - eps                  # - (1 - ε) onehot(y)
    if eps > 0.0:
        dz -= eps / V                                          # - ε / V
    row_scale = keep.astype(dz.dtype)                          # (N,) 1 kept, 0 ignored
    row_scale *= float(dloss) / max(n_kept, 1)                 # float(): a float64 dloss must not promote
    dz *= row_scale[:, None]                                   # (N, V)
    return dz.reshape(shape)
