"""Learned 2-D positions for a grid of patches, plus one for the [CLS] token.

A patch at grid row r and column s gets the sum of a learned row vector and a
learned column vector (a factorised 2-D embedding: Hp + Wp vectors instead of
Hp · Wp, and every patch of a row shares its row vector); the [CLS] token at
position 0 gets a vector of its own:

    P[0]              = e_cls                                   (C,)
    P[1 + r·Wp + s]   = E_row[r] + E_col[s]                     r < Hp, s < Wp

Patches are numbered row by row, as ``patchify`` reads them, so P (1 + N, C),
N = Hp · Wp, is added to [cls ; patches]. ViT itself learns one free vector
per position (1-D, Hp · Wp + 1 of them); its appendix D.4 also tries a "2-D"
variant that CONCATENATES an X- and a Y-embedding of width C/2 each, and finds
the variants about equal, all far better than no positions. Summing two
vectors of width C is the same idea (a concatenation is the sum of two
zero-padded halves) without halving the width.

Backward: a row vector is used by every patch of its row, so it collects their sum:

    dE_row[r] = Σ_s dP[1 + r·Wp + s]                            reverses P = E_row[r] + ...
    dE_col[s] = Σ_r dP[1 + r·Wp + s]                            reverses P = ... + E_col[s]
    de_cls    = dP[0]                                           reverses P[0] = e_cls
"""
from __future__ import annotations

from typing import NamedTuple

from ..backend import get_xp
from ..validate import check_dim, check_dtype_like, check_float, check_ndim, check_upstream


class GridPositionCache(NamedTuple):
    grid: tuple          # (Hp, Wp): the tables themselves are not needed for the gradient
    d_model: int         # C
    dtype: object


def grid_positions_forward(E_row, E_col, e_cls):
    """P = [e_cls ; E_row[r] + E_col[s] for r, s row by row].

    Inputs: E_row (Hp, C); E_col (Wp, C); e_cls (C,), one floating dtype.
    Returns: P (1 + Hp·Wp, C), GridPositionCache.
    """
    xp = get_xp(E_row, E_col, e_cls)
    check_ndim("E_row", E_row, 2, "(Hp, C)")
    check_float("E_row", E_row)
    check_ndim("E_col", E_col, 2, "(Wp, C)")
    check_dim("E_col", E_col, 1, E_row.shape[1], "C, the width of E_row")
    check_ndim("e_cls", e_cls, 1, "(C,)")
    check_dim("e_cls", e_cls, 0, E_row.shape[1], "C, the width of E_row")
    check_dtype_like("E_col", E_col, E_row, "E_row")
    check_dtype_like("e_cls", e_cls, E_row, "E_row")
    (Hp, C), Wp = E_row.shape, E_col.shape[0]
    grid = E_row[:, None, :] + E_col[None, :, :]                  # (Hp, Wp, C)
    P = xp.empty((1 + Hp * Wp, C), dtype=E_row.dtype)             # (1 + N, C)
    P[0] = e_cls                                                  # (C,)
    P[1:] = grid.reshape(Hp * Wp, C)                              # (N, C) row by row
    return P, GridPositionCache((Hp, Wp), C, E_row.dtype)


def grid_positions_backward(dP, cache: GridPositionCache):
    """Inputs: dP (1 + Hp·Wp, C), the cache. Returns: dE_row (Hp, C), dE_col (Wp, C), de_cls (C,)."""
    (Hp, Wp), C, dtype = cache
    check_upstream("dP", dP, (1 + Hp * Wp, C), dtype)
    de_cls = dP[0].copy()                                         # (C,)      reverses P[0] = e_cls
    dgrid = dP[1:].reshape(Hp, Wp, C)                             # (Hp, Wp, C) reverses P[1:] = grid.reshape
    dE_row = dgrid.sum(axis=1)                                    # (Hp, C)   reverses E_row[:, None] broadcast
    dE_col = dgrid.sum(axis=0)                                    # (Wp, C)   reverses E_col[None] broadcast
    return dE_row, dE_col, de_cls
