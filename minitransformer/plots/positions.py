"""Figures of position information: the sinusoidal table, RoPE, relative positions.

    sinusoidal_encoding   PE as a heatmap (position × dimension) and a few columns over position
    rope_figure           the RoPE score of two fixed vectors against m - n, and one pair's rotation
    relative_positions    the Shaw table row r_ij and the T5 bucket b_ij over (query i, key j)

The arrays come from functional/sinusoidal.py, functional/rope.py, functional/shaw.py
and functional/t5_bias.py.
"""
from __future__ import annotations

import numpy as np

from ..functional.masks import query_key_positions
from ..functional.rope import rope_forward
from ..functional.shaw import relative_index
from ..functional.t5_bias import relative_position_bucket
from ..functional.sinusoidal import sinusoidal_table
from ..validate import check_int, check_number
from ._common import heatmap, new_figure, save


def sinusoidal_encoding(max_len: int = 128, d_model: int = 64, dims=(0, 1, 8, 16, 32), path=None):
    """PE[pos, 2i] = sin(pos / 10000^(2i/d)),  PE[pos, 2i+1] = cos(same)  (Vaswani et al. 2017).

    Left: the whole table, one row per position. Right: the columns ``dims`` over position:
    the low columns oscillate fast, the high ones slowly (wavelength 2π·10000^(2i/d)).
    Inputs: max_len positions; d_model columns; dims, columns to draw; path or None.
    Returns: fig, data {"PE" (max_len, d_model) float64, "position" (max_len,), "dims" (k,),
                        "curves" (max_len, k) = PE[:, dims]}.
    """
    max_len = check_int("max_len", max_len, low=1)
    d_model = check_int("d_model", d_model, low=1)
    dims = np.asarray([check_int(f"dims[{n}]", d, low=0, high=d_model - 1) for n, d in enumerate(dims)])
    PE = sinusoidal_table(max_len, d_model, dtype=np.float64)     # (max_len, d_model)
    position = np.arange(max_len)
    curves = PE[:, dims]                                           # (max_len, k)
    fig, axes = new_figure(13, 5, 1, 2)
    heatmap(axes[0, 0], PE, title=f"Sinusoidal position encoding, d_model = {d_model}",
            xlabel="dimension (even: sin, odd: cos)", ylabel="position", colorbar_label="PE[pos, dim]",
            cmap="RdBu_r", vmin=-1, vmax=1)
    ax = axes[0, 1]
    for k, d in enumerate(dims):
        i = d // 2
        ax.plot(position, curves[:, k] + 2.5 * k, label=f"dim {d}: {'sin' if d % 2 == 0 else 'cos'}, "
                f"wavelength {2 * np.pi * 10000 ** (2 * i / d_model):.3g}")
    ax.set_yticks([2.5 * k for k in range(len(dims))], [f"dim {d}" for d in dims])
    ax.set_title("Columns over position (offset vertically)")
    ax.set_xlabel("position")
    ax.set_ylabel("PE[pos, dim]  (each in [-1, 1])")
    ax.legend(fontsize=8, loc="upper right")
    save(fig, path)
    return fig, {"PE": PE, "position": position, "dims": dims, "curves": curves}


