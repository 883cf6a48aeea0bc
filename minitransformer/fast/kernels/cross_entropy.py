"""Fast twin of functional/cross_entropy.py.

The same equations and cache; the log-softmax is the fast one (softmax.py
here), and the backward turns exp(logp) into dlogits in place, why: no second
(N, V) array besides the gradient itself.
"""
from __future__ import annotations

from ...backend import get_xp
from ...functional.cross_entropy import CrossEntropyCache, _check_inputs, check_dloss
from .softmax import log_softmax_forward


def cross_entropy_forward(logits, targets, ignore_index: int = -100, smoothing: float = 0.0):
    """Twin of functional.cross_entropy.cross_entropy_forward."""
    xp = get_xp(logits, targets)
    V, ignore_index, smoothing = _check_inputs(logits, targets, ignore_index, smoothing)
    logp, _ = log_softmax_forward(logits.reshape(-1, V), axis=-1)  # (N, V)
    y = targets.reshape(-1)                                    # (N,)
    keep = y != ignore_index                                   # (N,)
    y = xp.where(keep, y, 0)                                   # (N,)
    n_kept = int(keep.sum())
    loss_n = -logp[xp.arange(y.shape[0]), y]                   # (N,)
    if smoothing > 0.0:
        loss_n *= 1.0 - smoothing
        loss_n -= smoothing * logp.mean(axis=-1)                     # (N,)
    total = xp.where(keep, loss_n, 0).astype(xp.float64).sum(keepdims=True)   # (1,) in float64, as the plain form
    loss = (total / max(n_kept, 1)).astype(logits.dtype).reshape(())
    return loss, CrossEntropyCache(logp, y, keep, n_kept, smoothing, tuple(logits.shape))


def cross_entropy_backward(dloss, cache: CrossEntropyCache):
    """Twin of functional.cross_entropy.cross_entropy_backward."""
    xp = get_xp(cache.logp)
    logp, y, keep, n_kept, smoothing, shape = cache
    dloss = check_dloss(dloss)
    V = logp.shape[-1]
    dz = xp.exp(logp)                                          # (N, V)
    dz[xp.arange(y.shape[0]), y] -= 1.0 - smoothing
    if smoothing > 0.0:
        dz -= smoothing / V
    row_scale = keep.astype(dz.dtype)                          # (N,)
    row_scale *= float(dloss) / max(n_kept, 1)
    dz *= row_scale[:, None]                                   # (N, V)
    return dz.reshape(shape)
