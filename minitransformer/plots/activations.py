"""Figures of the activation functions: their curves and derivatives at three zooms,
and how far GPT-2's tanh form of GELU is from the exact one.

Every value comes from the pairs in functional/activations.py: y from the forward,
the derivative dy/dx from the backward with an upstream gradient of ones (exact for
an elementwise function: dx_i = 1 · dy_i/dx_i).
"""
from __future__ import annotations

import numpy as np

from ..functional.activations import (gelu_backward, gelu_forward, relu_backward, relu_forward,
                                      silu_backward, silu_forward)
from ..validate import check_int, check_number
from ._common import new_figure, save

# (label, forward, backward, options): the activations drawn, in the order of the legend
ACTIVATIONS = (
    ("ReLU", relu_forward, relu_backward, {}),
    ("GELU (exact, erf)", gelu_forward, gelu_backward, {"approximate": "none"}),
    ("GELU (tanh)", gelu_forward, gelu_backward, {"approximate": "tanh"}),
    ("SiLU", silu_forward, silu_backward, {}),
)
RANGES = ((-1.0, 1.0), (-10.0, 10.0), (-50.0, 50.0))


def evaluate(forward, backward, x, **options):
    """(y, dy/dx) of an elementwise pair at the points x: the forward, then the backward of ones."""
    y, cache = forward(x, **options)
    return y, backward(np.ones_like(x), cache)


def activation_curves(ranges=RANGES, n_points: int = 1001, path=None):
    """Top row: y = f(x); bottom row: f'(x); one column per x range (zooming out).

    Inputs: ranges [(lo, hi)]; n_points per range; path or None.
    Returns: fig, data {"x" (R, n_points), "y" {label: (R, n_points)}, "dydx" {label: (R, n_points)}}.
    """
    n_points = check_int("n_points", n_points, low=2)
    ranges = [(check_number(f"ranges[{r}] lo", lo), check_number(f"ranges[{r}] hi", hi, low=lo, low_open=True))
              for r, (lo, hi) in enumerate(ranges)]
    x = np.stack([np.linspace(lo, hi, n_points) for lo, hi in ranges])       # (R, n_points)
    y, dydx = {}, {}
    for label, forward, backward, options in ACTIVATIONS:
        y[label], dydx[label] = evaluate(forward, backward, x, **options)    # (R, n_points) each
    fig, axes = new_figure(5 * len(ranges), 8, 2, len(ranges))
    for r, (lo, hi) in enumerate(ranges):
        for row, values, name in ((0, y, "f(x)"), (1, dydx, "f′(x)")):
            ax = axes[row, r]
            for label, *_ in ACTIVATIONS:
                style = "--" if "tanh" in label else "-"
                ax.plot(x[r], values[label][r], style, label=label)
            ax.set_title(f"{name} on [{lo:g}, {hi:g}]")
            ax.set_xlabel("x")
            ax.set_ylabel(name)
            ax.grid(alpha=0.3)
    axes[0, 0].legend()
    axes[1, 0].legend()
    fig.suptitle("Activations (top) and their derivatives from the backward pass (bottom)")
    save(fig, path)
    return fig, {"x": x, "y": y, "dydx": dydx}


def gelu_difference(lo: float = -6.0, hi: float = 6.0, n_points: int = 1201, path=None):
    """GELU's tanh approximation (GPT-2) minus the exact x Φ(x), for the value and the derivative.

    The two differ by less than 5e-4 in value and 1e-3 in slope (on [-6, 6]), and
    meet at x = 0 and in both tails: swapping one for the other changes a trained model
    only slightly, but a checkpoint should run with the form it was trained with.
    Inputs: lo < hi, the x range; n_points; path or None.
    Returns: fig, data {"x", "exact", "tanh", "difference" = tanh - exact,
                        "dydx_difference" = tanh' - exact'}  each (n_points,).
    """
    lo = check_number("lo", lo)
    hi = check_number("hi", hi, low=lo, low_open=True)
    n_points = check_int("n_points", n_points, low=2)
    x = np.linspace(lo, hi, n_points)
    exact, dexact = evaluate(gelu_forward, gelu_backward, x, approximate="none")
    tanh, dtanh = evaluate(gelu_forward, gelu_backward, x, approximate="tanh")
    difference, dydx_difference = tanh - exact, dtanh - dexact
    fig, axes = new_figure(12, 4.5, 1, 2)
    ax = axes[0, 0]
    ax.plot(x, difference, color="tab:red")
    ax.set_title("GELU: tanh form − exact (value)")
    ax.set_ylabel("gelu_tanh(x) − gelu(x)")
    ax = axes[0, 1]
    ax.plot(x, dydx_difference, color="tab:purple")
    ax.set_title("GELU: tanh form − exact (derivative)")
    ax.set_ylabel("gelu_tanh′(x) − gelu′(x)")
    for ax in axes[0]:
        ax.axhline(0.0, color="gray", linewidth=0.8)
        ax.set_xlabel("x")
        ax.ticklabel_format(axis="y", style="sci", scilimits=(0, 0))
        ax.grid(alpha=0.3)
    save(fig, path)
    return fig, {"x": x, "exact": exact, "tanh": tanh, "difference": difference,
                 "dydx_difference": dydx_difference}
