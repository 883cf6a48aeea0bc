"""Dropout (Srivastava et al., 2014) with inverted scaling.

    m ~ Bernoulli(1 - p_drop)  elementwise (True = keep),      y = x ⊙ m / (1 - p_drop)

``p_drop`` is the probability of DROPPING an entry. Dividing the kept entries by
1 - p_drop at training time makes E[y] = x, so evaluation needs no rescaling: there
dropout is the identity. It is also the identity for p_drop == 0.

The mask comes from an explicit generator, ``rng.random(x.shape, dtype) >= p_drop``
(each draw is uniform on [0, 1), so it is >= p_drop with probability 1 - p_drop), or
is given (``mask``), e.g. to replay a forward. The draws are made in x's dtype (float16: in float32). A NumPy generator with CuPy arrays works (the draws are copied
to the device); a CuPy generator avoids that copy.

Identity path: the output IS the input (no copy, no work); the cache records it.

Stored: the boolean mask m (1 byte an entry) and the scale; x is not kept.

Backward, reversing y = x ⊙ m / (1 - p_drop):   dx = dy ⊙ m / (1 - p_drop).
"""
from __future__ import annotations

from typing import NamedTuple

from ..backend import get_xp
from ..validate import check_flag, check_float, check_number, check_random_source, check_same_shape


class DropoutCache(NamedTuple):
    mask: object     # x.shape bool keep-mask m (1 byte an entry), or None: the identity was applied
    scale: float     # 1 / (1 - p_drop)

    @property
    def identity(self) -> bool:
        return self.mask is None


def dropout_forward(x, p_drop: float, rng=None, training: bool = True, mask=None):
    """y = x ⊙ m / (1 - p_drop) in training with p_drop > 0; y = x otherwise.

    Inputs: x (...) floating point; p_drop in [0, 1), the probability of dropping;
            rng, a NumPy or CuPy Generator for the mask (needed unless ``mask`` is given);
            training (bool); mask, an optional boolean keep-mask of x's shape.
    Returns: y like x (x itself on the identity path), DropoutCache(mask, scale).
    """
    p_drop, active = _check_forward(x, p_drop, rng, training, mask)
    if not active:
        return x, DropoutCache(None, 1.0)                     # y = x: evaluation, or p_drop = 0
    m = _keep_mask(x, p_drop, rng) if mask is None else mask   # (...) bool, keep with probability 1 - p_drop
    scale = 1.0 / (1.0 - p_drop)
    y = x * m * scale                                          # (...)
    return y, DropoutCache(m, scale)


def dropout_backward(dy, cache: DropoutCache):
    """dx = dy ⊙ m / (1 - p_drop); on the identity path dx is dy itself (no copy).

    Inputs: dy like y, the cache. Returns: dx like dy.
    """
    _check_backward(dy, cache)
    if cache.identity:
        return dy                                              # reverses: y = x (identity path)
    dx = dy * cache.mask * cache.scale                         # (...) reverses: y = x * m * scale
    return dx


def _keep_mask(x, p_drop: float, rng):
    """m = u >= p_drop for u uniform on [0, 1) of x's shape: True with probability 1 - p_drop."""
    xp = get_xp(x)
    draw_dtype = x.dtype if x.dtype.itemsize >= 4 else "float32"    # generators draw float32/64 only
    u = rng.random(x.shape, dtype=draw_dtype)                  # (...) uniform on [0, 1)
    if get_xp(u) is not xp:
        u = xp.asarray(u)                                      # host draws, device x
    return u >= p_drop                                         # (...)


def _check_forward(x, p_drop, rng, training, mask):
    """Validate dropout_forward's arguments; returns p_drop (a float) and whether dropout is active."""
    check_float("x", x)
    p_drop = check_number("p_drop", p_drop, low=0.0, high=1.0, high_open=True)
    active = check_flag("training", training) and p_drop > 0.0
    if not active:
        return p_drop, False
    if mask is not None:
        if getattr(getattr(mask, "dtype", None), "kind", None) != "b":
            raise TypeError(f"mask: expected a boolean array (True = keep), "
                            f"got {getattr(mask, 'dtype', type(mask).__name__)}")
        check_same_shape("mask", mask, x.shape)
    elif rng is None:
        raise ValueError(f"rng: dropout with p_drop={p_drop} in training needs a generator "
                         "(numpy.random.default_rng(seed)) or a mask, got None")
    else:
        check_random_source("rng", rng)
    return p_drop, True


def _check_backward(dy, cache: DropoutCache) -> None:
    """dy floating, of the forward output's shape (the cache keeps no dtype: the Module checks it)."""
    check_float("dy", dy)
    if not cache.identity:
        check_same_shape("dy", dy, cache.mask.shape)
