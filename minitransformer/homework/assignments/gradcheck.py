"""gradcheck: the gradient checker itself, central differences and the relative error (CS231n's exercise).

The student writes gradcheck/numerical.py's two functions, which the package's own checker
(check_pair, check_module) is built on. They are graded on functions whose gradients the
grader knows in closed form: ``Known`` (a tanh layer, a log-sum-exp, an elementwise wave),
whose parameters are drawn from the seed and never leave this process: the student's
``numerical_gradient`` gets ``f`` lent for the call (graded.KnownFunction: in the child each
call of f is a question to the grader, answered with values only), and is compared with the
closed-form gradient, within the grader's tolerance. A student's copy holds f as a table of
its values at x and x ± h e_i (graded.Tabulated), the points central differences visit.

The relative error the handout defines is the grader's own measure, printed in every report
(homework/diagnose.py computes it in every copy, for the local check): its formula is public;
writing it is the exercise.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..assignment import Assignment, Mistake, cases, function
from ..graded import Case, KnownFunction, Tabulated
from . import L3
from ._variants import _f64

NUMERICAL, RELATIVE = "gradcheck.numerical:numerical_gradient", "gradcheck.numerical:relative_error"
# The step of the graded cases: on these functions a central difference is off the closed form by at
# most ~2e-8 (300 draws each: under the tolerance 1e-7), a one-sided one by 2.6e-6 or more (a bug, and
# far enough from the reference for its catalogue entry to name it).
H = 1e-4


# ------------------------------------------------------------------ functions whose gradients the grader knows
@dataclass
class Known(KnownFunction):
    """f(x) = forward(x) and the gradient of L = Σ f(x) ⊙ df, both in closed form; the case's x and h
    fix the points a copy's table holds (x and x ± h e_i at ``coords``)."""
    forward: Callable                # x -> f(x)
    gradient: Callable               # (x, df) -> dL/dx
    x: np.ndarray
    h: float
    coords: np.ndarray | None = None

    def __call__(self, x):
        x = np.asarray(x, dtype=np.float64)
        if x.shape != self.x.shape:
            raise ValueError(f"f takes x of shape {self.x.shape}, got {x.shape}")
        return self.forward(x)

    def tabulated(self) -> Tabulated:
        points = [self.x]
        for i in range(self.x.size) if self.coords is None else self.coords:
            for step in (self.h, -self.h):
                p = self.x.copy()
                p.reshape(-1)[i] = float(self.x.reshape(-1)[i]) + step
                points.append(p)
        return Tabulated(np.stack(points), np.stack([np.asarray(self(p)) for p in points]), self.h)


def tanh_layer(W, b):
    """f(x) = tanh(x W + b), x (B, d_in) -> (B, d_out); dL/dx = (df ⊙ (1 - f²)) Wᵀ."""
    forward = lambda x: np.tanh(x @ W + b)                                   # noqa: E731
    return forward, lambda x, df: (df * (1 - forward(x) ** 2)) @ W.T


def log_sum_exp():
    """f(x) = log Σ exp(x) over every entry, a number; dL/dx = df · softmax(x)."""
    def forward(x):
        m = np.max(x)
        return m + np.log(np.sum(np.exp(x - m)))
    return forward, lambda x, df: df * np.exp(x - forward(x))


def wave(a):
    """f(x) = sin(a ⊙ x) ⊙ x, elementwise (a along the last axis); dL/dx = df ⊙ (a x cos(a x) + sin(a x))."""
    return (lambda x: np.sin(a * x) * x), (lambda x, df: df * (a * x * np.cos(a * x) + np.sin(a * x)))


def known_gradient(case: Case) -> dict:
    """The expected result of numerical_gradient: the closed-form dL/dx at coords, 0 elsewhere."""
    f, x, df = case.kwargs["f"], case.inputs["x"], case.inputs["df"]
    grad = f.gradient(x, df)
    if case.kwargs.get("coords") is not None:
        kept = np.zeros(x.size, bool)
        kept[case.kwargs["coords"]] = True
        grad = np.where(kept.reshape(x.shape), grad, 0.0)
    return {"out": grad}


