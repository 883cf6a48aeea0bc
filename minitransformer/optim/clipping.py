"""Gradient clipping by the global L2 norm."""
from __future__ import annotations

import math

import numpy

from ..backend import get_xp
from ..validate import check_float, check_number


def clip_grad_norm(grads_or_params, max_norm: float) -> float:
    """Scale all gradients by one factor so that their global L2 norm is at most ``max_norm``.

        ‖g‖ = √(Σ over every gradient array, Σ over its entries, g²)
        if ‖g‖ > max_norm:   g = g · max_norm / ‖g‖      (in place, every array)

    One factor for all arrays keeps the direction of the whole update; clipping
    each array on its own would not.

    Inputs: grads_or_params: gradient arrays, or (name, param, grad) triples
            (``model.parameters()``, ``optimizer.params``); max_norm > 0, or ``math.inf``:
            no clipping, the norm measured only (as PyTorch's clip_grad_norm_ reads it).
    Returns: the global norm BEFORE clipping, a Python float: worth logging, its
             spikes show instabilities. When it is not finite (an inf or NaN in
             some gradient) nothing is scaled, since scaling would turn every
             gradient into NaN; the caller sees the inf/NaN and can stop.
    """
    max_norm = check_number("max_norm", max_norm, low=0.0, low_open=True)
    grads = [item[2] if isinstance(item, tuple) else item for item in grads_or_params]
    for i, g in enumerate(grads):
        check_float(f"grads_or_params[{i}]", g)
    total = math.sqrt(_global_squared_norm(grads))
    if math.isfinite(total) and total > max_norm:
        scale = max_norm / total
        for g in grads:
            g *= scale
    return total


def _global_squared_norm(grads) -> float:
    """Σ over the arrays of Σ g², a Python float.

    On NumPy, array by array (_squared_norm). On another array module (a GPU) each
    array's Σ g² stays on the device, the sums are added there in float64, in the
    arrays' order as on NumPy (a running sum: cumsum), and one number comes back: one
    host sync per call, not one per array (a wait for the device each)."""
    if all(isinstance(g, numpy.ndarray) for g in grads):
        total = 0.0
        for g in grads:                        # added in order, as cumsum does (Python 3.12's sum()
            total += _squared_norm(g)          # compensates its rounding, and would differ)
        return total
    xp = get_xp(grads[0])
    squares = xp.stack([xp.vdot(g.reshape(-1), g.reshape(-1)) for g in grads])   # (n_arrays,) Σ g² each
    return float(xp.cumsum(squares.astype(xp.float64))[-1])


def _squared_norm(g) -> float:
    """Σ g² of one NumPy array, as a dot product: no temporary array of squares."""
    flat = g.reshape(-1)                      # a view when g is contiguous
    return float(numpy.vdot(flat, flat))
