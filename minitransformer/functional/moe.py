"""A sparse mixture-of-experts feed-forward layer (Shazeer et al. 2017; Switch Transformer,
Fedus et al. 2022): E position-wise FFNs, each token sent to k of them.

The survey deck's "sparse / MoE FFN": the FFN holds most of a block's parameters, and a
mixture makes it E times larger while each token still pays for k experts only.

    s = X W_r                                   (N, E)  router logits, one row per token
    p = softmax(s)                              (N, E)
    g, e = top-k of p                           (N, k)  gates and expert ids (functional/router.py)
    kept = capacity mask of e                   (N, k)  False where the expert was full
    FFN_i(x) = act(x W_in[i] + b_in[i]) W_out[i] + b_out[i]                     (expert i)
    y_n = Σ_{j : kept_{n,j}} g_{n,j} · FFN_{e_{n,j}}(x_n)                          (N, C)
    aux = E Σ_i f_i P_i                          the load-balancing loss (router.py)

Shapes: X (N, C) tokens (a Module flattens (B, T, C)); W_r (C, E); W_in (E, C, F') with
F' = F, or 2F for the gated units; b_in (E, F') or None; W_out (E, F, C); b_out (E, C) or
None. The experts run one after the other on the tokens routed to them (a loop over E,
the experts, as a reader of Mixtral's reference code meets it); within an expert the
tokens go through one matrix product. Each token reaches an expert at most once (the k
choices are distinct), so y[n] += ... never adds twice into a row per expert.

A dropped assignment (capacity) contributes 0: the token's output is the sum over its
kept choices only, and with every choice dropped it is 0, which the residual connection
around the layer turns into "pass the token on unchanged".

Backward. Through each expert as through a dense FFN, on its tokens only; through the
gates into the router (dg_{n,j} = dy_n · FFN_{e_{n,j}}(x_n)); through the load-balancing
loss with its upstream gradient ``daux``; then the softmax and s = X W_r:

    dFFN_i(x_n) = g_{n,j} dy_n                   reverses: y_n += g_{n,j} FFN_i(x_n)
    dg_{n,j}    = dy_n · FFN_{e_{n,j}}(x_n)        reverses: the same line
    dp          = scatter(dg) + daux E f / N     (router.py: the choice e, the counts f and
                                                  the capacity mask are constants)
    ds          = softmax backward of dp
    dW_r = Xᵀ ds,   dX = Σ_experts dX_i + ds W_rᵀ

Stored: per expert, its token rows, their choice rank, its output rows and the caches of
its two linear maps and activation; the router's p (in the softmax cache) and e.
"""
from __future__ import annotations

from functools import partial
from typing import NamedTuple

from ..backend import get_xp
from ..validate import check_choice, check_dim, check_dtype_like, check_float, check_ndim, check_upstream
from .activations import gelu_backward, gelu_forward, relu_backward, relu_forward, silu_backward, silu_forward
from .gated import geglu_backward, geglu_forward, swiglu_backward, swiglu_forward
from .linear import linear_backward, linear_forward
from .router import (capacity_mask, expert_capacity, load_balancing_backward, load_balancing_forward,
                     top_k_backward, top_k_forward)
from .softmax import softmax_backward, softmax_forward

EXPERT_ACTIVATIONS = {          # name -> (forward, backward); Swish is left out: its β is a parameter
    "relu": (relu_forward, relu_backward),
    "gelu": (gelu_forward, gelu_backward),
    "gelu_tanh": (partial(gelu_forward, approximate="tanh"), gelu_backward),
    "silu": (silu_forward, silu_backward),
    "geglu": (geglu_forward, geglu_backward),
    "swiglu": (swiglu_forward, swiglu_backward),
}
GATED_EXPERT_ACTIVATIONS = ("geglu", "swiglu")      # W_in is twice as wide: [W | V]


class ExpertCache(NamedTuple):
    rows: object          # (M_i,) the tokens routed to this expert and kept
    rank: object          # (M_i,) which of their k choices this expert is
    out: object           # (M_i, C) FFN_i(x) on those rows, for dg
    linear_in: object     # LinearCache of x W_in[i] + b_in[i]
    act: object           # the activation's cache
    linear_out: object    # LinearCache of a W_out[i] + b_out[i]


