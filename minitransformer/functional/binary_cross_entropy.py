"""Binary cross-entropy from logits: ELECTRA's replaced-token-detection loss (Clark et al. 2020).

ELECTRA's discriminator reads a sentence in which a small generator replaced some
tokens and says, for every token, whether it was replaced: one logit z_n per token
(``Encoder.forward(ids, head="rtd")``, (B, S)), a label y_n = 1 for a replaced token
and 0 for an original one, and the mean over the real tokens (``mask``: True where a
token counts, False on padding) of the binary cross-entropy:

    σ(z)  = 1 / (1 + exp(−z))                                   the probability "replaced"
    ℓ_n   = −y_n log σ(z_n) − (1 − y_n) log(1 − σ(z_n))
          = softplus(z_n) − y_n z_n                             softplus(z) = log(1 + exp(z))
    L     = Σ_kept ℓ_n / N_kept,                N_kept = #{n : mask_n}

softplus is computed as max(z, 0) + log(1 + exp(−|z|)), so exp never overflows and a
logit of 1e4 gives a finite loss; σ likewise from exp(−|z|). A batch with no kept
token has loss 0.0 and zero gradient, never 0/0. The sum is taken in float64 and the
mean returned in the logits' dtype, as cross-entropy does: 100 float16 tokens of loss 1000,
or float32 logits of ±3e38, have a finite mean whose sum overflows their own dtype. (ELECTRA trains the discriminator
on all tokens, original and replaced, and adds λ = 50 times this loss to the
generator's masked-LM loss; the generator is not modelled here.)

Backward (the log and the sigmoid cancel, as softmax and log do in cross-entropy):

    dz_n = dL · (σ(z_n) − y_n) / N_kept          on kept tokens,   0 on the others

Shapes: logits (...) floating; labels (...) booleans or integers 0/1; mask (...) booleans.
Stored vs recomputed: the cache keeps σ(z) (one number per token), the only thing
the backward needs besides the labels.
"""
from __future__ import annotations

from typing import NamedTuple

from ..backend import get_xp
from ..validate import check_bool, check_float, check_mask, check_same_shape
from .cross_entropy import check_dloss


class BinaryCrossEntropyCache(NamedTuple):
    sigma: object           # (...) σ(z), the probability of "replaced"
    y: object               # (...) labels as numbers of the logits' dtype
    keep: object            # (...) bool, False on tokens that do not count
    n_kept: int             # N_kept, the denominator of the mean


def binary_cross_entropy_forward(logits, labels, mask=None):
    """L = mean over kept tokens of softplus(z) − y z.

    Inputs: logits (...) floating; labels (...) booleans or 0/1 integers, 1 = replaced;
            mask (...) booleans, True where a token counts (None: every token).
    Returns: L as a 0-d array of logits' dtype (0.0 when no token counts), BinaryCrossEntropyCache.
    """
    xp = get_xp(logits, labels)
    check_float("logits", logits)
    check_mask("labels", labels, logits.shape, "1 = replaced", "the shape of logits")
    if mask is not None:
        check_same_shape("mask", mask, logits.shape, "the shape of logits")
        check_bool("mask", mask)
    z = logits                                                      # (...)
    y = labels.astype(z.dtype)                                      # (...) 0. or 1.
    keep = xp.ones(z.shape, dtype=bool) if mask is None else mask   # (...)
    n_kept = int(keep.sum())
    e = xp.exp(-xp.abs(z))                                          # (...) in (0, 1]: no overflow
    softplus = xp.maximum(z, 0) + xp.log1p(e)                       # (...) log(1 + exp(z))
    loss_n = softplus - y * z                                       # (...) −y log σ − (1 − y) log(1 − σ)
    sigma = xp.where(z >= 0, 1 / (1 + e), e / (1 + e))              # (...) σ(z), from exp(−|z|)
    kept_loss = xp.where(keep, loss_n, 0)                           # (...)
    total = kept_loss.astype(xp.float64).sum(keepdims=True)         # (1,) in float64, as cross-entropy sums
    loss = (total / max(n_kept, 1)).astype(z.dtype).reshape(())     # () the mean, in the logits' dtype
    return loss, BinaryCrossEntropyCache(sigma, y, keep, n_kept)


def binary_cross_entropy_backward(dloss, cache: BinaryCrossEntropyCache):
    """dlogits = dL · (σ(z) − y) / N_kept on kept tokens, 0 elsewhere.

    Inputs: dloss, a scalar (Python number or 0-d array); the cache.
    Returns: dlogits (...) of the logits' dtype.
    """
    sigma, y, keep, n_kept = cache
    dloss = check_dloss(dloss)
    dloss_n = keep.astype(sigma.dtype) * (dloss / max(n_kept, 1))   # (...) reverses: L = Σ_kept ℓ_n / N_kept
    dz = (sigma - y) * dloss_n                                      # (...) reverses: ℓ_n = softplus(z_n) − y_n z_n
    return dz
