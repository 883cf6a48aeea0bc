"""Rotary position embedding, RoPE (Su et al. 2021, RoFormer).

The coordinates of a query or key at position m are taken in pairs (a, b), and
pair j is rotated by the angle m·θ_j:

    θ_j = base^(-2j/D),   j = 0 .. D/2 - 1,   m = (offset + t) / scale
    y_a = x_a cos(mθ_j) - x_b sin(mθ_j)
    y_b = x_a sin(mθ_j) + x_b cos(mθ_j)

Pairs: ``layout="interleaved"`` takes (a, b) = (2j, 2j + 1), as the paper does;
``layout="half"`` takes (a, b) = (j, j + D/2), as GPT-NeoX and the Hugging Face
LLaMA checkpoints do. The two differ only by a fixed permutation of the head dim.

Why it encodes position: rotations compose, R(m)ᵀ R(n) = R(n - m), so the score
⟨R(m) q, R(n) k⟩ = ⟨q, R(n - m) k⟩ depends on the positions only through m - n.
``offset`` is the number of positions already in a KV cache, so new tokens are
rotated by their absolute positions.

Position interpolation (Chen et al. 2023; kaiokendev's "SuperHOT"): a model trained
on positions 0 .. L-1 meets angles it never saw at positions >= L. With ``scale``
s > 1 every position is divided by s before it is rotated, m = t / s, so positions
0 .. sL - 1 map into the trained range [0, L): a context s times longer, read at
s times finer angular steps. Scale 1 is plain RoPE; position s·m with scale s gets
exactly the rotation of position m with scale 1.

Backward: the rotation is linear and orthogonal, so dx = R(m)ᵀ dy, the rotation
by -mθ_j:
    dx_a =  dy_a cos(mθ_j) + dy_b sin(mθ_j)
    dx_b = -dy_a sin(mθ_j) + dy_b cos(mθ_j)
"""
from __future__ import annotations

from typing import NamedTuple

from ..backend import get_xp
from ..validate import check_choice, check_dtype_like, check_float, check_int, check_ndim, check_number

LAYOUTS = ("interleaved", "half")


class RopeCache(NamedTuple):
    # Stored: the cos/sin tables, (T, D/2) each, small. Not stored: x: the map is
    # linear, so its backward needs the angles only.
    cos: object      # (T, D/2) cos(mθ_j)
    sin: object      # (T, D/2) sin(mθ_j)
    layout: str      # "interleaved" pairs (2j, 2j+1) or "half" pairs (j, j + D/2)
    x_shape: tuple   # (B, H, T, D) the input's shape, which dy's must match


def rope_forward(x, offset: int = 0, base: float = 10000.0, layout: str = "interleaved",
                 scale: float = 1.0):
    """Rotate every pair of x's head dim by its position's angle.

    Inputs: x (B, H, T, D), D even; offset the position of x[:, :, 0] (>= 0);
            base of the frequencies θ_j = base^(-2j/D); layout "interleaved" or "half";
            scale > 0, position interpolation: position t is rotated as t / scale.
    Returns: y (B, H, T, D) a fresh C-contiguous array, RopeCache.
    """
    check_ndim("x", x, 4, "(B, H, T, D)")
    check_float("x", x)
    T, D = x.shape[2], x.shape[3]
    if D % 2:
        raise ValueError("x: RoPE rotates pairs, so the head dim D must be even, "
                         f"got shape {tuple(x.shape)}")
    offset = check_int("offset", offset, low=0)
    base = check_number("base", base, low=0.0, low_open=True, finite=True)
    check_choice("layout", layout, LAYOUTS)
    scale = check_number("scale", scale, low=0.0, low_open=True, finite=True)
    xp = get_xp(x)
    cos, sin = _tables(xp, T, D, offset, base, x.dtype, scale)  # (T, D/2) each
    y = xp.empty(x.shape, dtype=x.dtype)                   # (B, H, T, D)
    x_a, x_b = _pairs(x, layout)                           # (B, H, T, D/2) views
    y_a, y_b = _pairs(y, layout)
    tmp = xp.empty(x_a.shape, dtype=x.dtype)               # (B, H, T, D/2) one scratch buffer, reused
    xp.multiply(x_a, cos, out=y_a)                         # y_a = x_a cos - x_b sin
    y_a -= xp.multiply(x_b, sin, out=tmp)
    xp.multiply(x_a, sin, out=y_b)                         # y_b = x_a sin + x_b cos
    y_b += xp.multiply(x_b, cos, out=tmp)
    return y, RopeCache(cos, sin, layout, tuple(x.shape))


def rope_backward(dy, cache: RopeCache):
    """dx = the rotation of dy by -mθ_j.

    Inputs: dy (B, H', T, D), the cache: the forward output's gradient, or that of its first
            or last H' <= H heads (attention rotates q and k in one call and reverses them apart).
    Returns: dx (B, H', T, D).
    """
    cos, sin, layout, x_shape = cache
    check_float("dy", dy)
    B, H, T, D = x_shape
    shape = tuple(dy.shape)
    if len(shape) != 4 or (shape[0], shape[2], shape[3]) != (B, T, D) or not (0 < shape[1] <= H or shape == x_shape):
        raise ValueError(f"dy: expected shape ({B}, H', {T}, {D}) with 0 < H' <= {H} (the forward output's "
                         f"{tuple(x_shape)}, or some of its heads), got {shape}")
    check_dtype_like("dy", dy, cos, "the forward output")     # no silent promotion
    xp = get_xp(dy)
    dx = xp.empty(dy.shape, dtype=dy.dtype)                # (B, H, T, D)
    dy_a, dy_b = _pairs(dy, layout)                        # (B, H, T, D/2) views
    dx_a, dx_b = _pairs(dx, layout)
    tmp = xp.empty(dy_a.shape, dtype=dy.dtype)             # (B, H, T, D/2) one scratch buffer, reused
    xp.multiply(dy_a, cos, out=dx_a)                       # dx_a = dy_a cos + dy_b sin
    dx_a += xp.multiply(dy_b, sin, out=tmp)                #   reverses: y_a = x_a cos - x_b sin, y_b = x_a sin + x_b cos
    xp.multiply(dy_b, cos, out=dx_b)                       # dx_b = -dy_a sin + dy_b cos
    dx_b -= xp.multiply(dy_a, sin, out=tmp)                #   reverses: the same two lines (Rᵀ: the rotation by -mθ_j)
    return dx


def _tables(xp, T: int, D: int, offset: int, base: float, dtype, scale: float = 1.0):
    """cos(mθ_j), sin(mθ_j) for m = (offset .. offset + T - 1) / scale: two (T, D/2) arrays in ``dtype``.

    The angles are computed in float64 and rounded once: m·θ_j reaches thousands of
    radians, where float32 angles would lose the low digits of the rotation.
    """
    m = xp.arange(offset, offset + T, dtype=xp.float64)    # (T,) absolute positions
    if scale != 1.0:
        m /= scale                                         # (T,) interpolated positions t / s
    theta = base ** (-xp.arange(0, D, 2, dtype=xp.float64) / D)  # (D/2,) θ_j = base^(-2j/D)
    angle = m[:, None] * theta[None, :]                    # (T, D/2)
    return xp.cos(angle).astype(dtype), xp.sin(angle).astype(dtype)


def _pairs(x, layout: str):
    """The two halves (x_a, x_b) of every rotated pair, as views of x."""
    if layout == "interleaved":
        return x[..., 0::2], x[..., 1::2]                  # (2j, 2j + 1)
    half = x.shape[-1] // 2
    return x[..., :half], x[..., half:]                    # (j, j + D/2)
