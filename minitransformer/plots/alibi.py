"""The ALiBi bias (Press et al. 2022): one distance penalty matrix per head.

    alibi_figure   bias[h, i, j] = -slope_h · (i - j) of every head, the hidden future left blank

The slopes and the bias come from functional/alibi.py, the causal mask from
functional/masks.py. Heads are numbered from 0 (as everywhere in plots/): head h
has slope 2^(-8(h+1)/H) when H is a power of two.
"""
from __future__ import annotations

import numpy as np

from ..functional.alibi import alibi_bias, alibi_slopes
from ..functional.masks import causal_mask
from ..validate import check_int
from ._common import new_figure, save


def alibi_figure(H: int = 8, T: int = 12, path=None):
    """Every head's ALiBi bias over (query i, key j), the keys a causal mask hides left blank.

    A steep head (large slope) looks only at the last few keys, a shallow one far
    back: the same distance costs head 0 2^(H-1) times what it costs head H-1 (H a
    power of two). One colour scale for all heads.

    Inputs: H heads (>= 1); T positions (>= 1, queries = keys); path or None.
    Returns: fig, data {"slopes" (H,), "bias" (H, T, T) float64, "visible" (T, T) bool}.
    """
    H = check_int("H", H, low=1, high=64)
    T = check_int("T", T, low=1)
    slopes = np.asarray(alibi_slopes(H))                          # (H,)
    bias = alibi_bias(slopes, T, T, dtype=np.float64)             # (H, T, T)
    visible = causal_mask(T)                                      # (T, T)
    ncols = min(H, 4)
    nrows = -(-H // ncols)
    fig, axes = new_figure(3.2 * ncols + 1.2, 3.0 * nrows + 0.8, nrows, ncols)
    lowest = float(np.where(visible, bias, 0.0).min())
    for h, ax in enumerate(axes.ravel()):
        if h >= H:
            ax.set_axis_off()
            continue
        image = ax.imshow(np.where(visible, bias[h], np.nan), cmap="magma", vmin=lowest, vmax=0.0,
                          interpolation="nearest")
        ax.set_title(f"head {h}: slope 1/{1 / slopes[h]:.4g}", fontsize=10)
        ax.set_xlabel("key j")
        ax.set_ylabel("query i")
    fig.colorbar(image, ax=axes, shrink=0.7, label="bias added to the score")
    fig.suptitle(f"ALiBi: bias[h, i, j] = -slope_h · (i - j), {H} heads (future keys hidden: blank)")
    save(fig, path)
    return fig, {"slopes": slopes, "bias": bias, "visible": visible}
