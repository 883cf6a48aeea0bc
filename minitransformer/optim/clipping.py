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
    total = math.sqrt(sum(_squared_norm(g) for g in grads))
    if math.isfinite(total) and total > max_norm:
        scale = max_norm / total
        for g in grads:
            g *= scale
    return total


NORM_BLOCK = 2 ** 14     # entries summed in the array's dtype before the running total (a Python float)


def _squared_norm(g) -> float:
    """Σ g² of one array, as dot products: no temporary array of squares.

    On NumPy, in blocks of NORM_BLOCK entries added up in a Python float (float64), why:
    one float32 dot product over a whole flat gradient (flatten_parameters) sums a
    million squares in float32 and loses about 1e-5 of the result (2e-4 over 10 M),
    blocks of 16 K keep it near float32's own 1e-7. Other array modules (a GPU sums in
    a tree already) take one product: one host sync."""
    flat = g.reshape(-1)                      # a view when g is contiguous
    xp = get_xp(g)
    if not isinstance(g, numpy.ndarray):
        return float(xp.vdot(flat, flat))
    return sum(float(xp.vdot(flat[i:i + NORM_BLOCK], flat[i:i + NORM_BLOCK]))
               for i in range(0, flat.size, NORM_BLOCK))
