"""Fast twin of functional.heads.merge_heads: no copy when the heads already sit side by side.

The attention twin (attention.py here) writes its output, and its gradients of q, k
and v, straight into the (B, T, n, D) layout that merging produces: a matrix product
may write its result through a strided view (ldc = n·D), at no extra cost. The parts
it returns are (B, n_i, T, D) views of one such buffer, heads in order. Merging them
is then a reshape of the buffer, not a pass over it. Any other parts (a copy, RoPE's
rotated gradients, parts of different buffers) are merged by the plain form.

The result has the plain form's shape, dtype and values; it may share memory with
the parts (they are consumed right after: the layer multiplies the merged array).
"""
from __future__ import annotations

import numpy

from ...functional.heads import merge_heads as _plain_merge_heads


def merge_heads(*parts):
    """Twin of functional.heads.merge_heads."""
    whole = _side_by_side(parts)
    return whole if whole is not None else _plain_merge_heads(*parts)


def _side_by_side(parts):
    """The (B, T, Σn_i·D) view the parts tile exactly, in order; None if they do not."""
    p0 = parts[0]
    if not isinstance(p0, numpy.ndarray) or p0.ndim != 4:
        return None
    B, _, T, D = p0.shape
    n = sum(p.shape[1] for p in parts)
    size = p0.itemsize
    strides = (T * n * D * size, D * size, n * D * size, size)     # (B, n_i, T, D) inside (B, T, n, D)
    start, owner = p0.__array_interface__["data"][0], _owner(p0)
    offset = 0
    for p in parts:
        if (not isinstance(p, numpy.ndarray) or p.dtype != p0.dtype or p.ndim != 4
                or (p.shape[0], p.shape[2], p.shape[3]) != (B, T, D)
                or any(side > 1 and got != want for side, got, want in zip(p.shape, p.strides, strides))
                or p.__array_interface__["data"][0] != start + offset * D * size
                or _owner(p) is not owner):
            return None
        offset += p.shape[1]
    return numpy.lib.stride_tricks.as_strided(p0, shape=(B, T, n * D), strides=(T * n * D * size, n * D * size, size))


def _owner(a):
    """The array that owns a's memory (the end of the .base chain)."""
    while isinstance(a.base, numpy.ndarray):
        a = a.base
    return a
