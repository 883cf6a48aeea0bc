"""ALiBi, attention with linear biases (Press et al. 2022): no position embedding at all;
each head penalises a score in proportion to how far back the key is.

    bias[h, i, j] = -slope_h · (p_i - j),     p_i = i + (S - T) the query's absolute position

For a visible key (j <= p_i) the distance p_i - j >= 0, so older keys get lower
scores, more steeply in heads with a larger slope. A future key would get a
positive bias; the causal mask hides it anyway.

Slopes: a geometric sequence. For H a power of two, slope_h = 2^(-8h/H), h = 1..H
(H = 8: 1/2, 1/4, ..., 1/256). Otherwise, with n the largest power of two below H,
the paper's rule takes the n slopes of n heads followed by every other slope of 2n
heads, as many as are missing: slopes(n) + slopes(2n)[0::2][:H - n].
"""
from __future__ import annotations

import numpy

from ..validate import check_dtype, check_int, check_size
from .masks import query_key_positions


MAX_HEADS = 2 ** 16   # far above any real model; guards against absurd head counts


def alibi_slopes(H: int) -> list[float]:
    """Inputs: H heads, 1 <= H <= MAX_HEADS. Returns: the H slopes, a list of Python floats.

    H above MAX_HEADS (2**16) is a ValueError: no model has that many heads, and a list
    of 10**12 slopes would exhaust memory (a MemoryError) before anything could use it.
    """
    H = check_int("H", H, low=1, high=MAX_HEADS)
    n = 1 << (H.bit_length() - 1)                          # largest power of two <= H
    slopes = _power_of_two_slopes(n)
    if n < H:
        slopes += _power_of_two_slopes(2 * n)[0::2][: H - n]
    return slopes


def _power_of_two_slopes(n: int) -> list[float]:
    return [2.0 ** (-8.0 * h / n) for h in range(1, n + 1)]


def alibi_bias(slopes, T: int, S: int, *, dtype=numpy.float32, xp=numpy):
    """Inputs: slopes (H,) (a list or array); T queries, the last T of S positions; dtype; xp.

    Returns: bias (H, T, S) in ``dtype``, bias[h, i, j] = -slope_h · ((i + S - T) - j).
    """
    T = check_int("T", T, low=0)
    S = check_int("S", S, low=T)                           # the queries are the last T of S positions
    dtype = check_dtype("dtype", dtype)
    try:
        slopes = xp.asarray(slopes, dtype=dtype)           # (H,)
    except (TypeError, ValueError):
        raise TypeError(f"slopes: expected a list or array of H numbers, got {type(slopes).__name__}") from None
    if slopes.ndim != 1:
        raise ValueError(f"slopes: expected 1 dimension (H,), got shape {tuple(slopes.shape)}")
    check_size("slopes, T, S", (slopes.shape[0], T, S))
    i, j = query_key_positions(T, S, xp=xp)                # (T, 1), (1, S)
    minus_distance = (j - i).astype(dtype)                 # (T, S) -(p_i - j): written so, a 0 stays +0
    return slopes[:, None, None] * minus_distance          # (H, T, S)
