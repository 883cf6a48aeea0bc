"""Transformer blocks: the encoder block and the decoder block.

    encoder block:  x -> Residual(self-attention) -> Residual(FFN)
    decoder block:  x -> Residual(masked self-attention)
                      -> Residual(cross-attention over the encoder memory)   (when cross)
                      -> Residual(FFN)

The FFN is a FeedForward, or with ``BlockSpec.ffn == "moe"`` a sparse mixture of experts
(layers/moe.py, MoEFeedForward: a router sends each token to top_k of n_experts FFNs).

Backward runs the sublayers in exact reverse order; each Residual adds its
identity-branch gradient. The cross-attention's memory gradient is returned so
the model can send it back into the encoder.

Activation recomputation (gradient checkpointing; Chen et al. 2016, "Training Deep
Nets with Sublinear Memory Cost"), off by default, on with ``set_recompute(model)``;
the stacks run their blocks through ``checkpointed_forward`` / ``checkpointed_backward``:

    forward:   y = block(x)            keep x (and the dropout generators' states);
                                       drop every cache the sublayers made
    backward:  block(x) once more      same x, same dropout masks: the same caches
               dx = block.backward(dy)

The stack then holds one (B, T, C) input per block plus the caches of ONE block
(the one being differentiated) instead of the caches of all of them (attention
probabilities, FFN activations: ten to twenty times the input each); the price is a
second forward of every block per step. The gradients are the very same numbers.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from ..backend import default_rng
from ..validate import check_number
from .attention import MultiHeadAttention
from .attention_pattern import Causal, Full
from .attention_positions import NoPositions
from .dropout import Dropout
from .ffn import FeedForward
from .module import Module
from .moe import MoEFeedForward
from .norm import make_norm
from .residual import Residual


@dataclass(frozen=True)
class BlockSpec:
    """What a block needs to know; models fill it from their config (config.block_spec)."""
    d_model: int
    n_head: int
    d_ff: int
    n_kv_head: int | None = None
    norm: str = "layernorm"             # "layernorm" | "rmsnorm"
    norm_position: str = "pre"          # "pre" | "post"
    eps: float = 1e-5
    activation: str = "gelu"            # a name of ACTIVATIONS (layers/activation.py)
    p_drop: float = 0.0                 # residual dropout
    bias: bool = True
    init_std: float = 0.02              # init std of every weight
    out_std: float = 0.02               # init std of the projections that feed the residual
    attn_p_drop: float = 0.0            # attention dropout on the probabilities P
    # self-attention's two objects (layers/attention.py), one of each shared by a stack's blocks:
    positions: NoPositions = field(default_factory=NoPositions)   # the position hook (RoPE(), ALiBi() ...)
    pattern: Full | None = None         # the keys a query sees; None: Causal() in a DecoderBlock, Full() in
    #                                     an EncoderBlock
    # ---- the feed-forward sublayer: one FFN, or a sparse mixture of experts (layers/moe.py)
    ffn: str = "dense"                  # "dense" | "moe"
    n_experts: int = 4                  # E: experts of an MoE FFN
    top_k: int = 1                      # k: experts per token
    capacity_factor: float | None = 1.25  # expert slots = ⌈factor · N·k / E⌉ in training; None = no limit
    moe_aux_weight: float = 0.01        # α, the weight of the load-balancing loss

    def __post_init__(self):
        # The rest is checked by the Modules a block builds; these a Module would take as "its default".
        check_number("eps", self.eps, low=0.0, low_open=True, finite=True)
        check_number("init_std", self.init_std, low=0.0, finite=True)
        check_number("out_std", self.out_std, low=0.0, finite=True)


def _residual(spec: BlockSpec, sublayer, dropout_rng, dtype) -> Residual:
    return Residual(sublayer, make_norm(spec.norm, spec.d_model, spec.eps, dtype),
                    Dropout(spec.p_drop, rng=dropout_rng), spec.norm_position)


def _attention(spec: BlockSpec, rng, dtype, dropout_rng, **objects) -> MultiHeadAttention:
    """A block's self-attention (``positions``, ``pattern``) or cross-attention (``cross=True``)."""
    return MultiHeadAttention(spec.d_model, spec.n_head, n_kv_head=spec.n_kv_head, bias=spec.bias,
                              attn_p_drop=spec.attn_p_drop, dropout_rng=dropout_rng, rng=rng,
                              init_std=spec.init_std, out_std=spec.out_std, dtype=dtype, **objects)


def _ffn(spec: BlockSpec, rng, dtype):
    """The feed-forward sublayer: one FeedForward, or a mixture of experts (``spec.ffn == "moe"``)."""
    if spec.ffn == "moe":
        return MoEFeedForward(spec.d_model, spec.d_ff, spec.n_experts, spec.top_k,
                              capacity_factor=spec.capacity_factor, activation=spec.activation, bias=spec.bias,
                              aux_weight=spec.moe_aux_weight, rng=rng, init_std=spec.init_std,
                              out_std=spec.out_std, dtype=dtype)
    return FeedForward(spec.d_model, spec.d_ff, spec.activation, bias=spec.bias, rng=rng,
                       init_std=spec.init_std, out_std=spec.out_std, dtype=dtype)


class _Replay(NamedTuple):
    args: tuple          # the block's forward inputs, kept for the second forward
    kwargs: dict
    rng_states: list     # (generator, its state before the first forward), per dropout generator


