"""linear: y = x W + b over any leading axes, and its backward (dx, dW, db)."""
from __future__ import annotations

from dataclasses import replace

from ..assignment import Assignment, Mistake, cases, pair
from ..graded import Case
from . import L2
from ._draw import any_leading, shape_bct
from ._variants import _g, _rows, _x


# ------------------------------------------------------------------ the graded inputs
def draw(rng) -> Case:
    """x (B, T, d_in), W (d_in, d_out), b (d_out,): d_in != d_out, so a transposed dW has the wrong shape."""
    B, T, d_in = shape_bct(rng)
    d_out = d_in + int(rng.integers(1, 3))
    return Case({"x": rng.standard_normal((B, T, d_in)), "W": rng.standard_normal((d_in, d_out)),
                 "b": rng.standard_normal(d_out)})


def draw_no_bias(rng) -> Case:
    case = draw(rng)
    inputs = dict(case.inputs)
    del inputs["b"]
    return replace(case, inputs=inputs, wrt=("x", "W"))


# ------------------------------------------------------------------ the catalogue
def _linear_mean_grads(inp):
    x, dy = _x(inp), _g(inp)
    N = _rows(x).shape[0]
    return {"dW": _rows(x).T @ _rows(dy) / N, "db": _rows(dy).mean(axis=0)}


def _linear_first_row(inp):
    x, dy = _x(inp), _g(inp)
    if x.ndim < 3 or x.shape[0] < 2:
        return {}
    return {"dW": _rows(x[0]).T @ _rows(dy[0])}



MISTAKES = (
    Mistake("linear", "linear-no-bias", ("out",),
            "out is x W without the bias: add b to every row (it broadcasts over the leading axes)",
            lambda inp: {"out": _x(inp) @ _x(inp, "W")} if inp.get("b") is not None else {}),
    Mistake("linear", "linear-grad-averaged", ("dW", "db"),
            "the gradient is averaged over the rows (divided by their number B·T): a parameter used by "
            "every row gets the SUM of the rows' gradients",
            _linear_mean_grads),
    Mistake("linear", "linear-first-batch-only", ("dW",),
            "dW uses only the first batch element: flatten x and dy to (B·T, d) rows before x.T @ dy",
            _linear_first_row),
)


ASSIGNMENT = Assignment(
    id="linear", title="Linear layer y = x W + b", lecture=L2, points=5,
    targets=("functional.linear:linear_forward", "functional.linear:linear_backward"),
    cases=cases(pair("functional.linear", "linear"), ("out", "dx", "dW", "db"),
                ("linear: x (B, T, d_in), d_in != d_out", draw),
                ("linear: no bias (b=None)", draw_no_bias),
                ("linear: any leading axes, x (N, d_in) to (A, B, T, U, d_in)", any_leading(draw)),
                float32="linear"),
    mistakes=MISTAKES,
)