# ------------------------------------------------------------------ the graded inputs
def _case(x, df, made, coords=None) -> Case:
    forward, gradient = made
    kwargs = {"f": Known(forward, gradient, x, H, coords), "h": H}
    if coords is not None:
        kwargs["coords"] = coords
    return Case({"x": x, "df": df}, kwargs)


def draw_layer(rng) -> Case:
    """f(x) = tanh(x W + b): x (B, d_in), f(x) (B, d_out), d_out != d_in."""
    B, d_in = int(rng.integers(2, 4)), int(rng.integers(2, 5))
    d_out = d_in + int(rng.integers(1, 3))
    x = rng.standard_normal((B, d_in))
    made = tanh_layer(0.7 * rng.standard_normal((d_in, d_out)), rng.standard_normal(d_out))
    return _case(x, rng.standard_normal((B, d_out)), made)


def draw_scalar(rng) -> Case:
    """f(x) = log Σ exp(x): a number, so df is a number (0-d)."""
    x = rng.standard_normal(int(rng.integers(3, 7)))
    return _case(x, np.asarray(rng.standard_normal()), log_sum_exp())


def draw_sample(rng) -> Case:
    """f(x) = sin(a ⊙ x) ⊙ x on x (B, T, C), and coords: 8 of its entries."""
    B, T, C = int(rng.integers(2, 4)), int(rng.integers(2, 5)), int(rng.integers(3, 7))
    x = rng.standard_normal((B, T, C))
    coords = np.sort(rng.choice(x.size, size=8, replace=False))
    return _case(x, rng.standard_normal(x.shape), wave(1 + rng.random(C)), coords)


def draw_relative(rng, *, larger=1.0, zero=False) -> Case:
    """a (B, n) and n = larger · a + a small difference: n's scale ``larger`` times a's."""
    B, n = int(rng.integers(2, 4)), int(rng.integers(3, 7))
    a = rng.standard_normal((B, n))
    if zero:
        return Case({"a": np.zeros((B, n)), "n": np.zeros((B, n))})
    return Case({"a": a, "n": larger * a + 1e-3 * rng.standard_normal((B, n))})


# ------------------------------------------------------------------ the catalogue
def _differences(inp, *, left=1.0, right=1.0, divide=2.0, upstream=True, every=False):
    """The numerical gradient with one thing changed, computed with the case's f: the points
    x + right·h e_i and x - left·h e_i, divided by divide·h (the central difference is 1, 1, 2)."""
    f, x, h = inp["f"], _f64(inp["x"]), float(inp["h"])
    df = _f64(inp["df"]) if upstream else 1.0
    coords = inp.get("coords")
    dx = np.zeros(x.shape)
    for i in range(x.size) if coords is None or every else coords:
        plus, minus = x.copy(), x.copy()
        plus.reshape(-1)[i] += right * h
        minus.reshape(-1)[i] -= left * h
        dx.reshape(-1)[i] = float(np.sum((f(plus) - f(minus)) * df)) / (divide * h)
    return {"out": dx}


def _one_sided(inp):
    return [_differences(inp, left=0.0, divide=1.0), _differences(inp, right=0.0, divide=1.0)]


def _relative(inp, denominator, *, per_entry=False):
    """The relative error with its denominator written otherwise (0/0 is NaN here: it explains nothing)."""
    a, n = _f64(inp["a"]), _f64(inp["n"])
    with np.errstate(divide="ignore", invalid="ignore"):
        if per_entry:
            return {"out": np.asarray(np.max(np.abs(a - n) / np.maximum(np.abs(a), np.abs(n))))}
        return {"out": np.asarray(np.max(np.abs(a - n)) / denominator(np.max(np.abs(a)), np.max(np.abs(n))))}


