"""Multi-head attention as a Module: projections, heads, positions, masks, KV cache.

    self-attention:   [Q | K | V] = x W_qkv + b_qkv           x (B, T, C)
    cross-attention:  Q = x W_q + b_q,  [K | V] = memory W_kv + b_kv     memory (B, S, C)
    heads:            Q (B, H, T, D),  K, V (B, G, S, D)       D = C / H, G kv heads
    positions:        RoPE rotates Q, K; ALiBi, T5 add a bias; Shaw attends its own way
    grouped heads:    K, V = repeat_kv(K), repeat_kv(V)        (B, H, S, D), when G < H
    O = attention(Q, K, V, mask [, bias])                      functional/attention.py
    y = merge_heads(O) W_o + b_o                               (B, T, C)

Parameters. Self-attention keeps ONE fused matrix W_qkv (C, (H + 2G)·D), so the
three projections are a single matrix product per step; its column blocks are
    W_qkv[:, :H·D] = W_q,   W_qkv[:, H·D:(H+G)·D] = W_k,   W_qkv[:, (H+G)·D:] = W_v
(the layout of GPT-2's c_attn when G = H), and b_qkv is split the same way.
Cross-attention projects two different inputs, so it keeps W_q (C, H·D) and
W_kv (C, 2G·D) = [W_k | W_v]. Both have W_o (H·D, C), initialised with ``out_std``
so a model can scale the projections that feed the residual stream (GPT-2 uses
0.02 / √(2·n_layer)). Every weight is N(0, init_std²), every bias 0.

Two objects, built once (a model's config builds them for all its layers:
models/config.py), say what is not a weight:
    positions   the position scheme's hook (layers/attention_positions.py): NoPositions(),
                RoPE(), ALiBi(), T5Bias(...), Shaw(...); a relative scheme's learned tables
                (rel_K, rel_V or rel_bias) are parameters of this layer;
    pattern     which keys a query may see (layers/attention_pattern.py): Full(), Causal(),
                SlidingWindow(w), DilatedWindow(w, r), GlobalWindow(w, g), BidirectionalWindow(w);
                its mask is combined with the key padding mask at each call.
Cross-attention has neither: no shared time axis between queries and keys.

Grouped-query attention (n_kv_head = G < H): the layer projects (and caches) G key and
value heads, and repeats each for the r = H / G query heads that share it right before
attention (functional/repeat_kv.py, LLaMA's repeat_kv); the backward sums the r copies'
gradients back into each kv head.

Incremental decoding: ``forward(x, kv_cache=cache)`` takes only the NEW tokens.
Self-attention hands its new q, k, v to ``cache.extend``, which places them after
the cached positions (a rolling cache, generation/sink_cache.py, places them by
cache slot and adds its own mask); cross-attention projects the memory on the first
call only and reads it from the cache afterwards. A cached forward keeps no
backward cache: it is for generation, not training.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .. import init
from ..backend import default_rng, get_xp
from ..functional import masks
from ..functional.attention import attention_backward, attention_forward
from ..functional.heads import merge_heads, split_heads
from ..functional.linear import linear_backward, linear_forward
from ..functional.repeat_kv import repeat_kv_backward, repeat_kv_forward
from ..functional.twins import twin
from ..validate import (check_bool, check_broadcastable, check_dim, check_dtype_like, check_flag, check_float,
                        check_int, check_ndim, check_number, check_same_shape,
                        check_seed_or_generator, check_size)
from .attention_pattern import Full
from .attention_positions import NoPositions, T5Bias
from .kv_cache import KVCache
from .module import Module


class MHACache(NamedTuple):
    proj: object             # LinearCache of the fused W_qkv (self) or of W_q (cross)
    proj_kv: object          # LinearCache of W_kv (cross), else None
    rope: object             # the rotation's cache, shared by q and k (RoPE), else None
    attn: object             # the attention cache, holds the probabilities P (B, H, T, S)
    out: object              # LinearCache of W_o
    positions: object = None  # the position scheme's cache (T5: its T5BiasCache), else None
    repeat: object = None    # grouped heads: repeat_kv's cache (k and v alike), else None


class MultiHeadAttention(Module):
    """Multi-head (grouped-query when n_kv_head < n_head) self- or cross-attention.

    forward(x, memory=None, key_padding_mask=None, kv_cache=None) -> y (B, T, C)
        x (B, T, C); memory (B, S, C), required iff ``cross`` (with a kv_cache it is read
        on the first call only, later calls may pass None); key_padding_mask bool (B, S),
        True = real token, or a bool array broadcastable to (B, H, T, S). With a
        self-attention kv_cache, S counts the cached positions plus the new ones.
    backward(dy) -> dx for self-attention, (dx, dmemory) for cross-attention.
    attention_probs() -> P (B, H, T, S) of the pending forward (for plots), or None.

    Options: n_kv_head (grouped-query; None: n_head), cross, positions (a hook of
    layers/attention_positions.py; None: NoPositions()), pattern (layers/attention_pattern.py;
    None: Full(), every key), bias; attention dropout: attn_p_drop (dropout_rng); init: rng,
    init_std, out_std, dtype. E.g. a GPT layer with RoPE:
        MultiHeadAttention(C, H, positions=RoPE(), pattern=Causal(), rng=0)
    """

    def __init__(self, d_model: int, n_head: int, *, n_kv_head: int | None = None, cross: bool = False,
                 positions: NoPositions | None = None, pattern: Full | None = None, bias: bool = True,
                 attn_p_drop: float = 0.0, dropout_rng=None, rng=None, init_std: float | None = None,
                 out_std: float | None = None, dtype=np.float32):
        super().__init__()
        C = check_int("d_model", d_model, low=1)
        H = check_int("n_head", n_head, low=1)
        G = H if n_kv_head is None else check_int("n_kv_head", n_kv_head, low=1)
        self.cross, bias = check_flag("cross", cross), check_flag("bias", bias)
        self.positions = NoPositions() if positions is None else positions
        self.pattern = Full() if pattern is None else pattern
        self._check_config(C, H, G)
        self.n_head, self.n_kv_head, self.head_dim = H, G, C // H
        rng = default_rng(rng)
        init_std = 0.02 if init_std is None else check_number("init_std", init_std, low=0.0, finite=True)
        self._init_params(C, H, G, bias, rng, init_std, out_std, dtype)
        for name, table in self.positions.tables(H, C // H, rng, init_std, dtype).items():
            self.add_param(name, table)                                      # rel_K, rel_V or rel_bias
        self._init_dropout(attn_p_drop, dropout_rng)
        self._decoding = False                 # True after a forward with a kv_cache

    # ------------------------------------------------------------------ forward
    def forward(self, x, memory=None, key_padding_mask=None, kv_cache=None):
        S = self._check_inputs(x, memory, kv_cache)                          # the number of keys
        (B, T, _), xp = x.shape, get_xp(x)
        padding = self._padding_mask(key_padding_mask, B, T, S)              # checked before the cache grows
        if self.cross:
            q, k, v, step_mask, caches = self._project_cross(x, memory, kv_cache)
        else:
            q, k, v, step_mask, caches = self._project_self(x, kv_cache)
        mask = masks.combine_masks(self.pattern.mask(T, S, xp), padding, step_mask)  # (B, H, T, S) or None
        k, v, repeat = self._repeat_kv(k, v)                                 # (B, H, S, D) each
        o, attn, positions = self.positions.attend(self._attention, q, k, v, mask, self.params)  # (B, H, T, D)
        y, out = linear_forward(twin(merge_heads)(o), self.W_o, self.params.get("b_o"))    # (B, T, C)
        self._decoding = kv_cache is not None
        self._save(None if self._decoding else MHACache(*caches, attn, out, positions, repeat))
        return y

    def _repeat_kv(self, k, v):
        """Grouped heads: k, v (B, G, S, D) -> (B, H, S, D) each, and the cache; G = H: as they are."""
        if self.n_kv_head == self.n_head:
            return k, v, None
        r = self.n_head // self.n_kv_head                                    # query heads per kv head
        k_heads, repeat = repeat_kv_forward(k, r)                            # (B, H, S, D)
        v_heads, _ = repeat_kv_forward(v, r)                                 # (B, H, S, D) the same copies
        return k_heads, v_heads, repeat

    def _project_self(self, x, kv_cache):
        """x -> q (B, H, T, D), k, v (B, G, S, D), the cache's step mask, (proj, None, rope)."""
        H, G = self.n_head, self.n_kv_head
        qkv, proj = linear_forward(x, self.W_qkv, self.params.get("b_qkv"))  # (B, T, (H+2G)·D)
        heads = split_heads(qkv, self.head_dim)                             # (B, H+2G, T, D) view
        qk, v = heads[:, :H + G], heads[:, H + G:]                           # (B, H+G, T, D), (B, G, T, D)
        if kv_cache is not None:                                             # decoding: the cache places them
            q, k, v, step_mask = kv_cache.extend(qk[:, :H], qk[:, H:], v, self.positions.rotate)
            return q, k, v, step_mask, (proj, None, None)
        qk, rope = self.positions.rotate(qk, 0)                             # RoPE: q and k side by side, one table
        return qk[:, :H], qk[:, H:], v, None, (proj, None, rope)

    def _project_cross(self, x, memory, kv_cache):
        """x, memory -> q (B, H, T, D), k, v (B, G, S, D), no step mask, (proj, proj_kv, None)."""
        G = self.n_kv_head
        q, proj = linear_forward(x, self.W_q, self.params.get("b_q"))        # (B, T, H·D)
        q = split_heads(q, self.head_dim)                                   # (B, H, T, D) view
        if kv_cache is not None and kv_cache.length:                         # memory projected already
            return q, kv_cache.k, kv_cache.v, None, (proj, None, None)
        kv, proj_kv = linear_forward(memory, self.W_kv, self.params.get("b_kv"))  # (B, S, 2G·D)
        heads = split_heads(kv, self.head_dim)                              # (B, 2G, S, D) view
        k, v = heads[:, :G], heads[:, G:]                                    # (B, G, S, D) each
        if kv_cache is not None:
            k, v = kv_cache.append(k, v)
        return q, k, v, None, (proj, proj_kv, None)

    def _attention(self, q, k, v, mask, bias):
        """attention_forward, with attention dropout on P in training when attn_p_drop > 0."""
        if self.rng is None or not self.training:
            return twin(attention_forward)(q, k, v, mask, bias)                     # (B, H, T, D)
        return twin(attention_forward)(q, k, v, mask, bias, p_drop=self.attn_p_drop, rng=self.rng)

    # ----------------------------------------------------------------- backward
    def backward(self, dy):
        """dy (B, T, C) -> dx (B, T, C); cross-attention: (dx, dmemory (B, S, C)).

        Reverses forward's lines in the opposite order, from the cache
        MHACache(proj, proj_kv, rope, attn, out, positions, repeat):
            y = merge_heads(o) W_o + b_o          -> do, dW_o, db_o    (linear_backward on ``out``)
            o = attention(q, k, v, mask, bias)    -> dq, dk, dv        (self.positions.attend_backward:
                                                                         attention_backward, plus a
                                                                         relative scheme's table gradients)
            k, v = repeat_kv(k), repeat_kv(v)     -> dk, dv summed over each group (G < H only)
            self: q, k = RoPE(q, k)               -> rotate dq, dk back (self.positions.rotate_backward)
                  [q | k | v] = x W_qkv + b_qkv   -> dx, dW_qkv, db_qkv (one linear_backward on the
                                                                         merged [dq | dk | dv])
            cross: q = x W_q + b_q                -> dx, dW_q, db_q
                   [k | v] = memory W_kv + b_kv   -> dmemory, dW_kv, db_kv
        Every parameter gradient is ADDED to ``self.grads`` (``_accumulate``: weights may be
        shared).
        """
        if self._decoding:
            raise RuntimeError("MultiHeadAttention.backward() after a forward with a kv_cache: "
                               "incremental decoding keeps no backward cache; run forward "
                               "without kv_cache to train")
        proj, proj_kv, rope, attn, out, positions, repeat = self._pop_cache()
        do, dW_o, db_o = linear_backward(dy, out)                            # (B, T, H·D)
        self._accumulate_pair("W_o", dW_o, "b_o", db_o)
        dq, dk, dv, dtables = self.positions.attend_backward(
            twin(attention_backward), split_heads(do, self.head_dim), attn, positions)  # ALiBi: no gradient
        for name, dtable in dtables.items():
            self._accumulate(name, dtable)                                   # rel_K, rel_V or rel_bias
        if repeat is not None:                                               # grouped heads: each kv head
            dk = repeat_kv_backward(dk, repeat)                              # (B, G, S, D) sums its copies
            dv = repeat_kv_backward(dv, repeat)                              # (B, G, S, D)
        if self.cross:
            dx, dW_q, db_q = linear_backward(merge_heads(dq), proj)         # (B, T, C)
            self._accumulate_pair("W_q", dW_q, "b_q", db_q)
            dmemory, dW_kv, db_kv = linear_backward(merge_heads(dk, dv), proj_kv)  # (B, S, C)
            self._accumulate_pair("W_kv", dW_kv, "b_kv", db_kv)
            return dx, dmemory
        dq = self.positions.rotate_backward(dq, rope)                       # (B, H, T, D) RoPE: rotate back
        dk = self.positions.rotate_backward(dk, rope)                       # (B, G, T, D)
        dx, dW_qkv, db_qkv = linear_backward(twin(merge_heads)(dq, dk, dv), proj)  # (B, T, C)
        self._accumulate_pair("W_qkv", dW_qkv, "b_qkv", db_qkv)
        return dx

    def _accumulate_pair(self, W_name, dW, b_name, db) -> None:
        self._accumulate(W_name, dW)
        if db is not None:
            self._accumulate(b_name, db)

    def attention_probs(self):
        """P (B, H, T, S) of the pending forward, for plots; None if there is none."""
        return None if self._cache is None else self._cache.attn.probs

    # -------------------------------------------------------------------- masks
    def _padding_mask(self, key_padding_mask, B, T, S):
        """(B, S) True = real token -> (B, 1, 1, S); a 4-D mask passes through, checked."""
        if key_padding_mask is None:
            return None
        check_bool("key_padding_mask", key_padding_mask)
        if key_padding_mask.ndim == 2:
            check_same_shape("key_padding_mask", key_padding_mask, (B, S))
            return masks.key_padding_mask(padding=~key_padding_mask)        # (B, 1, 1, S)
        check_broadcastable("key_padding_mask", key_padding_mask, (B, self.n_head, T, S), "(B, H, T, S)")
        return key_padding_mask

    # ------------------------------------------------------------- construction
    def _check_config(self, C, H, G) -> None:
        if C % H:
            raise ValueError(f"d_model: expected a multiple of n_head={H}, got {C}")
        if H % G:
            raise ValueError(f"n_kv_head: expected a divisor of n_head={H}, got {G}")
        if not isinstance(self.positions, NoPositions):
            raise TypeError(f"positions: expected a position hook of layers/attention_positions.py "
                            f"(NoPositions, RoPE, ALiBi, T5Bias, Shaw) or None, got {type(self.positions).__name__}")
        if not isinstance(self.pattern, Full):
            raise TypeError(f"pattern: expected an attention pattern of layers/attention_pattern.py "
                            f"(Full, Causal, SlidingWindow, ...) or None, got {type(self.pattern).__name__}")
        self.positions.check_layer(H, C // H)
        if self.cross and (type(self.positions) is not NoPositions or type(self.pattern) is not Full):
            raise ValueError("cross: cross-attention has no shared time axis between queries and keys; "
                             "expected no positions and no pattern, got "
                             f"positions={type(self.positions).__name__}, pattern={self.pattern!r}")
        if isinstance(self.positions, T5Bias) and self.positions.bidirectional == self.pattern.causal:
            raise ValueError(f"positions: T5's buckets must look the pattern's way; expected "
                             f"bidirectional={not self.pattern.causal} for pattern={self.pattern!r}, "
                             f"got bidirectional={self.positions.bidirectional}")

    def _init_params(self, C, H, G, bias, rng, init_std, out_std, dtype):
        out_std = init_std if out_std is None else check_number("out_std", out_std, low=0.0, finite=True)
        D = C // H
        blocks = [("W_q", "b_q", H * D), ("W_kv", "b_kv", 2 * G * D)] if self.cross else \
                 [("W_qkv", "b_qkv", (H + 2 * G) * D)]
        for W_name, b_name, width in blocks:
            check_size("d_model, n_head, n_kv_head", (C, width))
            self.add_param(W_name, init.normal(rng, (C, width), init_std, dtype))
            if bias:
                self.add_param(b_name, init.zeros(width, dtype))
        self.add_param("W_o", init.normal(rng, (H * D, C), out_std, dtype))
        if bias:
            self.add_param("b_o", init.zeros(C, dtype))

    def _init_dropout(self, attn_p_drop, dropout_rng) -> None:
        """Attention dropout on P: its probability and, when it is on, its generator ``self.rng``
        (the name Dropout uses: training and the gradient checker find and replay it)."""
        self.attn_p_drop = check_number("attn_p_drop", attn_p_drop, low=0.0, high=1.0, high_open=True)
        if self.attn_p_drop > 0 and self.positions.name == "shaw":
            raise ValueError("attn_p_drop: Shaw relative attention has no attention dropout; expected 0 "
                             f"with relative='shaw', got {self.attn_p_drop}")
        check_seed_or_generator("dropout_rng", dropout_rng)
        self.rng = default_rng(dropout_rng) if self.attn_p_drop > 0 else None

    # ------------------------------------------------------------------- checks
    def _check_inputs(self, x, memory, kv_cache) -> int:
        """Check the inputs of forward; returns S, the number of keys the queries will see."""
        C = self.W_o.shape[1]
        check_ndim("x", x, 3, "(B, T, C)")
        check_dim("x", x, 2, C, "C = d_model")
        if 0 in x.shape[:2]:
            raise ValueError(f"x: expected at least one row and one position (B, T >= 1), got shape {tuple(x.shape)}")
        check_float("x", x)
        check_dtype_like("x", x, self.W_o, "the parameters")
        if kv_cache is not None and not isinstance(kv_cache, KVCache):
            raise TypeError(f"kv_cache: expected a KVCache or None, got {type(kv_cache).__name__}")
        past = kv_cache.length if kv_cache is not None else 0
        if not self.cross:
            if memory is not None:
                raise ValueError("memory: expected None for self-attention (construct with cross=True "
                                 f"to attend to a memory), got shape {tuple(memory.shape)}")
            return past + x.shape[1]                        # the cached keys, then the new ones
        if past:                                            # the memory is in the cache already
            return past
        if memory is None:
            raise ValueError("memory: cross-attention expected the memory (B, S, C), got None")
        check_ndim("memory", memory, 3, "(B, S, C)")
        check_dim("memory", memory, 0, x.shape[0], "B, the batch of x")
        if memory.shape[1] == 0:
            raise ValueError(f"memory: expected at least one position (S >= 1), got shape {tuple(memory.shape)}")
        check_dim("memory", memory, 2, C, "C = d_model")
        check_dtype_like("memory", memory, x, "x")
        return memory.shape[1]
