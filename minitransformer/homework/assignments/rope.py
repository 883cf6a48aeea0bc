"""rope: the rotary position embedding, pairs rotated by m·θ_j (two layouts, offset, scale), and its inverse."""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from ...functional.rope import _pairs, rope_backward, rope_forward
from ..assignment import Assignment, Mistake, cases, pair
from ..graded import Case
from . import L4
from ._draw import bhtd
from ._variants import _g, _x


# ------------------------------------------------------------------ the graded inputs
def draw(rng, layout="interleaved", scale=1.0) -> Case:
    case = bhtd(rng)
    B, H, T, D = case.inputs["x"].shape
    if T < 2:                                                # T > 1: each position its own angle, offset + t
        case = replace(case, inputs={"x": rng.standard_normal((B, H, int(rng.integers(2, 5)), D))})
    offset = int(rng.integers(1, 5))                         # > 0: an ignored offset shows
    return replace(case, kwargs={"offset": offset, "layout": layout, "scale": scale})


# ------------------------------------------------------------------ the catalogue
def _rope_args(inp, **change):
    args = {"offset": inp.get("offset", 0), "base": inp.get("base", 10000.0),
            "layout": inp.get("layout", "interleaved"), "scale": inp.get("scale", 1.0)}
    args.update(change)
    return args


def _rope_pair(inp, **change):
    x, dy = _x(inp), _g(inp)
    args = _rope_args(inp, **change)
    y, cache = rope_forward(x, **args)
    return {"out": y, "dx": rope_backward(dy, cache)}


def _rope_other_layout(inp):
    return _rope_pair(inp, layout="half" if _rope_args(inp)["layout"] == "interleaved" else "interleaved")


def _rope_direction(inp):
    """Rotated by -mθ in the forward, +mθ in the backward: the two directions swapped."""
    x, dy = _x(inp), _g(inp)
    _, cache = rope_forward(x, **_rope_args(inp))
    return {"out": rope_backward(x, cache), "dx": rope_forward(dy, **_rope_args(inp))[0]}


def _rope_backward_forward(inp):
    return {"dx": rope_forward(_g(inp), **_rope_args(inp))[0]}


# the rotation written out: (y_a, y_b) = (c0 a cos + c1 b sin, c2 a sin + c3 b cos), a = x_a, b = x_b
_FORWARD, _BACKWARD = (1, -1, 1, 1), (1, 1, -1, 1)        # R(mθ) and Rᵀ = R(-mθ)