MISTAKES = (
    Mistake("numerical_gradient", "gradcheck-one-sided", ("out",),
            "a one-sided difference, (f(x + h e_i) - f(x)) / h or (f(x) - f(x - h e_i)) / h: its error is O(h), "
            "the central difference's O(h²): dL/dx_i ≈ Σ (f(x + h e_i) - f(x - h e_i)) ⊙ df / 2h",
            _one_sided),
    Mistake("numerical_gradient", "gradcheck-not-halved", ("out",),
            "the central difference is divided by h: x + h e_i and x - h e_i are 2h apart, so "
            "dL/dx_i ≈ Σ (f(x + h e_i) - f(x - h e_i)) ⊙ df / 2h",
            lambda inp: _differences(inp, divide=1.0)),
    Mistake("numerical_gradient", "gradcheck-no-upstream", ("out",),
            "df is left out: L = Σ f(x) ⊙ df, so the difference f(x + h e_i) - f(x - h e_i) is multiplied by df "
            "before the sum",
            lambda inp: _differences(inp, upstream=False) if np.ndim(inp["df"]) else {}),
    Mistake("numerical_gradient", "gradcheck-coords-ignored", ("out",),
            "every entry is differentiated: with coords given, only those entries of x are (the others stay 0 "
            "in dx: a large tensor is checked on a sample)",
            lambda inp: _differences(inp, every=True) if inp.get("coords") is not None else {}),
    Mistake("relative_error", "relative-error-one-scale", ("out",),
            "divided by one gradient's scale: the denominator is the larger of the two, "
            "max(max|a|, max|n|, tiny), so the relative error is the same whichever side is the estimate",
            lambda inp: [_relative(inp, lambda sa, sn: max(sa, 1e-300)),
                         _relative(inp, lambda sa, sn: max(sn, 1e-300))]),
    Mistake("relative_error", "relative-error-sum-of-scales", ("out",),
            "divided by the sum of the two scales, max|a| + max|n|: the denominator is the larger of them, "
            "max(max|a|, max|n|, tiny)",
            lambda inp: _relative(inp, lambda sa, sn: sa + sn)),
    Mistake("relative_error", "relative-error-per-entry", ("out",),
            "measured entry by entry, max_i |a_i - n_i| / max(|a_i|, |n_i|): the relative error is per tensor, "
            "max|a - n| over the larger tensor's max (an entry near 0 would make a right gradient look wrong)",
            lambda inp: _relative(inp, None, per_entry=True)),
)

ASSIGNMENT = Assignment(
    id="gradcheck", title="The gradient checker: central differences and the relative error", lecture=L3, points=5,
    targets=(NUMERICAL, RELATIVE),
    cases=cases(function(NUMERICAL), ("out",),
                ("numerical_gradient: f(x) = tanh(x W + b), x (B, d_in)", draw_layer),
                ("numerical_gradient: f(x) a number (log Σ exp x), df a number", draw_scalar),
                ("numerical_gradient: 8 entries of x (B, T, C) (coords)", draw_sample), expect=known_gradient)
    + cases(function(RELATIVE), ("out",),
            ("relative_error: a gradient and an estimate close to it", draw_relative),
            ("relative_error: the estimate twice as large (the larger scale divides)",
             lambda rng: draw_relative(rng, larger=2.0)),
            ("relative_error: both zero (0, never 0/0)", lambda rng: draw_relative(rng, zero=True))),
    mistakes=MISTAKES,
    handout="f is a function the grader knows (its gradient too), lent to your code for the call: call it as "
            "often as you need, with x changed at one entry (in place, then put back exactly, or in a copy); "
            "the graded cases compare your dx with f's true gradient. In this copy f is known only at x and at "
            "x ± h e_i (the public example's table), the points central differences visit. Once both functions "
            "work, this copy's gradient checker runs on them: `python -m minitransformer gradcheck` and the "
            "numerical rows of every `homework check` report call check_pair and check_module, which call yours.",
)
