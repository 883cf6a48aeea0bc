"""Token embedding: a table lookup, out = W[ids].

Shapes: ids (...) integers in [0, V), any leading shape; W (V, C); out (..., C).

Backward. Each output row is a copy of one row of W, so W's gradient collects
the upstream rows by id, with repeated ids ADDING up:

    dW[v] = Σ_{n : ids_n = v} dout_n                        (V, C)

A plain ``dW[ids] += dout`` is wrong: with a repeated id only one of the writes
survives. ``add.at`` is correct but slow on NumPy (an unbuffered loop). Two fast
exact ways, chosen by the vocabulary size (timings: benchmarks/RESULTS.md):

- small V (<= ONE_HOT_MAX_V): dW = onehot(ids)ᵀ @ dout, one BLAS product of
  cost N·V·C.
- large V: sort the ids, sum each run of equal ids with ``add.reduceat``, write
  the sums into the rows of a zero dW. Cost N·C + N log N and no (N, V) one-hot
  (ids (16, 256), V = 30522: it would be 500 MB).

The one-hot product's cost grows with V and the sort's does not, so the one-hot
product is used only up to a small V (the threshold 128). Both run on CuPy as they are.
"""
from __future__ import annotations

from typing import NamedTuple

from ..backend import get_xp
from ..validate import check_float, check_integer_ids, check_ndim

ONE_HOT_MAX_V = 128   # up to this vocabulary size, dW comes from a one-hot matrix product


class EmbeddingCache(NamedTuple):
    ids: object        # (...) the token ids, to route dout's rows back to rows of W
    vocab_size: int    # V, the rows of dW (W itself is not needed for the gradient)
    width: int         # C, the columns of W: dout's last axis


def embedding_forward(ids, W):
    """out = W[ids]: row ids_n of the table for every position n.

    Inputs: ids (...) integer array, 0 <= id < V; W (V, C) floating point.
    Returns: out (..., C) of W's dtype, EmbeddingCache(ids, V, C).
    """
    xp = get_xp(W, ids)
    check_ndim("W", W, 2, "(V, C)")
    check_float("W", W)
    check_integer_ids("ids", ids, W.shape[0])
    out = xp.take(W, ids, axis=0)                              # (..., C)
    return out, EmbeddingCache(ids, W.shape[0], W.shape[1])


def embedding_backward(dout, cache: EmbeddingCache):
    """dW[v] = Σ of dout over the positions whose id is v (repeated ids accumulate).

    Inputs: dout (..., C), the cache. Returns: dW (V, C) of dout's dtype (ids have no gradient).
    """
    ids, V, width = cache
    check_float("dout", dout)
    if tuple(dout.shape) != tuple(ids.shape) + (width,):
        raise ValueError(f"dout: expected shape {tuple(ids.shape) + (width,)} (the forward output's: "
                         f"ids' shape + (C,)), got {tuple(dout.shape)}")
    C = dout.shape[-1]
    ids_flat = ids.reshape(-1)                                 # (N,)
    dout2 = dout.reshape(-1, C)                                # (N, C)   reverses: out = W[ids] (rows by id, summed)
    if V <= ONE_HOT_MAX_V:
        return _one_hot_scatter(ids_flat, dout2, V)
    return _sorted_scatter(ids_flat, dout2, V)


def _one_hot_scatter(ids_flat, dout2, V):
    """dW = onehotᵀ @ dout with onehot[n, v] = (ids_n == v): one matrix product."""
    xp = get_xp(dout2)
    one_hot = (ids_flat[:, None] == xp.arange(V)).astype(dout2.dtype)  # (N, V)
    return one_hot.T @ dout2                                   # (V, C)


def _sorted_scatter(ids_flat, dout2, V):
    """Sort the ids, sum each run of equal ids, write the sums to their rows of dW."""
    xp = get_xp(dout2)
    dW = xp.zeros((V, dout2.shape[1]), dtype=dout2.dtype)     # (V, C)
    N = ids_flat.shape[0]
    if N == 0:
        return dW
    order = xp.argsort(ids_flat)                               # (N,)
    sorted_ids = ids_flat[order]                               # (N,)
    run_start = xp.empty(N, dtype=bool)                        # (N,) True where a new id begins
    run_start[0] = True
    xp.not_equal(sorted_ids[1:], sorted_ids[:-1], out=run_start[1:])
    starts = xp.flatnonzero(run_start)                         # (U,) U distinct ids
    sums = xp.add.reduceat(xp.take(dout2, order, axis=0), starts, axis=0)  # (U, C)
    dW[sorted_ids[starts]] = sums                              # distinct rows: no collision
    return dW