class MoECache(NamedTuple):
    x: object             # (N, C) the tokens, for dW_r
    W_r: object           # (C, E), for dX
    gate: object          # (N, k) g
    expert: object        # (N, k) e, the chosen ids (also what a lecture shows)
    kept: object          # (N, k) the capacity mask
    aux: object           # the load-balancing loss, a 0-d array
    experts: list         # one ExpertCache per expert
    softmax: object       # SoftmaxCache of p = softmax(s)
    top_k: object         # TopKCache
    balance: object       # LoadBalancingCache
    activation: str
    has_bias: bool


def _check_moe(x, W_r, W_in, b_in, W_out, b_out, activation):
    """Shapes and dtypes of the MoE arguments (the legend of the module docstring)."""
    check_choice("activation", activation, tuple(EXPERT_ACTIVATIONS))
    check_ndim("x", x, 2, "(N, C)")
    check_float("x", x)
    C = x.shape[1]
    check_ndim("W_r", W_r, 2, "(C, E)")
    check_dim("W_r", W_r, 0, C, "C, the width of x")
    E = W_r.shape[1]
    check_ndim("W_in", W_in, 3, "(E, C, F')")
    check_dim("W_in", W_in, 0, E, "E, the columns of W_r")
    check_dim("W_in", W_in, 1, C, "C, the width of x")
    F = W_in.shape[2] // 2 if activation in GATED_EXPERT_ACTIVATIONS else W_in.shape[2]
    check_ndim("W_out", W_out, 3, "(E, F, C)")
    check_dim("W_out", W_out, 0, E, "E, the columns of W_r")
    check_dim("W_out", W_out, 1, F, f"F, W_in's width{' / 2 (gated)' if W_in.shape[2] != F else ''}")
    check_dim("W_out", W_out, 2, C, "C, the width of x")
    if (b_in is None) != (b_out is None):
        raise ValueError("b_in, b_out: expected both biases or neither, got "
                         f"b_in={'None' if b_in is None else 'an array'}, b_out={'None' if b_out is None else 'an array'}")
    if b_in is not None:
        check_ndim("b_in", b_in, 2, "(E, F')")
        check_dim("b_in", b_in, 1, W_in.shape[2], "F', the width of W_in")
        check_dim("b_in", b_in, 0, E, "E")
        check_ndim("b_out", b_out, 2, "(E, C)")
        check_dim("b_out", b_out, 0, E, "E")
        check_dim("b_out", b_out, 1, C, "C")
    for name, a in (("W_r", W_r), ("W_in", W_in), ("W_out", W_out), ("b_in", b_in), ("b_out", b_out)):
        if a is not None:
            check_dtype_like(name, a, x, "x")


def _expert_forward(x, rows, W_in, b_in, W_out, b_out, activation):
    """FFN_i on the rows routed to expert i: act(x W_in + b_in) W_out + b_out, (M_i, C)."""
    act_forward = EXPERT_ACTIVATIONS[activation][0]
    h, linear_in = linear_forward(x[rows], W_in, b_in)            # (M_i, F')
    a, act_cache = act_forward(h)                                  # (M_i, F)
    out, linear_out = linear_forward(a, W_out, b_out)              # (M_i, C)
    return out, linear_in, act_cache, linear_out


