"""layernorm: y = (x - μ) / √(σ² + eps) ⊙ gamma + beta over the last axis, and (dx, dgamma, dbeta)."""
from __future__ import annotations

import numpy as np

from ..assignment import Assignment, Mistake, cases, pair
from ..graded import Case
from . import L3
from ._draw import any_leading, shape_bct, small_rows
from ._variants import _g, _rows, _sub, _x


# ------------------------------------------------------------------ the graded inputs
def draw(rng) -> Case:
    """x (B, T, C) with C >= 3: at C = 2 every row normalises to (-1, +1) whatever x is, so dx is only
    eps's trace, and in float32 its rounding, which no two right formulas share."""
    B, T, C = shape_bct(rng)
    x = rng.standard_normal((B, T, max(C, 3)))
    C = x.shape[-1]
    return Case({"x": x, "gamma": 1 + 0.5 * rng.standard_normal(C), "beta": rng.standard_normal(C)})


# ------------------------------------------------------------------ the catalogue
def _layernorm(inp, *, ddof=0, eps_outside=False, root=np.sqrt):
    x, gamma = _x(inp), _x(inp, "gamma")
    beta = _x(inp, "beta") if "beta" in inp else 0.0
    eps = float(inp.get("eps", 1e-5))
    mu = x.mean(-1, keepdims=True)
    var = x.var(-1, keepdims=True, ddof=ddof)
    xhat = (x - mu) / (root(var) + eps) if eps_outside else (x - mu) / root(var + eps)
    return {"out": xhat * gamma + beta}


def _layernorm_backwards(inp):
    x, gamma, dy = _x(inp), _x(inp, "gamma"), _g(inp)
    eps = float(inp.get("eps", 1e-5))
    mu = x.mean(-1, keepdims=True)
    rstd = 1 / np.sqrt(x.var(-1, keepdims=True) + eps)
    xhat = (x - mu) * rstd
    dxhat = dy * gamma
    m1 = dxhat.mean(-1, keepdims=True)
    m2 = (dxhat * xhat).mean(-1, keepdims=True)
    return {"no-means": {"dx": dxhat * rstd},
            "no-mean": {"dx": rstd * (dxhat - xhat * m2)},
            "no-xhat-mean": {"dx": rstd * (dxhat - m1)},
            "no-gamma": {"dx": rstd * (dy - dy.mean(-1, keepdims=True) - xhat * (dy * xhat).mean(-1, keepdims=True))},
            "dgamma-no-xhat": {"dgamma": _rows(dy).sum(0)},
            "dgamma-x": {"dgamma": _rows(dy * x).sum(0)},
            "mean-params": {"dgamma": _rows(dy * xhat).mean(0), "dbeta": _rows(dy).mean(0)},
            "axes-01": {"dgamma": (dy * xhat).sum(axis=(0, 1)), "dbeta": dy.sum(axis=(0, 1))}
            if x.ndim != 3 else {},
            "signs": [{"dx": rstd * (dxhat + a * m1 + b * xhat * m2)}          # a family: either sign,
                      for a, b in ((1, -1), (-1, 1), (1, 1))]}                 # or both, flipped


