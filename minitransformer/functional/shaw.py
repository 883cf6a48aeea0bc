"""Relative position representations (Shaw, Uszkoreit & Vaswani 2018): attention that
sees how far apart a query and a key are, through two learned tables.

    r_ij   = clip(j - p_i, -k, k) + k        the row of the tables for query i, key j   (T, S)
    a^K_ij = table_K[r_ij],  a^V_ij = table_V[r_ij]                                  (T, S, D) each
    e_ij   = q_i · (k_j + a^K_ij) / √D                                              (B, H, T, S)
    P      = softmax(e + mask) over the keys j                                      (B, H, T, S)
    o_i    = Σ_j P_ij (v_j + a^V_ij)                                                (B, H, T, D)

p_i = i + (S - T) is query i's absolute position (the queries are the last T of the
S positions, as with a KV cache: functional/masks.py). The tables have 2k + 1 rows,
one per clipped distance -k .. k, so every distance beyond k shares the edge row:
the paper's observation is that precise distances matter only nearby (k = 16 in
its experiments was no better than k = 2 on translation). A score depends on the
positions only through the clipped j - p_i: shift the whole sequence and the
scores do not change.

The clip k is read from the tables: table_K and table_V are (2k + 1, D). Both
tables are shared by the heads (as in the paper); the value table has the value
width Dv. The lookups a^K = table_K[r] are embedding lookups (functional/embedding.py).

Masks: boolean, True = may attend, -inf before the softmax; a query with every key
masked outputs 0 and passes 0 gradient (softmax_forward returns a zero row), as
functional/attention.py does.

Backward (each line reverses the forward line on its left; scale = 1/√D):
    o = P v + Σ_j P_ij a^V_ij     dv = Pᵀ do,   dP = do vᵀ + (do_i · a^V_ij)_ij,
                                  da^V_ij = Σ_{b,h} P_ij do_i
    P = softmax(e)                de = P ⊙ (dP - Σ_j dP ⊙ P)
    e = (q kᵀ + q·a^K) scale      dq = (de k + Σ_j de_ij a^K_ij) scale,   dk = deᵀ q scale,
                                  da^K_ij = Σ_{b,h} de_ij q_i scale
    a = table[r]                  dtable[m] = Σ_{(i,j): r_ij = m} da_ij     (a scatter-add)

A row m of a table gets gradient from every (i, j) whose clipped distance is m, so
the two edge rows collect every far pair and an interior row only its diagonal.

The sums over d and over (b, h) are ``einsum`` calls with ``optimize=True``, which
lets NumPy hand them to BLAS (about 15x faster than its default loop at B=12, H=4,
T=64, D=32).

Grouped-query heads are repeated to H heads before this function, as for plain
attention (functional/repeat_kv.py).

Shapes: B batch, H heads, T queries, S keys, D head dim, Dv value width, R = 2k + 1
table rows.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy

from ..backend import get_xp
from ..validate import check_dim, check_dtype_like, check_float, check_int, check_ndim, check_upstream
from .attention import _check_inputs
from .embedding import embedding_backward, embedding_forward
from .masks import additive_mask, query_key_positions
from .softmax import SoftmaxCache, softmax_backward, softmax_forward


class ShawCache(NamedTuple):
    # Stored: P (the softmax backward needs only its output), q, k and v, the looked-up
    # a^K, a^V (recomputing them is cheap, but storing them keeps the backward a mirror
    # of the forward) and the two lookup caches (the row index r).
    q: object                # (B, H, T, D)
    k: object                # (B, H, S, D)
    v: object                # (B, H, S, Dv)
    a_K: object              # (T, S, D) a^K_ij
    a_V: object              # (T, S, Dv) a^V_ij
    probs: object            # (B, H, T, S) P
    lookup_K: object         # EmbeddingCache of table_K[r]
    lookup_V: object         # EmbeddingCache of table_V[r]
    scale: float             # 1/√D


def relative_index(T: int, S: int, clip: int, *, xp=numpy):
    """r_ij = clip(j - p_i, -k, k) + k, p_i = i + (S - T): rows of the Shaw tables, (T, S) ints in [0, 2k].

    Example, T = S = 5, k = 2 (distances -4 .. 4 clipped to -2 .. 2, plus 2):
        2 3 4 4 4
        1 2 3 4 4
        0 1 2 3 4
        0 0 1 2 3
        0 0 0 1 2
    """
    clip = check_int("clip", clip, low=0)
    S = check_int("S", S, low=0)                           # required here: None is not "S = T"
    i, j = query_key_positions(T, S, xp=xp)                # (T, 1), (1, S)
    distance = j - i                                       # (T, S) j - p_i
    return distance.clip(-clip, clip) + clip               # (T, S) in [0, 2k]


def shaw_attention_forward(q, k, v, table_K, table_V, mask=None):
    """o_i = Σ_j softmax_j(q_i·(k_j + a^K_ij)/√D + mask) (v_j + a^V_ij), a = table[clip(j - p_i, -k, k) + k].

    Inputs:
        q        (B, H, T, D) queries, the last T of S positions.
        k        (B, H, S, D) keys.
        v        (B, H, S, Dv) values.
        table_K  (2k + 1, D) key-side relative embeddings, row m for distance m - k.
        table_V  (2k + 1, Dv) value-side relative embeddings.
        mask     bool broadcastable to (B, H, T, S), True = may attend; or None.
    Returns: o (B, H, T, Dv), ShawCache (its ``probs`` field is P).
    """
    xp = get_xp(q, k, v, table_K, table_V)
    _, H, T, D, S = _check_inputs(q, k, v, mask, None)
    clip = _check_tables(table_K, table_V, D, v.shape[-1], q)
    r = relative_index(T, S, clip, xp=xp)                  # (T, S) rows of the tables
    a_K, lookup_K = embedding_forward(r, table_K)          # (T, S, D)
    a_V, lookup_V = embedding_forward(r, table_V)          # (T, S, Dv)
    scale = D ** -0.5                                      # 1/√D
    content = q @ k.swapaxes(-1, -2)                       # (B, H, T, S) q_i · k_j
    position = xp.einsum("bhtd,tsd->bhts", q, a_K, optimize=True)  # (B, H, T, S) q_i · a^K_ij
    e = (content + position) * scale                       # (B, H, T, S)
    e_masked = e if mask is None else e + additive_mask(mask, q.dtype)  # (B, H, T, S) -inf where hidden
    P, _ = softmax_forward(e_masked, axis=-1)              # (B, H, T, S)
    o = P @ v + xp.einsum("bhts,tsd->bhtd", P, a_V, optimize=True)  # (B, H, T, Dv)
    cache = ShawCache(q, k, v, a_K, a_V, P, lookup_K, lookup_V, scale)
    return o, cache


def shaw_attention_backward(do, cache: ShawCache):
    """Inputs: do (B, H, T, Dv), the cache.

    Returns: dq (B, H, T, D), dk (B, H, S, D), dv (B, H, S, Dv), dtable_K (2k+1, D),
    dtable_V (2k+1, Dv).
    """
    xp = get_xp(do)
    q, k, v, a_K, a_V, P, lookup_K, lookup_V, scale = cache
    check_upstream("do", do, P.shape[:3] + v.shape[-1:], q.dtype)  # (B, H, T, Dv)
    dv = P.swapaxes(-1, -2) @ do                           # (B, H, S, Dv)  reverses: o = P v + ...
    dP = do @ v.swapaxes(-1, -2) + xp.einsum("bhtd,tsd->bhts", do, a_V, optimize=True)  # (B, H, T, S)
    da_V = xp.einsum("bhts,bhtd->tsd", P, do, optimize=True)       # (T, S, Dv)     reverses: ... + Σ_j P_ij a^V_ij
    de = softmax_backward(dP, SoftmaxCache(P, -1))         # (B, H, T, S)   reverses: P = softmax(e_masked)
    dcontent = de * scale                                  # (B, H, T, S)   reverses: e = (content + position) * scale
    dq = dcontent @ k + xp.einsum("bhts,tsd->bhtd", dcontent, a_K, optimize=True)  # (B, H, T, D)
    dk = dcontent.swapaxes(-1, -2) @ q                     # (B, H, S, D)   reverses: content = q kᵀ
    da_K = xp.einsum("bhts,bhtd->tsd", dcontent, q, optimize=True) # (T, S, D)      reverses: position = q · a^K
    dtable_K = embedding_backward(da_K, lookup_K)          # (2k+1, D)      reverses: a_K = table_K[r]
    dtable_V = embedding_backward(da_V, lookup_V)          # (2k+1, Dv)     reverses: a_V = table_V[r]
    return dq, dk, dv, dtable_K, dtable_V


def _check_tables(table_K, table_V, D: int, Dv: int, q) -> int:
    """The tables' shapes and dtypes, with messages naming them; returns the clip k."""
    check_ndim("table_K", table_K, 2, "(2k+1, D)")
    check_ndim("table_V", table_V, 2, "(2k+1, Dv)")
    check_float("table_K", table_K)
    check_dtype_like("table_K", table_K, q, "q")
    check_dtype_like("table_V", table_V, q, "q")
    R = table_K.shape[0]
    if R % 2 == 0:
        raise ValueError(f"table_K: expected an odd number of rows 2k+1 (distances -k .. k), got shape "
                         f"{tuple(table_K.shape)}")
    check_dim("table_K", table_K, 1, D, "D, the head dim of q")
    check_dim("table_V", table_V, 0, R, "2k+1, the rows of table_K")
    check_dim("table_V", table_V, 1, Dv, "Dv, the value width of v")
    return (R - 1) // 2
