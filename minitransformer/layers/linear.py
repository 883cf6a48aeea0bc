"""Linear Module: owns W (d_in, d_out) and b (d_out,); the math is functional.linear."""
from __future__ import annotations

import numpy as np

from .. import init
from ..backend import default_rng
from ..functional.linear import linear_backward, linear_forward
from ..validate import check_size, check_dtype_like, check_float, check_int, check_number
from .module import Module


class Linear(Module):
    """y = x W + b, with W ~ N(0, init_std²) (default init_std = 1/√d_in) and b = 0."""

    def __init__(self, d_in: int, d_out: int, bias: bool = True, *, rng=None,
                 init_std: float | None = None, dtype=np.float32):
        super().__init__()
        d_in = check_int("d_in", d_in, low=1)
        d_out = check_int("d_out", d_out, low=1)
        check_flag("bias", bias)
        check_size("d_in, d_out", (d_in, d_out))
        rng = default_rng(rng)
        init_std = 1.0 / np.sqrt(d_in) if init_std is None else check_number("init_std", init_std, low=0.0,
                                                                             finite=True)
        self.add_param("W", init.normal(rng, (d_in, d_out), init_std, dtype))
        if bias:
            self.add_param("b", init.zeros(d_out, dtype))

    def forward(self, x):
        """x (..., d_in) floating, the dtype of W -> y (..., d_out). TypeError naming ``x`` otherwise
        (an int, bool, complex or object x would promote the result silently)."""
        check_input("x", x, self.W)
        y, cache = linear_forward(x, self.W, self.params.get("b"))
        self._save(cache, y)
        return y

    def backward(self, dy):
        """dy: the shape and dtype of forward's output (ValueError/TypeError naming ``dout``)."""
        dx, dW, db = linear_backward(dy, self._pop_cache(dy))
        self._accumulate("W", dW)
        if db is not None:
            self._accumulate("b", db)
        return dx


def check_input(name: str, x, W) -> None:
    """TypeError naming ``name`` unless ``x`` is a floating array of the weights' dtype."""
    check_float(name, x)
    check_dtype_like(name, x, W, "the weights")


def check_flag(name: str, value) -> None:
    """TypeError naming ``name`` unless ``value`` is True or False."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name}: expected True or False, got {type(value).__name__} {value!r}")
