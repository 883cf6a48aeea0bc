"""What the catalogue's variants share: the case's inputs in float64, the reference's softmax, a patched Module.

A variant (homework/assignment.py, ``Mistake.variant``) takes ``inp``: the forward's
arguments by name, ``upstream`` (the gradient given to backward) and, for a Module case,
``build`` (the reference Module with the case's weights) and ``forward_inputs``
(homework/reference.py, ``trial_inputs``). Trusted: with default options a variant is the
reference.
"""
from __future__ import annotations

import types

import numpy as np

from ...functional.softmax import softmax_forward
from ..graded import BACKWARD_CALLS, Case, run_module


def _f64(a):
    return np.asarray(a, dtype=np.float64)


def _x(inp, name="x"):
    return _f64(inp[name])


def _g(inp):
    return _f64(inp["upstream"])


def _rows(a):
    return a.reshape(-1, a.shape[-1])


def _softmax(x, axis=-1):
    return softmax_forward(x, axis)[0]                     # an all -inf row: 0


def _pick(fn, key, tensor="dx"):
    """The variant ``{tensor: fn(inp)[key]}``: one of the wrong results ``fn`` computes together."""
    return lambda inp: {tensor: fn(inp)[key]}


def _sub(fn, key):
    """The variant ``fn(inp)[key]`` (a dict of tensors, or a family's list of them)."""
    return lambda inp: fn(inp)[key]


# ------------------------------------------------------------------ a Module with one backward changed
def _run(inp, patch) -> dict:
    """Build the reference, let ``patch(module)`` swap a backward, run the case."""
    module = inp["build"]()
    patch(module)
    calls = {k: inp[k] for k in (BACKWARD_CALLS,) if k in inp}            # a case that calls backward twice
    result, _ = run_module(module, Case(dict(inp["forward_inputs"]), calls), g=inp["upstream"])
    return result


def _on(instance, method, **options):
    instance.backward = types.MethodType(lambda self, dy: method(self, dy, **options), instance)