def moe_forward(x, W_r, W_in, b_in, W_out, b_out, *, top_k: int = 1, capacity_factor=None,
                activation: str = "gelu"):
    """y_n = Σ_{kept j} g_{n,j} FFN_{e_{n,j}}(x_n), and the load-balancing loss (module docstring).

    Inputs: x (N, C); W_r (C, E); W_in (E, C, F'); b_in (E, F') or None; W_out (E, F, C);
            b_out (E, C) or None, one floating dtype; top_k k in [1, E]; capacity_factor
            > 0, or None for no capacity limit; activation, a name of EXPERT_ACTIVATIONS.
    Returns: y (N, C), MoECache (``cache.aux``: the load-balancing loss; ``cache.expert``,
             ``cache.kept``: where each token went).
    """
    xp = get_xp(x, W_r, W_in, W_out)
    _check_moe(x, W_r, W_in, b_in, W_out, b_out, activation)
    N, E = x.shape[0], W_r.shape[1]
    s = x @ W_r                                                    # (N, E) router logits
    p, softmax_cache = softmax_forward(s)                          # (N, E)
    gate, top_k_cache = top_k_forward(p, top_k)                    # (N, k) g
    expert = top_k_cache.expert                                    # (N, k) e
    kept = capacity_mask(expert, E, expert_capacity(N, E, top_k, capacity_factor))   # (N, k)
    aux, balance_cache = load_balancing_forward(p, expert)         # ()
    y = xp.zeros_like(x)                                           # (N, C)
    experts = []
    for i in range(E):                                             # the experts, one after the other
        rows, rank = ((expert == i) & kept).nonzero()              # (M_i,), (M_i,) its tokens and their choice rank
        out, linear_in, act_cache, linear_out = _expert_forward(
            x, rows, W_in[i], None if b_in is None else b_in[i], W_out[i], None if b_out is None else b_out[i],
            activation)                                            # (M_i, C)
        y[rows] += gate[rows, rank][:, None] * out                 # (M_i, C) y_n += g_{n,j} FFN_i(x_n)
        experts.append(ExpertCache(rows, rank, out, linear_in, act_cache, linear_out))
    return y, MoECache(x, W_r, gate, expert, kept, aux, experts, softmax_cache, top_k_cache, balance_cache,
                       activation, b_in is not None)


def moe_backward(dy, cache: MoECache, daux=0.0):
    """dy (N, C), the cache; daux, the upstream gradient of the load-balancing loss (a real number:
    its weight in the total loss; 0 leaves it out).

    Returns: dx (N, C), dW_r (C, E), dW_in (E, C, F'), db_in (E, F') or None, dW_out (E, F, C),
             db_out (E, C) or None.
    """
    x, W_r = cache.x, cache.W_r
    check_upstream("dy", dy, x.shape, x.dtype)                     # the forward output's shape and dtype
    xp = get_xp(dy)
    act_backward = EXPERT_ACTIVATIONS[cache.activation][1]
    dx = xp.zeros_like(x)                                          # (N, C)
    dgate = xp.zeros_like(cache.gate)                              # (N, k) 0 on dropped assignments
    E = W_r.shape[1]
    dW_in, dW_out, db_in, db_out = [], [], [], []
    for i in range(E):
        rows, rank, out, linear_in, act_cache, linear_out = cache.experts[i]
        dy_rows = dy[rows]                                         # (M_i, C)
        dgate[rows, rank] = (dy_rows * out).sum(axis=1)            # (M_i,) reverses: y_n += g_{n,j} FFN_i(x_n)
        dout = cache.gate[rows, rank][:, None] * dy_rows           # (M_i, C) reverses: the same line
        da, dW_out_i, db_out_i = linear_backward(dout, linear_out) # (M_i, F) reverses: out = a W_out + b_out
        dh = act_backward(da, act_cache)                           # (M_i, F') reverses: a = act(h)
        dx_rows, dW_in_i, db_in_i = linear_backward(dh, linear_in) # (M_i, C) reverses: h = x W_in + b_in
        dx[rows] += dx_rows                                        # (M_i, C) reverses: x[rows]
        dW_in.append(dW_in_i), dW_out.append(dW_out_i), db_in.append(db_in_i), db_out.append(db_out_i)
    dp = top_k_backward(dgate, cache.top_k)                        # (N, E) reverses: g = p at e
    dp = dp + load_balancing_backward(daux, cache.balance)         # (N, E) reverses: aux = E Σ f_i P_i
    ds = softmax_backward(dp, cache.softmax)                       # (N, E) reverses: p = softmax(s)
    dW_r = x.T @ ds                                                # (C, E) reverses: s = x @ W_r
    dx = dx + ds @ W_r.T                                           # (N, C) reverses: s = x @ W_r
    stack = xp.stack
    return (dx, dW_r, stack(dW_in), stack(db_in) if cache.has_bias else None, stack(dW_out),
            stack(db_out) if cache.has_bias else None)
