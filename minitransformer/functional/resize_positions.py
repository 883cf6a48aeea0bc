"""Resizing a learned position grid to another image size, by linear or cubic interpolation.

A ViT learns one position vector per patch of its training grid; at another image
size the grid has other dimensions, and DINO (Caron et al. 2021) and its successors
interpolate the learned table to the new grid instead of training a new one. Here a
table of n rows E (n, C) becomes E' (n', C): row i of E' is read at the fractional
position u_i of E, between rows k and k + 1,

    align_corners=True:   u_i = i · (n − 1) / (n' − 1)                    (u_0 = 0 when n' = 1)
    align_corners=False:  u_i = clip((i + ½) · n / n' − ½, 0, n − 1)
    k = min(⌊u_i⌋, n − 2),   t = u_i − k                                  (k = 0, t = 0 when n = 1)
    E'[i] = (1 − t) · E[k] + t · E[k + 1]

With ``align_corners=True`` the first and last rows are kept exactly (the corner
patches keep their vectors) and the rows between are evenly spaced along the old
table. ``align_corners=False`` is PyTorch's default, which DINO's code uses: the
patch centres (i + ½) are matched instead, so a halved table averages pairs of rows
and the corners are not kept. Both give E' = E when n' = n.

The ViT here factorises its positions (functional/grid_positions.py): P[r, s] =
E_row[r] + E_col[s]. Bilinear interpolation of that 2-D grid is linear interpolation
of E_row along the rows plus linear interpolation of E_col along the columns, because
the weights of each direction sum to 1:

    Σ_{r,s} a_r b_s (E_row[r] + E_col[s]) = Σ_r a_r E_row[r] + Σ_s b_s E_col[s]     (Σ a_r = Σ b_s = 1)

so ``resize_grid_positions`` resizes the two tables and the result is exactly the
bilinear resize of the whole grid. (DINO resizes its free 2-D table bicubically;
linear interpolation keeps a linear table linear and never overshoots the learned
values.) The [CLS] vector has no place on the grid and is kept as it is.

Cubic (``mode="cubic"``), as DINO's ``mode='bicubic'`` does per direction: E'[i] is read
from the four rows around u_i, k − 1 .. k + 2 (k = ⌊u_i⌋, t = u_i − k), with Keys' (1981)
cubic convolution weights, a = −0.75 as in PyTorch's bicubic,

    w(x) = (a + 2)|x|³ − (a + 3)|x|² + 1        |x| <= 1
         = a|x|³ − 5a|x|² + 8a|x| − 4a          1 < |x| < 2,     0 beyond
    E'[i] = w(1 + t) E[k − 1] + w(t) E[k] + w(1 − t) E[k + 1] + w(2 − t) E[k + 2]

rows past either end read the end row (PyTorch's border rule), and with align_corners=False
u_i is not clipped (PyTorch clips it for linear only). The four weights sum to 1 for every t,
so the factorised grid argument above holds for bicubic too: ``resize_grid_positions(...,
mode="cubic")`` is exactly the bicubic resize of the grid. Unlike linear, cubic can overshoot:
a step from 0 to 1 comes out with values below 0 and above 1 next to it.

Forward only: a model is resized once, then trained or evaluated at the new size
with its new tables as parameters; no gradient flows through the resize.
"""
from __future__ import annotations

from ..backend import get_xp
from ..validate import check_choice, check_dim, check_dtype_like, check_float, check_int, check_ndim, check_size


def _check_table(name: str, E, legend: str) -> None:
    check_ndim(name, E, 2, legend)
    check_float(name, E)
    if E.shape[0] < 1:
        raise ValueError(f"{name}: expected at least one row to interpolate, got shape {tuple(E.shape)}")


def _check_align_corners(align_corners) -> None:
    if not isinstance(align_corners, bool):
        raise TypeError(f"align_corners: expected True or False, got {align_corners!r}")


MODES = ("linear", "cubic")
KEYS_A = -0.75          # a of Keys' cubic convolution, PyTorch's (and so DINO's) choice


def _cubic_weight(x):
    """w(x) of Keys' cubic convolution with a = KEYS_A (the module docstring), for 0 <= x < 2."""
    xp = get_xp(x)
    a = KEYS_A
    near = ((a + 2) * x - (a + 3)) * x * x + 1                      # |x| <= 1
    far = ((a * x - 5 * a) * x + 8 * a) * x - 4 * a                 # 1 < |x| < 2
    return xp.where(x <= 1, near, far)


