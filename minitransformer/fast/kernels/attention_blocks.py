"""Attention in blocks of query rows that skip the keys a causal mask hides.

Under a causal mask query i sees keys 0..i only: P is zero above the diagonal, so
half of every (T, S) product and softmax is spent on entries known to be 0. This
module cuts the T queries into blocks; block b (rows r0..r1) computes its scores,
softmax and P V only over the keys 0..end that its last row can see (its causal
edge: end = r1 without a KV cache), and writes exact zeros into P past end (P stays
the whole (B, H, T, S) array that the cache, the plain backward and the plots read):

    keys ->  0 .. end_0 | .. end_1 | ..
    rows 0 .. r1_0   [ computed ]  0       0
    rows .. r1_1     [ computed  ...     ] 0
    ...

The backward reads the same blocks: dP, the softmax backward and dQ per query
block; dV and dK per key block (keys end_{b-1}..end_b), each one product
over the rows r0_b..T that can see those keys, so no gradient is accumulated.
Entries that the mask hides inside a computed block are handled as everywhere: -inf
scores, P = 0, dscores = 0. The same work runs on a few batch rows at a time
(BATCH_BYTES), so a block's scores stay in cache between the product, the softmax
and P V. In the forward a block's scores are formed in a contiguous scratch
buffer and the softmax's last pass writes P into its view, why: a block of P is a
strided view (rows of `end` numbers, S apart), over which NumPy runs exp and the row
reductions one row at a time; over the scratch, one loop each (the same bits, and
faster). The backward's dP in a scratch too was no faster (benchmarks/RESULTS.md).

The forward takes this path when the mask hides every key past each block's causal
edge (causal, with a KV cache offset, sliding windows, with or without key padding);
the backward takes it when P is exactly 0 there, which it checks (one max per block
over the skipped part), so it needs no mask, and a plain forward's cache gets it too.
Otherwise both take the whole-array path.
"""
from __future__ import annotations

import numpy

from .softmax import _softmax_backward_kernel, _softmax_kernel

QUERY_BLOCKS = 4               # query blocks per sequence at most: (n + 1) / 2n of the work (n = 4: 62.5%)
MIN_BLOCK_ROWS = 64            # rows per block at least, and 2 blocks at least: smaller blocks make products
                               # too small to pay (in training steps, one BLAS thread a replica:
                               # benchmarks/RESULTS.md)
BATCH_BYTES = 512 * 1024       # batch rows per step: one block's scores of about this size


