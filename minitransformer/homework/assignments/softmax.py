"""softmax: y = softmax(x) over the last axis, and dx = y ⊙ (dy - Σ_j dy_j y_j)."""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..assignment import Assignment, Mistake, cases, pair
from ..graded import Case
from . import L1
from ._draw import scores
from ._variants import _g, _pick, _softmax, _x


# ------------------------------------------------------------------ the graded inputs
def draw_masked(rng) -> Case:
    """Rows with -inf entries (masked scores) and one row entirely -inf: its output is 0, never NaN."""
    B, T, n = int(rng.integers(1, 3)), int(rng.integers(2, 5)), int(rng.integers(3, 7))
    x = 3 * rng.standard_normal((B, T, n))
    hidden = rng.random(x.shape) < 0.3
    hidden[..., 0] = False
    hidden[0, -1, :] = True                                  # a fully masked row
    x[hidden] = -np.inf
    return Case({"x": x}, masked={"out": np.broadcast_to(hidden, x.shape)})


def draw_large(rng) -> Case:
    """Scores around ±1000 (each row shifted): exp overflows to inf above 709 and underflows to 0
    below -745, so only a softmax that subtracts the row max first gives finite probabilities."""
    case = scores(rng)
    x = case.inputs["x"]
    return replace(case, inputs={"x": x + rng.choice([-1000.0, 1000.0], size=x.shape[:-1] + (1,))})


# ------------------------------------------------------------------ the catalogue
def _softmax_backwards(inp):
    x, dy = _x(inp), _g(inp)
    y = _softmax(x)
    return {"no-y": y * (dy - dy.sum(-1, keepdims=True)),
            "mean": y * (dy - (dy * y).mean(-1, keepdims=True)),
            "no-outer-y": dy - (dy * y).sum(-1, keepdims=True),
            "no-sum": y * dy,
            "sign": y * (dy + (dy * y).sum(-1, keepdims=True)),
            "diag": dy * y * (1 - y)}




def _softmax_wrong_axis(inp):
    x = _x(inp)
    return {"out": _softmax(x, axis=-2)} if x.ndim >= 2 else {}



MISTAKES = (
    Mistake("softmax", "softmax-wrong-axis", ("out",),
            "the softmax normalises along the wrong axis: each slice along the last axis (axis=-1) must sum to 1",
            _softmax_wrong_axis),
    Mistake("softmax", "softmax-no-y-in-sum", ("dx",),
            "the sum in dx = y ⊙ (dy - Σ_j dy_j y_j) is missing its y: you summed dy alone",
            _pick(_softmax_backwards, "no-y")),
    Mistake("softmax", "softmax-sum-is-mean", ("dx",),
            "the sum term is a MEAN: dx = y ⊙ (dy - Σ_j dy_j y_j), the sum over the row (not divided by n)",
            _pick(_softmax_backwards, "mean")),
    Mistake("softmax", "softmax-no-outer-y", ("dx",),
            "dx = dy - Σ_j dy_j y_j misses the factor y: dx = y ⊙ (dy - Σ_j dy_j y_j)",
            _pick(_softmax_backwards, "no-outer-y")),
    Mistake("softmax", "softmax-no-sum-term", ("dx",),
            "dx = y ⊙ dy: the term - y ⊙ Σ_j dy_j y_j (from the normalisation) is missing",
            _pick(_softmax_backwards, "no-sum")),
    Mistake("softmax", "softmax-sum-term-sign", ("dx",),
            "the sum term has the wrong sign: dx = y ⊙ (dy - Σ_j dy_j y_j), a minus",
            _pick(_softmax_backwards, "sign")),
    Mistake("softmax", "softmax-diagonal-only", ("dx",),
            "dx = dy ⊙ y(1 - y) keeps only the diagonal of the Jacobian; the off-diagonal entries "
            "-y_i y_j add up to - y ⊙ Σ_j dy_j y_j",
            _pick(_softmax_backwards, "diag")),
)


ASSIGNMENT = Assignment(
    id="softmax", title="Softmax over the last axis", lecture=L1, points=5,
    targets=("functional.softmax:softmax_forward", "functional.softmax:softmax_backward"),
    equivalents=("functional.softmax:softmax_backward_jacobian", "functional.softmax:log_softmax_forward",
                 "functional.softmax:log_softmax_backward"),                   # exp(log_softmax) = softmax
    cases=cases(pair("functional.softmax", "softmax"), ("out", "dx"),
                ("softmax: rows of x (B, T, n)", scores),
                ("softmax: masked (-inf) entries and a fully masked row (0, never NaN)", draw_masked),
                ("softmax: scores near ±1000 (subtract the row max: exp(1000) overflows)", draw_large),
                float32="softmax"),
    mistakes=MISTAKES,
    also_checked=" A row with nothing to attend gives 0, never NaN.",
)