def _source_positions(n: int, n_new: int, align_corners: bool, dtype, xp):
    """u_i, where row i of E' is read in E (the module docstring), before linear's clip."""
    i = xp.arange(n_new, dtype=dtype)                                      # (n',)
    if align_corners:
        return i * (n - 1) / (n_new - 1) if n_new > 1 else i * 0           # (n',) exactly n − 1 at the end
    return (i + 0.5) * (n / n_new) - 0.5                                   # (n',)


def _resize_cubic(E, n_new: int, align_corners: bool):
    """E'[i] = Σ_{m=-1..2} w(|m − t_i|) E[clip(k_i + m)], read at the unclipped u_i."""
    xp = get_xp(E)
    n = E.shape[0]
    u = _source_positions(n, n_new, align_corners, E.dtype, xp)           # (n',) not clipped
    k = (u + 1).astype(xp.int64) - 1                                       # (n',) ⌊u⌋: u + 1 > 0, truncation floors it
    t = (u - k.astype(E.dtype))[:, None]                                   # (n', 1)
    out = xp.zeros((n_new, E.shape[1]), dtype=E.dtype)                     # (n', C)
    for m in (-1, 0, 1, 2):                                                # the four rows around u
        rows = xp.clip(k + m, 0, n - 1)                                    # (n',) the border row past an end
        x = xp.abs(m - t)                                                  # (n', 1) distance from u
        w = _cubic_weight(x)                                               # (n', 1)
        out = out + w * E[rows]                                            # (n', C)
    return out


def resize_table(E, n_new: int, *, align_corners: bool = True, mode: str = "linear"):
    """E' [i] = (1 − t_i) E[k_i] + t_i E[k_i + 1], read at u_i (the module docstring); with
    mode="cubic", Keys' cubic convolution over the four rows around u_i.

    Inputs: E (n, C) floating, n >= 1; n_new n' >= 1; align_corners (bool); mode, "linear" or "cubic".
    Returns: E' (n', C) of E's dtype.
    """
    xp = get_xp(E)
    _check_table("E", E, "(n, C)")
    n = E.shape[0]
    n_new = check_int("n_new", n_new, low=1)
    check_size("n_new", (n_new, E.shape[1]))
    _check_align_corners(align_corners)
    check_choice("mode", mode, MODES)
    if mode == "cubic":
        return _resize_cubic(E, n_new, align_corners)
    u = xp.clip(_source_positions(n, n_new, align_corners, E.dtype, xp), 0, n - 1)   # (n',)
    below = xp.clip(u.astype(xp.int64), 0, max(n - 2, 0))                  # (n',) k = ⌊u⌋ (u >= 0), at most n − 2
    t = (u - below.astype(E.dtype))[:, None]                               # (n', 1) weight of the row above
    above = xp.minimum(below + 1, n - 1)                                   # (n',) k + 1, or k when n = 1
    return (1 - t) * E[below] + t * E[above]                               # (n', C)


def resize_grid_positions(E_row, E_col, grid_height: int, grid_width: int, *, align_corners: bool = True,
                          mode: str = "linear"):
    """The factorised grid tables of functional/grid_positions.py resized to Hp' × Wp' patches.

    Inputs: E_row (Hp, C), E_col (Wp, C), one floating dtype; grid_height Hp', grid_width Wp' (>= 1);
            align_corners (bool): keep the corner vectors (True) or match patch centres (False);
            mode: "linear" (bilinear on the grid) or "cubic" (bicubic, as DINO).
    Returns: E_row' (Hp', C), E_col' (Wp', C): E_row'[r] + E_col'[s] is the bilinear (bicubic)
             resize of the grid E_row[r] + E_col[s].
    """
    _check_table("E_row", E_row, "(Hp, C)")
    _check_table("E_col", E_col, "(Wp, C)")
    check_dim("E_col", E_col, 1, E_row.shape[1], "C, the width of E_row")
    check_dtype_like("E_col", E_col, E_row, "E_row")
    grid_height = check_int("grid_height", grid_height, low=1)
    grid_width = check_int("grid_width", grid_width, low=1)
    check_size("grid_height", (grid_height, E_row.shape[1]))
    check_size("grid_width", (grid_width, E_row.shape[1]))
    E_row_new = resize_table(E_row, grid_height, align_corners=align_corners, mode=mode)   # (Hp', C)
    E_col_new = resize_table(E_col, grid_width, align_corners=align_corners, mode=mode)    # (Wp', C)
    return E_row_new, E_col_new