def query_blocks(T, S):
    """((r0, r1, end), ...): the T queries cut into blocks of rows, each with its causal edge
    end = r1 + S - T (query i sits at i + S - T and sees keys 0..i + S - T); None when T is
    too short to cut (fewer than 2 blocks of MIN_BLOCK_ROWS rows)."""
    n_blocks = min(QUERY_BLOCKS, T // MIN_BLOCK_ROWS)
    if n_blocks < 2:
        return None
    rows = -(-T // n_blocks)
    return tuple((r0, min(T, r0 + rows), min(T, r0 + rows) + S - T) for r0 in range(0, T, rows))


def mask_hides_past_edges(mask, blocks) -> bool:
    """Whether the mask (bool, broadcastable to (B, H, T, S)) hides, in every block's rows, every
    key past the block's edge: causal and sliding-window masks do, with or without key padding."""
    if mask is None or mask.ndim < 2 or mask.shape[-2] == 1:
        return False                                                 # no row structure: padding at most
    S = blocks[-1][2]                                                # the last block's edge is the last key
    visible = mask.reshape((-1,) + mask.shape[-2:]).any(axis=0)      # (T, S or 1) any batch row or head
    visible = numpy.broadcast_to(visible, (visible.shape[0], S))     # (T, S) a mask of one column too
    return not any(visible[r0:r1, end:].any() for r0, r1, end in blocks)


def probs_zero_past_edges(P, blocks) -> bool:
    """Whether P (B, H, T, S) is exactly 0 past every block's edge, whatever made it so (a mask, or
    exp underflow): then those entries add nothing to any gradient and the backward may skip them.
    One max per block over the skipped part (P >= 0; a NaN fails the test), after one over the
    block's first row: a P without zeros there (no causal mask) fails at that small test."""
    return all(P[:, :, r0, end:].max(initial=0.0) == 0 and P[:, :, r0:r1, end:].max(initial=0.0) == 0
               for r0, r1, end in blocks)


def blocked_forward(q, k_scaled, v, additive, blocks, out, P):
    """out (B, H, T, Dv) and P (B, H, T, S) written block by block (both are written in place).

    q (B, H, T, D); k_scaled (B, H, S, D) = K/√D; v (B, H, S, Dv); additive: the mask's
    0 / -inf form, broadcastable to (B, H, T, S).
    """
    kT = k_scaled.swapaxes(-1, -2)                                   # (B, H, D, S) view
    steps = _batch_steps(P, blocks)
    scratch = _scratch(P, steps, blocks)
    for b0, b1 in steps:
        for r0, r1, end in blocks:
            scores = _contiguous(scratch, (b1 - b0,) + P.shape[1:2] + (r1 - r0, end))   # (b, H, rows, end)
            numpy.matmul(q[b0:b1, :, r0:r1], kT[b0:b1, :, :, :end], out=scores)
            scores += _block_of(additive, b0, b1, r0, r1, end)        # -inf where hidden
            P_block = P[b0:b1, :, r0:r1, :end]                       # (b, H, rows, end) view of P
            _softmax_kernel(scores, P_block, scores)                 # P over the computed keys
            P[b0:b1, :, r0:r1, end:] = 0                             # the keys no row of the block sees
            numpy.matmul(P_block, v[b0:b1, :, :end], out=out[b0:b1, :, r0:r1])   # (b, H, rows, Dv)


def blocked_backward(dout, q, k_scaled, v, P, blocks, dq, dk, dv):
    """dq (B, H, T, D), dk (B, H, S, D) and dv (B, H, S, Dv) written in place; dk still
    lacks the factor 1/√D (the caller multiplies)."""
    vT = v.swapaxes(-1, -2)                                          # (B, H, Dv, S) view
    steps = _batch_steps(P, blocks)
    dscores = numpy.empty((steps[0][1],) + P.shape[1:], dtype=P.dtype)   # (b, H, T, S) reused
    for b0, b1 in steps:
        n = b1 - b0
        for r0, r1, end in blocks:                                   # per query block: dscores, dQ
            ds = dscores[:n, :, r0:r1, :end]                         # (n, H, rows, end) view
            numpy.matmul(dout[b0:b1, :, r0:r1], vT[b0:b1, :, :, :end], out=ds)   # dP
            _softmax_backward_kernel(ds, P[b0:b1, :, r0:r1, :end], ds)          # dscores, in place
            numpy.matmul(ds, k_scaled[b0:b1, :, :end], out=dq[b0:b1, :, r0:r1])
        start = 0
        for r0, _, end in blocks:                                    # per key block: dV, dK
            keys = slice(start, end)                                 # seen by the rows r0..T only
            numpy.matmul(P[b0:b1, :, r0:, keys].swapaxes(-1, -2), dout[b0:b1, :, r0:], out=dv[b0:b1, :, keys])
            numpy.matmul(dscores[:n, :, r0:, keys].swapaxes(-1, -2), q[b0:b1, :, r0:], out=dk[b0:b1, :, keys])
            start = end                                              # the last block ends at S


def _batch_steps(P, blocks):
    """[(b0, b1), ...]: batch rows taken together, so the largest block's scores are ~BATCH_BYTES."""
    B, H = P.shape[:2]
    widest = max((r1 - r0) * end for r0, r1, end in blocks) * H * P.itemsize   # bytes per batch row
    step = max(1, min(B, BATCH_BYTES // widest))
    return [(b0, min(B, b0 + step)) for b0 in range(0, B, step)]


def _scratch(P, steps, blocks):
    """A flat buffer for the largest block's scores (b, H, rows, end) of one batch step."""
    widest = max((r1 - r0) * end for r0, r1, end in blocks)
    return numpy.empty(steps[0][1] * P.shape[1] * widest, dtype=P.dtype)


def _contiguous(scratch, shape):
    """A C-contiguous array of ``shape`` at the start of ``scratch``: one block's scores, whose
    rows, unlike those of a view of P, follow each other in memory (unary NumPy passes and row
    sums then run as one loop instead of one per row)."""
    return scratch[:int(numpy.prod(shape))].reshape(shape)


def _block_of(a, b0, b1, r0, r1, end):
    """a[b0:b1, :, r0:r1, :end] for a broadcastable to (B, H, T, S): broadcast axes (size 1) stay whole."""
    a = a.reshape((1,) * (4 - a.ndim) + a.shape)                     # (B or 1, H or 1, T or 1, S or 1)
    cut = lambda axis, lo, hi: slice(lo, hi) if a.shape[axis] > 1 else slice(None)   # noqa: E731
    return a[cut(0, b0, b1), :, cut(2, r0, r1), cut(3, 0, end)]