def _rope_tables(inp, *, theta=None, positions=None):
    """cos, sin (T, D/2) of m·θ_j; theta (j, D, base) -> θ_j and positions (t, offset, scale) -> m
    replace the reference's base^(-2j/D) and (offset + t) / scale."""
    args, x = _rope_args(inp), _x(inp)
    T, D = x.shape[2], x.shape[3]
    t, j = np.arange(T, dtype=np.float64), np.arange(D // 2, dtype=np.float64)
    m = (args["offset"] + t) / args["scale"] if positions is None else positions(t, args["offset"], args["scale"])
    th = args["base"] ** (-2 * j / D) if theta is None else theta(j, D, args["base"])
    angle = m[:, None] * th[None, :]                        # (T, D/2)
    return np.cos(angle), np.sin(angle)


def _rotate(a, cos, sin, layout, c):
    pa, pb = _pairs(a, layout)                              # (B, H, T, D/2) views, the reference's pairing
    out = np.empty_like(a)
    oa, ob = _pairs(out, layout)
    oa[...] = c[0] * pa * cos + c[1] * pb * sin
    ob[...] = c[2] * pa * sin + c[3] * pb * cos
    return out


def _rope_with(inp, cos, sin, forward=_FORWARD, backward=_BACKWARD, backward_tables=None):
    """{out, dx} of a rotation with these tables and these signs (the backward's tables: the forward's)."""
    layout = _rope_args(inp)["layout"]
    bcos, bsin = backward_tables or (cos, sin)
    return {"out": _rotate(_x(inp), cos, sin, layout, forward), "dx": _rotate(_g(inp), bcos, bsin, layout, backward)}


def _one_line_slips(c):
    """The signs c with one line of the rotation written wrong (a term dropped or its sign flipped, or
    both terms changed), the other line right: 7 for each line."""
    return [c[:line] + (p, q) + c[line + 2:] for line in (0, 2) for p in (-1, 0, 1) for q in (-1, 0, 1)
            if (p, q) != (0, 0) and c[:line] + (p, q) + c[line + 2:] != c]


def _rope_term(inp):
    cos, sin = _rope_tables(inp)
    return [{"out": _rope_with(inp, cos, sin, forward=c)["out"]} for c in _one_line_slips(_FORWARD)]


def _rope_backward_term(inp):
    cos, sin = _rope_tables(inp)
    return [{"dx": _rope_with(inp, cos, sin, backward=c)["dx"]} for c in _one_line_slips(_BACKWARD)]


def _rope_cos_sin_swapped(inp):
    cos, sin = _rope_tables(inp)
    return [_rope_with(inp, sin, cos),                                       # the tables swapped
            {"dx": _rope_with(inp, cos, sin, backward_tables=(sin, cos))["dx"]}]  # the backward reads them swapped


def _rope_theta(inp):
    """θ_j's exponent slipped: base^(-j/D), base^(-2j/(D/2)), base^(-2j), base^(-(2j+1)/D), θ_j = 1."""
    slips = (lambda j, D, b: b ** (-j / D), lambda j, D, b: b ** (-4 * j / D), lambda j, D, b: b ** (-2 * j),
             lambda j, D, b: b ** (-(2 * j + 1) / D), lambda j, D, b: np.ones_like(j))
    return [_rope_with(inp, *_rope_tables(inp, theta=th)) for th in slips]


def _rope_frequency_inverted(inp):
    return _rope_with(inp, *_rope_tables(inp, theta=lambda j, D, b: b ** (2 * j / D)))


def _rope_scale_multiplied(inp):
    if _rope_args(inp)["scale"] == 1.0:
        return {}
    return _rope_with(inp, *_rope_tables(inp, positions=lambda t, offset, scale: (offset + t) * scale))


MISTAKES = (
    Mistake("rope", "rope-direction", ("out", "dx"),
            "the rotation runs the wrong way: y_a = x_a cos(mθ) - x_b sin(mθ), y_b = x_a sin(mθ) + x_b cos(mθ) "
            "(and the backward rotates by -mθ)",
            _rope_direction),
    Mistake("rope", "rope-backward-forward-rotation", ("dx",),
            "dx rotates dy FORWARD by mθ: the inverse of a rotation is its transpose, the rotation by -mθ",
            _rope_backward_forward),
    Mistake("rope", "rope-layout-ignored", ("out", "dx"),
            "the layout is ignored: \"interleaved\" pairs (2j, 2j+1), \"half\" pairs (j, j + D/2)",
            _rope_other_layout),
    Mistake("rope", "rope-scale-ignored", ("out", "dx"),
            "`scale` is ignored: position interpolation rotates position t by the angle (t / scale)·θ_j",
            lambda inp: _rope_pair(inp, scale=1.0) if _rope_args(inp)["scale"] != 1.0 else {}),
    Mistake("rope", "rope-offset-ignored", ("out", "dx"),
            "`offset` is ignored: x[:, :, t] sits at position offset + t",
            lambda inp: _rope_pair(inp, offset=0) if _rope_args(inp)["offset"] else {}),
    Mistake("rope", "rope-theta-exponent", ("out", "dx"),
            "the frequencies' exponent is wrong (base^(-j/D), base^(-2j/(D/2)), base^(-2j), base^(-(2j+1)/D) "
            "or θ_j = 1): "
            "RoFormer's are θ_j = base^(-2j/D), j = 0 .. D/2 - 1, from 1 down to about 1/base",
            _rope_theta),
    Mistake("rope", "rope-frequency-inverted", ("out", "dx"),
            "the frequencies are base^(+2j/D): θ_j = base^(-2j/D), falling with j from 1 to about 1/base "
            "(the last pairs turn slowest)",
            _rope_frequency_inverted),
    Mistake("rope", "rope-scale-multiplied", ("out", "dx"),
            "the positions are multiplied by `scale`: position interpolation DIVIDES them, m = (offset + t) / scale "
            "(a longer context squeezed into the trained range of angles)",
            _rope_scale_multiplied),
    Mistake("rope", "rope-cos-sin-swapped", ("out", "dx"),
            "cos and sin are swapped (in the tables, or where the backward reads them from the cache): "
            "y_a = x_a cos(mθ) - x_b sin(mθ), y_b = x_a sin(mθ) + x_b cos(mθ)",
            _rope_cos_sin_swapped),
    Mistake("rope", "rope-rotation-term", ("out",),
            "one line of the rotation has a term dropped or a sign wrong: y_a = x_a cos(mθ) - x_b sin(mθ), "
            "y_b = x_a sin(mθ) + x_b cos(mθ), every pair (a, b) of the layout",
            _rope_term),
    Mistake("rope", "rope-backward-rotation-term", ("dx",),
            "one line of the backward's rotation has a term dropped or a sign wrong: "
            "dx_a = dy_a cos(mθ) + dy_b sin(mθ), dx_b = -dy_a sin(mθ) + dy_b cos(mθ) (Rᵀ, the rotation by -mθ)",
            _rope_backward_term),
)


ASSIGNMENT = Assignment(
    id="rope", title="Rotary position embedding (RoPE)", lecture=L4, points=5,
    targets=("functional.rope:rope_forward", "functional.rope:rope_backward", "functional.rope:_tables",
             "functional.rope:_pairs"),
    cases=cases(pair("functional.rope", "rope"), ("out", "dx"),
                ("rope: interleaved pairs, offset > 0", draw),
                ("rope: half-split layout", lambda rng: draw(rng, "half")),
                ("rope: scale 2 (position interpolation)", lambda rng: draw(rng, scale=2.0)), float32="rope"),
    mistakes=MISTAKES,
)