class _RecomputableBlock(Module):
    """A block whose sublayers' caches can be dropped after forward and rebuilt in backward.

    ``forward`` / ``backward`` (the subclasses') are the block itself; the stacks call
    them through ``checkpointed_forward`` / ``checkpointed_backward``, which, when
    ``recompute`` is on (False here, set per block by ``set_recompute``) and the block is
    training, keep only the inputs and redo the forward in backward.
    """

    recompute = False

    def checkpointed_forward(self, *args, **kwargs):
        """``forward(*args, **kwargs)``, keeping only the inputs when recomputing."""
        if not (self.recompute and self.training) or any(v is not None for k, v in kwargs.items()
                                                          if k.endswith("kv_cache")):
            self._save(None)
            return self.forward(*args, **kwargs)
        states = [(g, g.bit_generator.state) for g in _generators(self)]
        y = self.forward(*args, **kwargs)
        for _, module in self.named_modules():
            module._cache = None                    # every sublayer's cache: rebuilt in backward
        self._save(_Replay(args, kwargs, states))
        return y

    def checkpointed_backward(self, dy):
        """``backward(dy)``, after redoing the forward when ``checkpointed_forward`` recomputed."""
        if self.__dict__.get("_cache") is None:     # an ordinary forward: the sublayers hold their caches
            return self.backward(dy)
        replay = self._pop_cache()
        after = [(g, g.bit_generator.state) for g, _ in replay.rng_states]
        for g, state in replay.rng_states:
            g.bit_generator.state = state           # the same dropout masks as the first forward
        try:
            self.forward(*replay.args, **replay.kwargs)
        finally:
            for g, state in after:
                g.bit_generator.state = state       # the generators go on as if nothing was redone
        return self.backward(dy)


def _generators(module: Module) -> list:
    """The distinct random generators of the dropout layers below ``module``."""
    gens = {}
    for _, m in module.named_modules():
        g = m.__dict__.get("rng")
        if g is not None:
            gens[id(g)] = g
    return list(gens.values())


def set_recompute(model: Module, on: bool = True) -> int:
    """Turn activation recomputation on (or off) in every encoder and decoder block of ``model``;
    returns the number of blocks. Takes effect at the next forward."""
    if not isinstance(model, Module):
        raise TypeError(f"model: expected a Module, got {type(model).__name__}")
    if not isinstance(on, bool):
        raise TypeError(f"on: expected True or False, got {type(on).__name__} {on!r}")
    blocks = [m for _, m in model.named_modules() if isinstance(m, _RecomputableBlock)]
    for block in blocks:
        block.recompute = on
    return len(blocks)


class EncoderBlock(_RecomputableBlock):
    def __init__(self, spec: BlockSpec, *, rng=None, dropout_rng=None, dtype=np.float32):
        super().__init__()
        rng = default_rng(rng)
        attention = _attention(spec, rng, dtype, dropout_rng, positions=spec.positions, pattern=spec.pattern)
        self.add_child("attn", _residual(spec, attention, dropout_rng, dtype))
        self.add_child("ffn", _residual(spec, _ffn(spec, rng, dtype), dropout_rng, dtype))

    def forward(self, x, key_padding_mask=None):
        x = self.attn.forward(x, key_padding_mask=key_padding_mask)   # (B, S, C)
        return self.ffn.forward(x)                                    # (B, S, C)

    def backward(self, dy):
        return self.attn.backward(self.ffn.backward(dy))              # (B, S, C)


class DecoderBlock(_RecomputableBlock):
    def __init__(self, spec: BlockSpec, *, cross: bool = False, rng=None, dropout_rng=None,
                 dtype=np.float32):
        super().__init__()
        rng = default_rng(rng)
        self.cross = cross
        pattern = Causal() if spec.pattern is None else spec.pattern
        if not pattern.causal:
            raise ValueError(f"spec.pattern: a decoder block's self-attention is causal; expected a causal "
                             f"pattern (Causal, SlidingWindow, ...) or None, got {pattern!r}")
        attention = _attention(spec, rng, dtype, dropout_rng, positions=spec.positions, pattern=pattern)
        self.add_child("attn", _residual(spec, attention, dropout_rng, dtype))
        if cross:
            cross_attention = _attention(spec, rng, dtype, dropout_rng, cross=True)
            self.add_child("cross_attn", _residual(spec, cross_attention, dropout_rng, dtype))
        self.add_child("ffn", _residual(spec, _ffn(spec, rng, dtype), dropout_rng, dtype))

    def forward(self, x, memory=None, memory_padding_mask=None, kv_cache=None, cross_kv_cache=None):
        x = self.attn.forward(x, kv_cache=kv_cache)                               # (B, T, C)
        if self.cross:
            x = self.cross_attn.forward(x, memory, key_padding_mask=memory_padding_mask,
                                        kv_cache=cross_kv_cache)                  # (B, T, C)
        return self.ffn.forward(x)                                                # (B, T, C)

    def backward(self, dy):
        """dy (B, T, C) -> dx, or (dx, dmemory) for a block with cross-attention.

        The forward ran x -> attn (a Residual around masked self-attention) -> cross_attn
        (around cross-attention over ``memory``, if any) -> ffn (around the feed-forward);
        the backward runs the three Residuals in the reverse order, and only cross_attn
        returns a gradient for the memory."""
        dx = self.ffn.backward(dy)
        dmemory = None
        if self.cross:
            dx, dmemory = self.cross_attn.backward(dx)
        dx = self.attn.backward(dx)
        return dx if dmemory is None else (dx, dmemory)
