"""Activation Modules, without parameters: ReLU, GELU, SiLU and the gated GEGLU, SwiGLU.

Each wraps one pair of functional/activations.py or functional/gated.py: forward(x)
keeps the cache, backward(dy) returns dx. ``make_activation(name)`` builds one from
the config value; ``ACTIVATIONS``, the names it knows, is the project's one list of
activations (configs validate against it, the gradient-check suite iterates it):
add an activation to ``_MAKERS`` and it is everywhere. Swish alone has a
parameter, its learned β (one number); ``SwiGLUBeta``, SwiGLU with the deck's general β,
is a Module of its own, outside the list. The gated units take
the FFN's first projection at width 2F and return width F: a FeedForward checks
``name in GATED_ACTIVATIONS`` to size that projection.
"""
from __future__ import annotations

import numpy as np

from ..functional.twins import twin
from .. import init
from ..functional.activations import (GELU_APPROXIMATIONS, gelu_backward, gelu_forward, relu_backward,
                                      relu_forward, silu_backward, silu_forward, swish_backward, swish_forward)
from ..functional.gated import (geglu_backward, geglu_forward, swiglu_backward, swiglu_beta_backward,
                                swiglu_beta_forward, swiglu_forward)
from ..validate import check_choice, check_number
from .linear import check_input
from .module import Module

GATED_ACTIVATIONS = ("geglu", "swiglu")


class _Activation(Module):
    """A parameter-free Module around the pair (forward_fn, backward_fn)."""

    def __init__(self, forward_fn, backward_fn, **options):
        super().__init__()
        self._forward_fn, self._backward_fn, self._options = forward_fn, backward_fn, options

    def forward(self, x):
        y, cache = twin(self._forward_fn)(x, **self._options)   # the fast twin where there is one
        self._save(cache, y)
        return y

    def backward(self, dy):
        return twin(self._backward_fn)(dy, self._pop_cache(dy, "dy"))

    def __repr__(self) -> str:
        options = ", ".join(f"{k}={v!r}" for k, v in self._options.items())
        return f"{type(self).__name__}({options})"


class ReLU(_Activation):
    """y = max(x, 0)."""

    def __init__(self):
        super().__init__(relu_forward, relu_backward)


class GELU(_Activation):
    """y = x Φ(x) (approximate="none", Φ through erfc) or GPT-2's tanh form ("tanh")."""

    def __init__(self, approximate: str = "none"):
        check_choice("approximate", approximate, GELU_APPROXIMATIONS)
        super().__init__(gelu_forward, gelu_backward, approximate=approximate)


class SiLU(_Activation):
    """y = x σ(x) (Swish with β = 1)."""

    def __init__(self):
        super().__init__(silu_forward, silu_backward)


class Swish(Module):
    """y = x σ(β x) with a learned β (one number, initialised to 1: SiLU at the start)."""

    def __init__(self, beta: float = 1.0, dtype=np.float32):
        super().__init__()
        self.add_param("beta", init.ones((1,), dtype) * check_number("beta", beta, finite=True))

    def forward(self, x):
        check_input("x", x, self.beta)            # x's dtype against β's: name x, the caller's array
        y, cache = swish_forward(x, self.beta)
        self._save(cache, y)
        return y

    def backward(self, dy):
        dx, dbeta = swish_backward(dy, self._pop_cache(dy, "dy"))
        self._accumulate("beta", dbeta)
        return dx


class GEGLU(_Activation):
    """h (..., 2F) = [a | b] -> GELU(a) ⊙ b (..., F)."""

    def __init__(self):
        super().__init__(geglu_forward, geglu_backward)


class SwiGLU(_Activation):
    """h (..., 2F) = [a | b] -> SiLU(a) ⊙ b (..., F)."""

    def __init__(self):
        super().__init__(swiglu_forward, swiglu_backward)


class SwiGLUBeta(Module):
    """h (..., 2F) = [a | b] -> Swish_β(a) ⊙ b (..., F), with a learned β (one number, initialised to
    ``beta``; 1 is SwiGLU). Not in ACTIVATIONS: the architecture deck's general form, for lectures."""

    def __init__(self, beta: float = 1.0, dtype=np.float32):
        super().__init__()
        self.add_param("beta", init.ones((1,), dtype) * check_number("beta", beta, finite=True))

    def forward(self, h):
        y, cache = swiglu_beta_forward(h, self.beta)
        self._save(cache, y)
        return y

    def backward(self, dy):
        dh, dbeta = swiglu_beta_backward(dy, self._pop_cache(dy, "dy"))
        self._accumulate("beta", dbeta)
        return dh


_MAKERS = {
    "relu": ReLU,
    "gelu": GELU,
    "gelu_tanh": lambda: GELU(approximate="tanh"),
    "silu": SiLU,
    "swish": Swish,
    "geglu": GEGLU,
    "swiglu": SwiGLU,
}
ACTIVATIONS = tuple(_MAKERS)


def make_activation(name: str, dtype=np.float32) -> Module:
    """The activation Module for a config value: one of ACTIVATIONS (``dtype``: Swish's β)."""
    check_choice("name", name, ACTIVATIONS)
    return Swish(dtype=dtype) if name == "swish" else _MAKERS[name]()
