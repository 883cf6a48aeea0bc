"""The two pieces of math a gradient check rests on: central differences and the relative error.

    dx = numerical_gradient(f, x, df, h)      dL/dx of L = Σ f(x) ⊙ df, entry by entry
    r = relative_error(a, n)                  max |a - n| / max(max |a|, max |n|, tiny)

``check_pair`` and ``check_module`` (gradcheck/__init__.py) put them around a layer: the
analytic gradient ``a`` a backward returns against the numerical one ``n``. They are also
the gradient checker a student writes (the homework's ``gradcheck`` assignment).
"""
from __future__ import annotations

import numpy as np

TINY = 1e-300       # keeps the relative error defined (0) when both gradients are 0


def numerical_gradient(f, x, df, h=1e-6, coords=None):
    """Central differences of L(x) = Σ f(x) ⊙ df with respect to x, one entry at a time:

        dL/dx_i ≈ Σ (f(x + h e_i) - f(x - h e_i)) ⊙ df / 2h

    where e_i is 1 at the i-th entry of x (in C order, x.reshape(-1)[i]) and 0 elsewhere. The
    two values of f are subtracted before the product with df: the entries of f(x) that e_i
    does not reach cancel exactly, so the round-off is of what changed, not of all of L. The
    truncation error is O(h²) (a one-sided difference's is O(h)).

    Inputs:
        f       a function of x alone (the layer's other inputs fixed): an array, or a number
        x       (any shape) float64, C-contiguous; x + h e_i is x with entry i changed, in place
                or in a copy; x holds its own values again when numerical_gradient returns
        df      the upstream gradient, f(x)'s shape (a number when f returns one)
        h       the step
        coords  the flat indices i to differentiate along (default: every entry of x)
    Returns:
        dx      float64, x's shape: dL/dx_i at each i of coords, 0 at the others
    """
    dx = np.zeros(x.shape)                                   # same shape as x
    flat, dx_flat = x.reshape(-1), dx.reshape(-1)            # views: setting flat[i] sets x's entry i
    for i in range(x.size) if coords is None else coords:
        old = float(flat[i])
        flat[i] = old + h                                    # x + h e_i
        plus = f(x)
        flat[i] = old - h                                    # x - h e_i
        minus = f(x)
        flat[i] = old
        dx_flat[i] = float(np.sum((plus - minus) * df)) / (2 * h)
    return dx


def relative_error(a, n) -> float:
    """The relative error of a gradient ``a`` against an estimate ``n`` of it, one number per tensor:

        r = max_i |a_i - n_i| / max(max_i |a_i|, max_i |n_i|, tiny)

    the largest difference over the larger of the two tensors' scales (an entry near 0 does not
    inflate it, as |a_i - n_i| / |a_i| would); tiny = 1e-300 keeps two zero tensors at 0, not 0/0.
    A correct float64 backward against central differences gives about 1e-9, a bug about 1.

    Inputs:
        a, n    arrays of one shape (or numbers)
    Returns:
        r       a float, 0.0 for empty arrays
    """
    a, n = np.asarray(a, dtype=np.float64), np.asarray(n, dtype=np.float64)
    if a.size == 0:
        return 0.0
    scale = max(float(np.max(np.abs(a))), float(np.max(np.abs(n))), TINY)
    return float(np.max(np.abs(a - n))) / scale
