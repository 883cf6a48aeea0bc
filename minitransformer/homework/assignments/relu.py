"""relu: y = max(x, 0), and dx = dy ⊙ [x > 0]."""
from __future__ import annotations

import numpy as np

from ..assignment import Assignment, Mistake, cases, pair
from . import L3
from ._draw import bct
from ._variants import _g, _x


# ------------------------------------------------------------------ the catalogue
def _relu_grad_alone(inp):
    return {"dx": (_x(inp) > 0).astype(np.float64)}


def _relu_times_output(inp):
    x = _x(inp)
    return {"dx": _g(inp) * np.maximum(x, 0)}


MISTAKES = (
    Mistake("relu", "relu-no-upstream", ("dx",),
            "dx is relu'(x) alone: multiply it by the upstream gradient dy (chain rule)", _relu_grad_alone),
    Mistake("relu", "relu-times-output", ("dx",),
            "dx = dy ⊙ relu(x): the derivative of relu is the indicator [x > 0], not relu(x) itself",
            _relu_times_output),
)


ASSIGNMENT = Assignment(
    id="relu", title="ReLU", lecture=L3, points=2,
    targets=("functional.activations:relu_forward", "functional.activations:relu_backward"),
    cases=cases(pair("functional.activations", "relu"), ("out", "dx"), ("relu: x (B, T, C)", bct), float32="relu"),
    mistakes=MISTAKES,
)
