"""AdamW whose update of a CuPy parameter is one fused GPU kernel.

On a GPU every array operation is a kernel launch, and the plain update
(optim/optimizers.py, ``AdamW._update``) makes about a dozen per parameter: on the
small models of this course the launches, not the arithmetic, set the time of the
update. ``FusedAdamW`` is an ``AdamW`` (same hyperparameters, state, checkpoints)
whose update of a CuPy parameter computes the same formulas in one elementwise kernel:

    p = p · (1 - lr λ)                          decayed parameters only
    m = β1 m + (1 - β1) g
    v = β2 v + (1 - β2) g²
    p = p - α_t · m / (√v + ε̂),     α_t = lr √(1 - β2^t) / (1 - β1^t),   ε̂ = ε √(1 - β2^t)

The coefficients are computed in Python floats as the plain update computes them and
cast to the parameter's dtype, as NumPy and CuPy cast a Python float meeting an array;
only the kernel's rounding order differs (the compiler may fuse a multiply and an
add), so the two agree to float32 rounding, not bit for bit. A NumPy parameter takes
the plain update. ``benchmarks/gpu_parts.py`` ties the two on a GPU.
"""
from __future__ import annotations

import math

from ..backend import get_xp
from ..optim import AdamW

_KERNEL = None   # the compiled kernel, built on first use (CuPy compiles at the first call anyway)


def _adamw_kernel():
    global _KERNEL
    if _KERNEL is None:
        import cupy
        _KERNEL = cupy.ElementwiseKernel(
            "T g, T decay, T beta1, T one_minus_beta1, T beta2, T one_minus_beta2, T eps_hat, T alpha",
            "T p, T m, T v",
            """
            p = p * decay;
            m = m * beta1 + g * one_minus_beta1;
            v = v * beta2 + g * g * one_minus_beta2;
            p = p - m / (sqrt(v) + eps_hat) * alpha;
            """,
            "minitransformer_fused_adamw")
    return _KERNEL


class FusedAdamW(AdamW):
    """AdamW (optim/optimizers.py) with one fused kernel per CuPy parameter; see the module docstring."""

    def _update(self, name, p, g, lr):
        if get_xp(p).__name__ != "cupy":
            return super()._update(name, p, g, lr)
        beta1, beta2 = self.betas
        root_bias2 = math.sqrt(1.0 - beta2 ** self.t)
        decay = 1.0 - lr * self.weight_decay if self.weight_decay > 0 and self.decayed[name] else 1.0
        alpha = lr * root_bias2 / (1.0 - beta1 ** self.t)
        _adamw_kernel()(g, decay, beta1, 1.0 - beta1, beta2, 1.0 - beta2, self.eps * root_bias2, alpha,
                        p, self.state["m"][name], self.state["v"][name])

    def state_dict(self) -> dict:
        """AdamW's state, saved as AdamW's: a checkpoint resumes with either."""
        return {**super().state_dict(), "type": "AdamW"}

    def load_state_dict(self, state: dict) -> None:
        kind = state.get("type") if isinstance(state, dict) else None
        super().load_state_dict({**state, "type": type(self).__name__} if kind == "AdamW" else state)


def fused_like(optimizer: AdamW) -> FusedAdamW:
    """A FusedAdamW over the same parameters with the same hyperparameters and state."""
    if not isinstance(optimizer, AdamW):
        raise TypeError(f"optimizer: expected an AdamW (the fused kernel computes AdamW's update), "
                        f"got {type(optimizer).__name__}")
    fused = FusedAdamW(optimizer.params, optimizer.lr, betas=optimizer.betas, eps=optimizer.eps,
                       weight_decay=optimizer.weight_decay)
    fused.decayed = dict(optimizer.decayed)
    fused.load_state_dict(optimizer.state_dict())
    return fused