MISTAKES = (
    Mistake("layernorm", "layernorm-unbiased-variance", ("out",),
            "the variance is the unbiased one (divided by C - 1): LayerNorm uses the biased variance, "
            "mean((x - μ)²) over the C features",
            lambda inp: _layernorm(inp, ddof=1)),
    Mistake("layernorm", "layernorm-eps-outside-sqrt", ("out",),
            "eps is added outside the square root: xhat = (x - μ) / √(σ² + eps)",
            lambda inp: _layernorm(inp, eps_outside=True)),
    Mistake("layernorm", "layernorm-no-sqrt", ("out",),
            "x - μ is divided by the variance: divide by the standard deviation, xhat = (x - μ) / √(σ² + eps)",
            lambda inp: _layernorm(inp, root=lambda v: v)),
    Mistake("layernorm", "layernorm-not-scaled", ("out",),
            "x is centred but not divided by its standard deviation: xhat = (x - μ) / √(σ² + eps)",
            lambda inp: {"out": (_x(inp) - _x(inp).mean(-1, keepdims=True)) * _x(inp, "gamma")
                         + (_x(inp, "beta") if "beta" in inp else 0.0)}),
    Mistake("layernorm", "layernorm-no-mean-terms", ("dx",),
            "dx = dxhat · rstd treats μ and σ as constants: both mean terms are missing, "
            "dx = rstd · (dxhat - mean(dxhat) - xhat ⊙ mean(dxhat ⊙ xhat))",
            _sub(_layernorm_backwards, "no-means")),
    Mistake("layernorm", "layernorm-no-mean-dxhat", ("dx",),
            "dx misses the term - mean(dxhat) (the gradient through μ): "
            "dx = rstd · (dxhat - mean(dxhat) - xhat ⊙ mean(dxhat ⊙ xhat))",
            _sub(_layernorm_backwards, "no-mean")),
    Mistake("layernorm", "layernorm-no-xhat-mean", ("dx",),
            "dx misses the term - xhat ⊙ mean(dxhat ⊙ xhat) (the gradient through σ²): "
            "dx = rstd · (dxhat - mean(dxhat) - xhat ⊙ mean(dxhat ⊙ xhat))",
            _sub(_layernorm_backwards, "no-xhat-mean")),
    Mistake("layernorm", "layernorm-mean-term-sign", ("dx",),
            "a mean term of dx has the wrong sign: both are subtracted, "
            "dx = rstd · (dxhat - mean(dxhat) - xhat ⊙ mean(dxhat ⊙ xhat))",
            _sub(_layernorm_backwards, "signs")),
    Mistake("layernorm", "layernorm-dx-no-gamma", ("dx",),
            "dx forgets gamma: the gradient reaching xhat is dxhat = dy ⊙ gamma",
            _sub(_layernorm_backwards, "no-gamma")),
    Mistake("layernorm", "layernorm-dgamma-no-xhat", ("dgamma",),
            "dgamma = Σ dy misses xhat: y = xhat ⊙ gamma + beta gives dgamma = Σ_rows dy ⊙ xhat",
            _sub(_layernorm_backwards, "dgamma-no-xhat")),
    Mistake("layernorm", "layernorm-dgamma-x", ("dgamma",),
            "dgamma uses x where xhat belongs: dgamma = Σ_rows dy ⊙ xhat (the normalised input)",
            _sub(_layernorm_backwards, "dgamma-x")),
    Mistake("layernorm", "layernorm-dgamma-fixed-axes", ("dgamma", "dbeta"),
            "dgamma/dbeta are summed over axes (0, 1), which are all the leading axes only when x is (B, T, C): "
            "x may have any leading axes, so sum over every axis but the last, e.g. "
            "(dy * xhat).reshape(-1, C).sum(0) or .sum(axis=tuple(range(x.ndim - 1)))",
            _sub(_layernorm_backwards, "axes-01")),
    Mistake("layernorm", "layernorm-params-averaged", ("dgamma", "dbeta"),
            "dgamma/dbeta are averaged over the rows: parameters shared by every row get the SUM of the "
            "rows' gradients",
            _sub(_layernorm_backwards, "mean-params")),
)


ASSIGNMENT = Assignment(
    id="layernorm", title="LayerNorm", lecture=L3, points=10,
    targets=("functional.norm:layernorm_forward", "functional.norm:layernorm_backward"),
    cases=cases(pair("functional.norm", "layernorm"), ("out", "dx", "dgamma", "dbeta"),
                ("layernorm: x (B, T, C)", draw),
                ("layernorm: any leading axes, x (N, C) to (A, B, T, U, C)", any_leading(draw)),
                ("layernorm: rows of variance near eps", small_rows(draw)), float32="layernorm"),
    mistakes=MISTAKES,
)
