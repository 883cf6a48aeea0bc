"""Splitting the feature axis into attention heads, and merging the heads back.

    split_heads:  (B, T, n·D) -> (B, n, T, D)      head i = columns i·D .. (i+1)·D - 1
    merge_heads:  (B, n_i, T, D) parts -> (B, T, Σn_i·D)   the inverse: heads side by side

Both are layout changes only: no arithmetic, so their "backward" is the other one.
"""
from __future__ import annotations

from ..backend import get_xp
from ..validate import check_dtype_like, check_int, check_ndim, check_same_shape

def split_heads(h, D: int):
    """(B, T, n·D) -> (B, n, T, D): a view, head i = columns i·D .. (i+1)·D - 1."""
    check_ndim("h", h, 3, "(B, T, n·D)")
    D = check_int("D", D, low=1)
    if h.shape[-1] % D:
        raise ValueError(f"h: expected a last axis that is a multiple of D={D}, got shape {tuple(h.shape)}")
    B, T, _ = h.shape
    return h.reshape(B, T, -1, D).transpose(0, 2, 1, 3)


def merge_heads(*parts):
    """(B, n_i, T, D) arrays -> one (B, T, Σn_i·D) array: the heads side by side, in order.

    The inverse of split_heads (and of splitting the result into the parts): the
    loop runs over the at most three parts (q, k, v), not over heads.
    """
    if not parts:
        raise TypeError("parts: expected at least one (B, n_i, T, D) array, got none")
    for i, p in enumerate(parts):
        check_ndim(f"parts[{i}]", p, 4, "(B, n_i, T, D)")
        if i:
            check_dtype_like(f"parts[{i}]", p, parts[0], "parts[0]")
            check_same_shape(f"parts[{i}]", p[:, :1], parts[0][:, :1].shape)
    B, _, T, D = parts[0].shape
    n = sum(p.shape[1] for p in parts)
    merged = get_xp(parts[0]).empty((B, T, n * D), dtype=parts[0].dtype)  # (B, T, n·D)
    heads = split_heads(merged, D)                                        # (B, n, T, D) view
    start = 0
    for p in parts:
        heads[:, start:start + p.shape[1]] = p
        start += p.shape[1]
    return merged
