"""MoEFeedForward: a sparse mixture of E feed-forward experts, k per token (functional/moe.py).

    x (B, T, C) -> the B·T tokens as rows (N, C) -> moe_forward -> y (B, T, C)

Parameters: W_router (C, E) (no bias); W_in (E, C, F'), b_in (E, F'); W_out (E, F, C),
b_out (E, C) (F' = 2F for the gated units; no biases with ``bias=False``), initialised
as FeedForward initialises one expert.

Capacity holds in training only: ``capacity_factor`` (None: no limit) sizes the experts'
batches while the model trains, and in eval every token reaches its k experts, as
inference code does (a dropped token there would change a generation for the batch it
happened to share).

The load-balancing loss. ``aux_loss`` is α · aux of the last forward in training (α =
``aux_weight``; Switch Transformer used 0.01), 0.0 in eval: the training loss adds it
(training/loss.py ``task_loss``), and ``backward`` adds its gradient, with the upstream
gradient ``aux_upstream`` (1.0: the loss is the mean of the whole batch; ``task_loss_backward``
sets it to the part's weight on a data-parallel replica). ``routing`` keeps what the last
forward decided, for reading: which expert each token went to, its gates, what was kept.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .. import init
from ..backend import default_rng
from ..functional.moe import EXPERT_ACTIVATIONS, GATED_EXPERT_ACTIVATIONS, moe_backward, moe_forward
from ..validate import check_choice, check_int, check_ndim, check_number, check_size
from .linear import check_flag, check_input
from .module import Module


class Routing(NamedTuple):
    expert: object         # (B, T, k) the chosen expert of each token, best first (on the model's device)
    gate: object           # (B, T, k) their gates g
    kept: object           # (B, T, k) False where the expert was full (training only)
    aux: float             # aux = E Σ f_i P_i, unweighted (1 for a perfectly even split)


class MoEFeedForward(Module):
    def __init__(self, d_model: int, d_ff: int, n_experts: int, top_k: int = 1, *, capacity_factor=None,
                 activation: str = "gelu", bias: bool = True, aux_weight: float = 0.01, rng=None,
                 init_std: float = 0.02, out_std: float | None = None, dtype=np.float32):
        super().__init__()
        C, F = check_int("d_model", d_model, low=1), check_int("d_ff", d_ff, low=1)
        E = check_int("n_experts", n_experts, low=1)
        self.top_k = check_int("top_k", top_k, low=1, high=E)
        if capacity_factor is not None:
            check_number("capacity_factor", capacity_factor, low=0.0, low_open=True, finite=True)
        self.capacity_factor = capacity_factor
        check_choice("activation", activation, tuple(EXPERT_ACTIVATIONS))
        check_flag("bias", bias)
        self.activation = activation
        self.aux_weight = check_number("aux_weight", aux_weight, low=0.0, finite=True)
        init_std = check_number("init_std", init_std, low=0.0, finite=True)
        out_std = init_std if out_std is None else check_number("out_std", out_std, low=0.0, finite=True)
        width = 2 * F if activation in GATED_EXPERT_ACTIVATIONS else F
        check_size("n_experts, d_model, d_ff", (E, C, width))
        rng = default_rng(rng)
        self.add_param("W_router", init.normal(rng, (C, E), init_std, dtype))
        self.add_param("W_in", init.normal(rng, (E, C, width), init_std, dtype))
        self.add_param("W_out", init.normal(rng, (E, F, C), out_std, dtype))
        if bias:
            self.add_param("b_in", init.zeros((E, width), dtype))
            self.add_param("b_out", init.zeros((E, C), dtype))
        self.aux_upstream = 1.0
        self.aux_loss = 0.0
        self.routing = None

    def forward(self, x):
        """x (B, T, C) floating, the weights' dtype -> y (B, T, C)."""
        check_input("x", x, self.W_in)
        check_ndim("x", x, 3, "(B, T, C)")
        B, T, C = x.shape
        y, cache = moe_forward(x.reshape(B * T, C), self.W_router, self.W_in, self.params.get("b_in"),
                               self.W_out, self.params.get("b_out"), top_k=self.top_k,
                               capacity_factor=self.capacity_factor if self.training else None,
                               activation=self.activation)                 # (B·T, C)
        aux = float(cache.aux)
        self.aux_loss = self.aux_weight * aux if self.training else 0.0
        self.routing = Routing(*(a.reshape(B, T, -1) for a in (cache.expert, cache.gate, cache.kept)), aux)
        out = y.reshape(B, T, C)                                           # (B, T, C)
        self._save((cache, self.training), out)
        return out

    def backward(self, dy):
        """dy (B, T, C) -> dx (B, T, C); the parameters' gradients accumulate, the load-balancing
        loss's included (weight ``aux_weight`` times ``aux_upstream``, in training)."""
        cache, training = self._pop_cache(dy)
        daux = self.aux_weight * self.aux_upstream if training else 0.0
        dx, dW_r, dW_in, db_in, dW_out, db_out = moe_backward(dy.reshape(cache.x.shape), cache, daux)
        for name, g in (("W_router", dW_r), ("W_in", dW_in), ("W_out", dW_out), ("b_in", db_in), ("b_out", db_out)):
            if g is not None:
                self._accumulate(name, g)
        return dx.reshape(dy.shape)                                         # (B, T, C)