def rope_figure(D: int = 32, n_positions: int = 48, pair: int = 1, n_rotations: int = 8, seed: int = 0,
                base: float = 10000.0, path=None):
    """RoPE (Su et al. 2021) turns position into rotation: pair j of a vector at position m
    turns by m·θ_j, θ_j = base^(-2j/D), so the score ⟨R(m) q, R(n) k⟩ = ⟨q, R(n - m) k⟩
    depends on the positions only through m - n.

    Left: the score of two fixed random vectors q, k (seeded) for every (m, n) in
    [0, n_positions)², against m - n: all n_positions² points fall on one curve.
    Middle: the same scores as a matrix over (m, n): constant along each diagonal.
    Right: the 2-D pair ``pair`` of the vector e (1 in coordinate 2·pair, 0 elsewhere)
    at positions m = 0 .. n_rotations - 1: points on the unit circle at angles m·θ_j.

    Inputs: D head dim (even); n_positions; pair j in [0, D/2); n_rotations; seed; base; path.
    Returns: fig, data {"q", "k" (D,), "scores" (P, P) with scores[m, n] = ⟨R(m) q, R(n) k⟩,
                        "distance" (P, P) = m - n, "theta" θ_j, "rotation" (n_rotations, 2)}.
    """
    D = check_int("D", D, low=2)
    if D % 2:
        raise ValueError(f"D: RoPE rotates pairs, expected an even head dim, got {D}")
    P = check_int("n_positions", n_positions, low=1)
    pair = check_int("pair", pair, low=0, high=D // 2 - 1)
    n_rotations = check_int("n_rotations", n_rotations, low=1)
    base = check_number("base", base, low=0.0, low_open=True)
    rng = np.random.default_rng(seed)
    q, k = rng.standard_normal(D), rng.standard_normal(D)
    Rq = _rotated(q, P, base)                                  # (P, D) row m = R(m) q
    Rk = _rotated(k, P, base)                                  # (P, D) row n = R(n) k
    scores = Rq @ Rk.T                                         # (P, P) scores[m, n]
    m, n = np.meshgrid(np.arange(P), np.arange(P), indexing="ij")
    distance = m - n                                           # (P, P)
    e = np.zeros(D)
    e[2 * pair] = 1.0
    rotation = _rotated(e, n_rotations, base)[:, 2 * pair:2 * pair + 2]   # (n_rotations, 2)
    theta = base ** (-2.0 * pair / D)

    fig, axes = new_figure(18, 5, 1, 3)
    ax = axes[0, 0]
    ax.plot(distance.ravel(), scores.ravel(), ".", markersize=4, alpha=0.5,
            label=f"all {P * P} pairs (m, n)")
    diagonal = scores[np.arange(P), 0]                         # one (m, n = 0) per distance m >= 0
    ax.plot(np.arange(P), diagonal, color="black", linewidth=0.8, label="n = 0")
    ax.set_title("RoPE score depends only on m - n")
    ax.set_xlabel("relative position m - n")
    ax.set_ylabel("score ⟨R(m) q, R(n) k⟩")
    ax.grid(alpha=0.3)
    ax.legend()
    heatmap(axes[0, 1], scores, title="The same scores: constant along diagonals",
            xlabel="key position n", ylabel="query position m", colorbar_label="score", cmap="RdBu_r",
            vmin=-np.abs(scores).max(), vmax=np.abs(scores).max())
    _draw_rotation(axes[0, 2], rotation, pair, theta)
    save(fig, path)
    return fig, {"q": q, "k": k, "scores": scores, "distance": distance, "theta": theta,
                 "rotation": rotation}


def _draw_rotation(ax, rotation, pair: int, theta: float) -> None:
    """Arrows from the origin to each rotated pair (a, b), labelled with its position m."""
    circle = np.linspace(0, 2 * np.pi, 200)
    ax.plot(np.cos(circle), np.sin(circle), color="lightgray")
    for m, (a, b) in enumerate(rotation):
        ax.annotate("", xy=(a, b), xytext=(0, 0), arrowprops=dict(arrowstyle="->", color=f"C{m % 10}"))
        ax.text(1.12 * a, 1.12 * b, f"m={m}", ha="center", va="center", fontsize=9)
    ax.set_title(f"Pair j = {pair} rotated by m·θ_j, θ_j = {theta:.3g} rad")
    ax.set_xlabel(f"coordinate {2 * pair}")
    ax.set_ylabel(f"coordinate {2 * pair + 1}")
    ax.set_xlim(-1.3, 1.3)
    ax.set_ylim(-1.3, 1.3)
    ax.set_aspect("equal")


def _rotated(v, n_positions: int, base: float):
    """Rows R(m) v for m = 0 .. n_positions - 1, from rope_forward: (n_positions, D)."""
    x = np.ascontiguousarray(np.broadcast_to(v, (1, 1, n_positions, v.shape[0])))  # (1, 1, P, D)
    y, _ = rope_forward(x, base=base)
    return y[0, 0]                                             # (P, D)


def relative_positions(T: int = 40, clip: int = 4, n_buckets: int = 16, max_distance: int = 32, path=None):
    """Which learned row each (query i, key j) reads, over T positions.

    Left: Shaw et al. (2018), r_ij = clip(j - i, -k, k) + k: constant along diagonals, and
    every distance beyond k reads the edge row (the flat corners).
    Middle: T5's buckets, bidirectional (encoder): the exact small distances near the
    diagonal, then log-spaced bands; keys after the query use the other half of the buckets.
    Right: T5's causal buckets (decoder): every future key (j > i) reads bucket 0.

    Inputs: T positions; clip k; n_buckets; max_distance; path or None.
    Returns: fig, data {"shaw" (T, T) ints in [0, 2k], "t5_bidirectional", "t5_causal" (T, T)
                        ints in [0, n_buckets), "distance" (T, T) = j - i}.
    """
    T = check_int("T", T, low=1)
    clip = check_int("clip", clip, low=0)
    i, j = query_key_positions(T)                             # (T, 1), (1, T)
    distance = np.broadcast_to(j - i, (T, T))                  # (T, T) j - i
    shaw = relative_index(T, T, clip)                          # (T, T)
    both = relative_position_bucket(distance, True, n_buckets, max_distance)    # (T, T)
    causal = relative_position_bucket(distance, False, n_buckets, max_distance)  # (T, T)
    fig, axes = new_figure(18, 5.5, 1, 3)
    panels = [(shaw, f"Shaw: row clip(j - i, -{clip}, {clip}) + {clip}", "table row", 2 * clip + 1),
              (both, f"T5 buckets, bidirectional ({n_buckets}, max distance {max_distance})", "bucket",
               n_buckets),
              (causal, f"T5 buckets, causal ({n_buckets}, max distance {max_distance})", "bucket", n_buckets)]
    for ax, (values, title, label, n) in zip(axes[0], panels):
        heatmap(ax, values, title=title, xlabel="key position j", ylabel="query position i",
                colorbar_label=label, cmap="viridis", vmin=-0.5, vmax=n - 0.5)
    save(fig, path)
    return fig, {"shaw": shaw, "t5_bidirectional": both, "t5_causal": causal, "distance": distance}
