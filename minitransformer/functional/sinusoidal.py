"""Sinusoidal position encoding (Vaswani et al. 2017, section 3.5): a fixed table, no parameters.

    PE[pos, 2i]     = sin(pos / 10000^(2i/d))
    PE[pos, 2i + 1] = cos(pos / 10000^(2i/d))

Column pair i oscillates with wavelength 2π·10000^(2i/d): from 2π (i = 0) to about
2π·10000 (the last pair), so every position gets a distinct row, and PE[pos + k] is
a fixed rotation of PE[pos] in each (sin, cos) pair: a linear function of PE[pos].
For an odd d the last column (2i = d - 1) is a sin without its cos.
"""
from __future__ import annotations

import numpy

from ..validate import check_dtype, check_int, check_size


def sinusoidal_table(max_len: int, d: int, *, dtype=numpy.float32, xp=numpy):
    """Inputs: max_len positions, d = d_model columns, dtype, xp the array module.

    Returns: PE (max_len, d) in ``dtype``. The angles are computed in float64 and
    rounded once at the end (the table is built once, not in a hot path).
    """
    max_len = check_int("max_len", max_len, low=0)
    d = check_int("d", d, low=1)
    dtype = check_dtype("dtype", dtype)
    check_size("max_len, d", (max_len, d))
    pos = xp.arange(max_len, dtype=xp.float64)[:, None]    # (max_len, 1)
    two_i = xp.arange(0, d, 2, dtype=xp.float64)           # (ceil(d/2),) the even columns 2i
    angle = pos / 10000.0 ** (two_i / d)                   # (max_len, ceil(d/2))
    PE = xp.empty((max_len, d), dtype=dtype)
    PE[:, 0::2] = xp.sin(angle)                            # columns 0, 2, 4, ...
    PE[:, 1::2] = xp.cos(angle[:, : d // 2])               # columns 1, 3, ...: one fewer when d is odd
    return PE
