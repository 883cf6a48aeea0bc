"""Register tokens: R learned vectors appended to every sequence of a ViT (Darcet et al. 2023,
"Vision Transformers Need Registers").

    x' = [x_1 ; ... ; x_N ; reg_1 ; ... ; reg_R]     x (B, N, C), registers (R, C), x' (B, N + R, C)

Large ViTs learn to park global information in a few background patches, whose
attention maps then show bright artefacts; extra tokens that no output reads give
the model somewhere else to put it. The registers go through every encoder block
like the other tokens and are dropped at the output: the head reads [CLS] only.

Darcet et al. add the registers after the patch embedding; here they are appended
at the end of the sequence, after [CLS] and the patches (their code puts them right
after [CLS]). The place changes nothing but the indices: the encoder has no mask and
no positions inside attention, so it treats its tokens as a set, and the registers
carry no position embedding (they are appended after the positions are added).

Every row of the batch gets the same registers, so their gradient is the sum over
the batch of the gradients at the last R positions:

    dx         = dx'[:, :N]                         (B, N, C)   reverses x'[:, :N] = x
    dregisters = Σ_b dx'[b, N:]                     (R, C)      reverses x'[:, N:] = registers (broadcast over B)
"""
from __future__ import annotations

from typing import NamedTuple

from ..backend import get_xp
from ..validate import check_dim, check_dtype_like, check_float, check_ndim, check_upstream


class RegistersCache(NamedTuple):
    x_shape: tuple       # (B, N, C): nothing else is needed, the backward only slices
    n_registers: int     # R
    dtype: object


def append_registers_forward(x, registers):
    """x' = [x ; registers].

    Inputs: x (B, N, C) floating; registers (R, C) of x's dtype, R >= 0.
    Returns: x' (B, N + R, C), RegistersCache.
    """
    xp = get_xp(x, registers)
    check_ndim("x", x, 3, "(B, N, C)")
    check_float("x", x)
    check_ndim("registers", registers, 2, "(R, C)")
    check_dim("registers", registers, 1, x.shape[2], "C, the width of x")
    check_dtype_like("registers", registers, x, "x")
    B, N, C = x.shape
    R = registers.shape[0]
    out = xp.empty((B, N + R, C), dtype=x.dtype)                  # (B, N + R, C)
    out[:, :N] = x                                                # (B, N, C)
    out[:, N:] = registers                                        # (B, R, C) the same rows for every b
    return out, RegistersCache(tuple(x.shape), R, x.dtype)


def append_registers_backward(dout, cache: RegistersCache):
    """Inputs: dout (B, N + R, C), the cache. Returns: dx (B, N, C), dregisters (R, C)."""
    (B, N, C), R = cache.x_shape, cache.n_registers
    check_upstream("dout", dout, (B, N + R, C), cache.dtype)
    dx = dout[:, :N].copy()                                       # (B, N, C)  reverses out[:, :N] = x
    dregisters = dout[:, N:].sum(axis=0)                          # (R, C)     reverses out[:, N:] = registers
    return dx, dregisters
