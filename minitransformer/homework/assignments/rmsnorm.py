"""rmsnorm: y = x / √(mean(x²) + eps) ⊙ gamma over the last axis, and (dx, dgamma)."""
from __future__ import annotations

import numpy as np

from ..assignment import Assignment, Mistake, cases, pair
from ..graded import Case
from . import L6
from ._draw import any_leading, shape_bct, small_rows
from ._variants import _g, _rows, _sub, _x
from .layernorm import _layernorm


# ------------------------------------------------------------------ the graded inputs
def draw(rng) -> Case:
    x = rng.standard_normal(shape_bct(rng))
    return Case({"x": x, "gamma": 1 + 0.5 * rng.standard_normal(x.shape[-1])})


# ------------------------------------------------------------------ the catalogue
def _rmsnorm(inp, *, eps_outside=False, sum_squares=False, root=np.sqrt):
    x, gamma = _x(inp), _x(inp, "gamma")
    eps = float(inp.get("eps", 1e-6))
    ms = (x * x).sum(-1, keepdims=True) if sum_squares else (x * x).mean(-1, keepdims=True)
    rms = root(ms) + eps if eps_outside else root(ms + eps)
    return {"out": x / rms * gamma}


def _rmsnorm_backwards(inp):
    x, gamma, dy = _x(inp), _x(inp, "gamma"), _g(inp)
    eps = float(inp.get("eps", 1e-6))
    rstd = 1 / np.sqrt((x * x).mean(-1, keepdims=True) + eps)
    xhat = x * rstd
    dxhat = dy * gamma
    return {"const": {"dx": dxhat * rstd},
            "sign": {"dx": rstd * (dxhat + xhat * (dxhat * xhat).mean(-1, keepdims=True))},
            "no-gamma": {"dx": rstd * (dy - xhat * (dy * xhat).mean(-1, keepdims=True))},
            "sum": {"dx": rstd * (dxhat - xhat * (dxhat * xhat).sum(-1, keepdims=True))},
            "dgamma-x": {"dgamma": _rows(dy * x).sum(0)},
            "dgamma-no-xhat": {"dgamma": _rows(dy).sum(0)},
            "centred": {"out": _layernorm(dict(inp, eps=eps))["out"]}}


MISTAKES = (
    Mistake("rmsnorm", "rmsnorm-eps-outside-sqrt", ("out",),
            "eps is added outside the square root: rms = √(mean(x²) + eps)",
            lambda inp: _rmsnorm(inp, eps_outside=True)),
    Mistake("rmsnorm", "rmsnorm-sum-of-squares", ("out",),
            "the root is of the SUM of squares: RMSNorm divides by √(MEAN(x²) + eps), the mean over C",
            lambda inp: _rmsnorm(inp, sum_squares=True)),
    Mistake("rmsnorm", "rmsnorm-no-sqrt", ("out",),
            "x is divided by the mean square: divide by its square root, rms = √(mean(x²) + eps)",
            lambda inp: _rmsnorm(inp, root=lambda v: v)),
    Mistake("rmsnorm", "rmsnorm-centred", ("out",),
            "x is centred (its mean subtracted): that is LayerNorm; RMSNorm divides x itself by √(mean(x²) + eps)",
            _sub(_rmsnorm_backwards, "centred")),
    Mistake("rmsnorm", "rmsnorm-rms-constant", ("dx",),
            "dx = dy ⊙ gamma · rstd treats the rms as a constant: it depends on x too, "
            "dx = rstd · (dxhat - xhat ⊙ mean(dxhat ⊙ xhat))",
            _sub(_rmsnorm_backwards, "const")),
    Mistake("rmsnorm", "rmsnorm-mean-term-sign", ("dx",),
            "the term xhat ⊙ mean(dxhat ⊙ xhat) is added: it is subtracted, "
            "dx = rstd · (dxhat - xhat ⊙ mean(dxhat ⊙ xhat))",
            _sub(_rmsnorm_backwards, "sign")),
    Mistake("rmsnorm", "rmsnorm-sum-not-mean", ("dx",),
            "the term xhat ⊙ Σ_c (dxhat ⊙ xhat) is a SUM where the mean belongs: rms averages over the C "
            "features, so dx = rstd · (dxhat - xhat ⊙ mean(dxhat ⊙ xhat)) (the sum divided by C)",
            _sub(_rmsnorm_backwards, "sum")),
    Mistake("rmsnorm", "rmsnorm-dx-no-gamma", ("dx",),
            "dx forgets gamma: the gradient reaching xhat is dxhat = dy ⊙ gamma",
            _sub(_rmsnorm_backwards, "no-gamma")),
    Mistake("rmsnorm", "rmsnorm-dgamma-no-xhat", ("dgamma",),
            "dgamma = Σ dy misses xhat: y = xhat ⊙ gamma gives dgamma = Σ_rows dy ⊙ xhat",
            _sub(_rmsnorm_backwards, "dgamma-no-xhat")),
    Mistake("rmsnorm", "rmsnorm-dgamma-x", ("dgamma",),
            "dgamma uses x where xhat belongs: dgamma = Σ_rows dy ⊙ xhat, xhat = x · rstd",
            _sub(_rmsnorm_backwards, "dgamma-x")),
)


ASSIGNMENT = Assignment(
    id="rmsnorm", title="RMSNorm", lecture=L6, points=5,
    targets=("functional.norm:rmsnorm_forward", "functional.norm:rmsnorm_backward"),
    cases=cases(pair("functional.norm", "rmsnorm"), ("out", "dx", "dgamma"),
                ("rmsnorm: x (B, T, C)", draw),
                ("rmsnorm: any leading axes, x (N, C) to (A, B, T, U, C)", any_leading(draw)),
                ("rmsnorm: rows of mean square near eps", small_rows(draw)), float32="rmsnorm"),
    mistakes=MISTAKES,
)
