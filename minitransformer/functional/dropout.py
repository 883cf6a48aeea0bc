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
    xp = get_xp(x)
    check_float("x", x)
    p_drop = check_number("p_drop", p_drop, low=0.0, high=1.0, high_open=True)
    training = check_flag("training", training)
    if p_drop == 0.0 or not training:
        return x, DropoutCache(None, 1.0)
    scale = 1.0 / (1.0 - p_drop)
    if mask is None:
        if rng is None:
            raise ValueError(f"rng: dropout with p_drop={p_drop} in training needs a generator "
                             "(numpy.random.default_rng(seed)) or a mask, got None")
        check_random_source("rng", rng)
        draw_dtype = x.dtype if x.dtype.itemsize >= 4 else "float32"    # generators draw float32/64 only
        u = rng.random(x.shape, dtype=draw_dtype)              # (...) uniform on [0, 1)
        if get_xp(u) is not xp:
            u = xp.asarray(u)                                  # host draws, device x
        m = u >= p_drop                                        # (...) keep with probability 1 - p_drop
    else:
        if getattr(getattr(mask, "dtype", None), "kind", None) != "b":
            raise TypeError(f"mask: expected a boolean array (True = keep), "
                            f"got {getattr(mask, 'dtype', type(mask).__name__)}")
        check_same_shape("mask", mask, x.shape)
        m = mask
    y = x * m * scale                                          # (...)
    return y, DropoutCache(m, scale)


def dropout_backward(dy, cache: DropoutCache):
    """dx = dy ⊙ m / (1 - p_drop); on the identity path dx is dy itself (no copy).

    Inputs: dy like y, the cache. Returns: dx like dy.
    """
    if cache.identity:
        check_float("dy", dy)
        return dy                                              # reverses: y = x (identity path)
    check_float("dy", dy)                                      # the cache keeps no dtype: the Module checks it
    check_same_shape("dy", dy, cache.mask.shape)                # the forward output's shape
    dx = dy * cache.mask * cache.scale                         # (...) reverses: y = x * m * scale
    return dx
