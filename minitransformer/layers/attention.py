"""Multi-head attention as a Module: projections, heads, positions, masks, KV cache.

    self-attention:   [Q | K | V] = x W_qkv + b_qkv           x (B, T, C)
    cross-attention:  Q = x W_q + b_q,  [K | V] = memory W_kv + b_kv     memory (B, S, C)
    heads:            Q (B, H, T, D),  K, V (B, G, S, D)       D = C / H, G kv heads
    RoPE (optional):  Q, K rotated by their absolute positions
    O = attention(Q, K, V, mask, ALiBi bias)                   functional/attention.py
    y = merge_heads(O) W_o + b_o                               (B, T, C)

Parameters. Self-attention keeps ONE fused matrix W_qkv (C, (H + 2G)·D), so the
three projections are a single matrix product per step; its column blocks are
    W_qkv[:, :H·D] = W_q,   W_qkv[:, H·D:(H+G)·D] = W_k,   W_qkv[:, (H+G)·D:] = W_v
(the layout of GPT-2's c_attn when G = H), and b_qkv is split the same way.
Cross-attention projects two different inputs, so it keeps W_q (C, H·D) and
W_kv (C, 2G·D) = [W_k | W_v]. Both have W_o (H·D, C), initialised with ``out_std``
so a model can scale the projections that feed the residual stream (GPT-2 uses
0.02 / √(2·n_layer)). Every weight is N(0, init_std²), every bias 0.

Masks come from functional/masks.py: the causal or sliding-window mask is built
once per (T, S) and kept (likewise the ALiBi bias), the key padding mask is
combined with it at each call.

Incremental decoding: ``forward(x, kv_cache=cache)`` takes only the NEW tokens.
Self-attention appends their keys and values to the cache and places the new
queries after the cached positions (RoPE angles, ALiBi distances, causal and
window masks all use the offset ``cache.length``); cross-attention projects the
memory on the first call only and reads it from the cache afterwards. A cached
forward keeps no backward cache: it is for generation, not training.

Relative positions (``relative="shaw"`` or ``"t5"``), learned in EACH layer:
    "shaw"  rel_K, rel_V (2k+1, D), k = relative_clip: a^K_ij, a^V_ij = rel_K/V[clip(j - i, -k, k) + k]
            inside the scores and the values (functional/shaw.py), shared by the heads;
    "t5"    rel_bias (n_buckets, H): bias[h, i, j] = rel_bias[bucket(j - i), h] added to the
            scores (functional/t5_bias.py); bidirectional buckets unless causal.
T5 itself shares one bias table across the layers of a stack; here every layer has
its own (as Shaw et al. do for theirs). With a KV cache, i counts from cache.length.
Cross-attention has no relative positions.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .. import init
from ..backend import default_rng, get_xp
from ..functional.twins import twin
from ..functional import masks
from ..functional.alibi import alibi_bias, alibi_slopes
from ..functional.attention import attention_backward, attention_forward
from ..functional.heads import merge_heads, split_heads
from ..functional.linear import linear_backward, linear_forward
from ..functional.rope import LAYOUTS, rope_backward, rope_forward
from ..functional.shaw import shaw_attention_backward, shaw_attention_forward
from ..functional.t5_bias import check_bucket_options, t5_bias_backward, t5_bias_forward
from ..validate import (check_bool, check_broadcastable, check_choice, check_dim, check_dtype_like,
                        check_flag, check_float, check_int, check_items, check_ndim, check_number, check_same_shape,
                        check_seed_or_generator, check_size)
from .kv_cache import KVCache, SinkKVCache
from .module import Module

RELATIVE = (None, "shaw", "t5")   # relative position schemes inside attention
_MEMO_SIZE = 8   # masks / ALiBi biases kept per layer, for the (T, S) shapes seen last


class MHACache(NamedTuple):
    proj: object             # LinearCache of the fused W_qkv (self) or of W_q (cross)
    proj_kv: object          # LinearCache of W_kv (cross), else None
    rope: object             # RopeCache shared by q and k (same positions), or None
    attn: object             # AttentionCache, holds the probabilities P (B, H, T, S)
    out: object              # LinearCache of W_o
    relative: object = None  # T5BiasCache of the relative bias (relative="t5"), else None


class MultiHeadAttention(Module):
    """Multi-head (grouped-query when n_kv_head < n_head) self- or cross-attention.

    forward(x, memory=None, key_padding_mask=None, kv_cache=None) -> y (B, T, C)
        x (B, T, C); memory (B, S, C), required iff ``cross`` (with a kv_cache it is read
        on the first call only, later calls may pass None); key_padding_mask bool (B, S),
        True = real token, or a bool
        array broadcastable to (B, H, T, S). With a self-attention kv_cache, S counts
        the cached positions plus the new ones.
    backward(dy) -> dx for self-attention, (dx, dmemory) for cross-attention.
    attention_probs() -> P (B, H, T, S) of the pending forward (for plots), or None.
    """

    def __init__(self, d_model: int, n_head: int, *, n_kv_head: int | None = None, bias: bool = True,
                 causal: bool = False, cross: bool = False, rope: bool = False,
                 rope_layout: str = "interleaved", rope_base: float = 10000.0, alibi: bool = False,
                 window: int | None = None, rng=None, init_std: float | None = None,
                 out_std: float | None = None, dtype=np.float32, relative: str | None = None,
                 relative_clip: int = 16, relative_buckets: int = 32, relative_max_distance: int = 128,
                 dilation: int = 1, global_positions=(), attn_p_drop: float = 0.0, dropout_rng=None,
                 rope_scale: float = 1.0):
        super().__init__()
        C = check_int("d_model", d_model, low=1)
        H = check_int("n_head", n_head, low=1)
        G = H if n_kv_head is None else check_int("n_kv_head", n_kv_head, low=1)
        causal, cross, rope, alibi, bias = (check_flag(name, value) for name, value in (
            ("causal", causal), ("cross", cross), ("rope", rope), ("alibi", alibi), ("bias", bias)))
        self._check_config(C, H, G, causal, cross, rope, rope_layout, alibi, window)
        self.n_head, self.n_kv_head, self.head_dim = H, G, C // H
        self.causal, self.cross, self.window = causal, cross, window
        self.rope, self.rope_layout = rope, rope_layout
        self.rope_base = check_number("rope_base", rope_base, low=0.0, low_open=True, finite=True)
        self.slopes = alibi_slopes(H) if alibi else None
        rng = default_rng(rng)
        self._init_params(C, H, G, bias, rng, init_std, out_std, dtype)
        self._init_relative(relative, relative_clip, relative_buckets, relative_max_distance,
                            rng, init_std, dtype)
        self._masks, self._biases = {}, {}     # (T, S) -> mask / ALiBi bias, built once
        self._decoding = False                 # True after a forward with a kv_cache
        self._init_pattern(dilation, global_positions)
        self._init_dropout(attn_p_drop, dropout_rng)
        self.rope_scale = check_number("rope_scale", rope_scale, low=0.0, low_open=True, finite=True)
        if self.rope_scale != 1.0 and not rope:
            raise ValueError(f"rope_scale: position interpolation scales RoPE's angles; expected rope=True "
                             f"with rope_scale={self.rope_scale}, got rope=False")

    @staticmethod
    def _check_config(C, H, G, causal, cross, rope, rope_layout, alibi, window):
        if C % H:
            raise ValueError(f"d_model: expected a multiple of n_head={H}, got {C}")
        if H % G:
            raise ValueError(f"n_kv_head: expected a divisor of n_head={H}, got {G}")
        check_choice("rope_layout", rope_layout, LAYOUTS)
        if rope and (C // H) % 2:
            raise ValueError(f"rope: RoPE rotates pairs, so the head dim d_model/n_head must be even, "
                             f"got {C}/{H} = {C // H}")
        if window is not None:
            check_int("window", window, low=1)
            if not causal:
                raise ValueError("window: the sliding window looks back only (it is a causal mask); "
                                 f"expected causal=True with window={window}, got causal=False")
        if cross and (causal or rope or alibi or window is not None):
            raise ValueError("cross: cross-attention has no shared time axis between queries and keys; "
                             "expected causal, rope, alibi and window off, got "
                             f"causal={causal}, rope={rope}, alibi={alibi}, window={window}")

    def _init_pattern(self, dilation, global_positions) -> None:
        """The sparse pattern on top of the sliding window: dilation r, global positions."""
        self.dilation = check_int("dilation", dilation, low=1)
        self.global_positions = tuple(check_int(f"global_positions[{n}]", g, low=0)
                                      for n, g in enumerate(check_items("global_positions", global_positions)))
        masks.check_sparse_pattern(self.window, self.dilation, self.global_positions)

    def _init_dropout(self, attn_p_drop, dropout_rng) -> None:
        """Attention dropout on P: its probability and, when it is on, its generator ``self.rng``
        (the name Dropout uses: training and the gradient checker find and replay it)."""
        self.attn_p_drop = check_number("attn_p_drop", attn_p_drop, low=0.0, high=1.0, high_open=True)
        if self.attn_p_drop > 0 and self.relative == "shaw":
            raise ValueError("attn_p_drop: Shaw relative attention has no attention dropout; expected 0 "
                             f"with relative='shaw', got {self.attn_p_drop}")
        check_seed_or_generator("dropout_rng", dropout_rng)
        self.rng = default_rng(dropout_rng) if self.attn_p_drop > 0 else None

    def _init_params(self, C, H, G, bias, rng, init_std, out_std, dtype):
        init_std = 0.02 if init_std is None else check_number("init_std", init_std, low=0.0, finite=True)
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

    # ------------------------------------------------------------------ forward
    def forward(self, x, memory=None, key_padding_mask=None, kv_cache=None):
        S = self._check_inputs(x, memory, kv_cache)                          # the number of keys
        (B, T, _), xp = x.shape, get_xp(x)
        padding = self._padding_mask(key_padding_mask, B, T, S)   # checked before the cache grows
        if self.cross:
            q, k, v, caches = self._project_cross(x, memory, kv_cache)
        else:
            q, k, v, caches = self._project_self(x, kv_cache)
        mask = masks.combine_masks(self._time_mask(T, S, xp), padding, self._sink_mask(kv_cache, T, S, xp))
        bias = self._alibi_bias(T, S, xp) if self.slopes is not None else None
        if self.relative is not None:
            o, attn, relative = self._relative_attention(q, k, v, mask)             # (B, H, T, D)
        else:
            o, attn = self._attend(q, k, v, mask, bias)                            # (B, H, T, D)
            relative = None
        y, out = linear_forward(twin(merge_heads)(o), self.W_o, self.params.get("b_o"))  # (B, T, C)
        self._decoding = kv_cache is not None
        self._save(None if self._decoding else MHACache(*caches, attn, out, relative))
        return y

    def _attend(self, q, k, v, mask, bias):
        """attention_forward, with attention dropout on P in training when attn_p_drop > 0."""
        if self.rng is None or not self.training:
            return twin(attention_forward)(q, k, v, mask, bias)                     # (B, H, T, D)
        return twin(attention_forward)(q, k, v, mask, bias, p_drop=self.attn_p_drop, rng=self.rng)

    def _project_self(self, x, kv_cache):
        """x -> q (B, H, T, D), k, v (B, G, S, D) and the caches (proj, None, rope)."""
        if isinstance(kv_cache, SinkKVCache):
            return self._project_self_sinks(x, kv_cache)
        H, n_kv_head = self.n_head, self.n_kv_head
        qkv, proj = linear_forward(x, self.W_qkv, self.params.get("b_qkv"))  # (B, T, (H+2G)·D)
        heads = split_heads(qkv, self.head_dim)                             # (B, H+2G, T, D) view
        qk, v = heads[:, :H + n_kv_head], heads[:, H + n_kv_head:]           # (B, H+G, T, D), (B, G, T, D)
        rope = None
        if self.rope:   # q and k sit side by side: one call rotates both with one table
            offset = kv_cache.length if kv_cache is not None else 0
            qk, rope = rope_forward(qk, offset, self.rope_base, self.rope_layout, self.rope_scale)  # (B, H+G, T, D)
        q, k = qk[:, :H], qk[:, H:]                                          # (B, H, T, D), (B, G, T, D)
        if kv_cache is not None:
            k, v = kv_cache.append(k, v)                                     # (B, G, S, D), S = past + T
        return q, k, v, (proj, None, rope)

    def _project_self_sinks(self, x, kv_cache):
        """With a rolling SinkKVCache: positions are cache slots (StreamingLLM). The cache holds
        keys before RoPE; all S held + new keys are rotated by their slots 0 .. S-1 and the T
        queries by the last T slots. Decoding only: no backward caches."""
        H, n_kv_head, T = self.n_head, self.n_kv_head, x.shape[1]
        qkv, _ = linear_forward(x, self.W_qkv, self.params.get("b_qkv"))    # (B, T, (H+2G)·D)
        heads = split_heads(qkv, self.head_dim)                             # (B, H+2G, T, D) view
        q, k, v = heads[:, :H], heads[:, H:H + n_kv_head], heads[:, H + n_kv_head:]
        k, v = kv_cache.append(k, v)                                         # (B, G, S, D) slots 0 .. S-1
        if self.rope:
            S = k.shape[2]
            q, _ = rope_forward(q, S - T, self.rope_base, self.rope_layout, self.rope_scale)  # (B, H, T, D)
            k, _ = rope_forward(k, 0, self.rope_base, self.rope_layout, self.rope_scale)      # (B, G, S, D)
        return q, k, v, (None, None, None)

    def _project_cross(self, x, memory, kv_cache):
        """x, memory -> q (B, H, T, D), k, v (B, G, S, D) and the caches (proj, proj_kv, None)."""
        n_kv_head = self.n_kv_head
        q, proj = linear_forward(x, self.W_q, self.params.get("b_q"))        # (B, T, H·D)
        q = split_heads(q, self.head_dim)                                   # (B, H, T, D) view
        if kv_cache is not None and kv_cache.length:                         # memory projected already
            return q, kv_cache.k, kv_cache.v, (proj, None, None)
        kv, proj_kv = linear_forward(memory, self.W_kv, self.params.get("b_kv"))  # (B, S, 2G·D)
        heads = split_heads(kv, self.head_dim)                              # (B, 2G, S, D) view
        k, v = heads[:, :n_kv_head], heads[:, n_kv_head:]                    # (B, G, S, D) each
        if kv_cache is not None:
            k, v = kv_cache.append(k, v)
        return q, k, v, (proj, proj_kv, None)

    # ----------------------------------------------------------------- backward
    def backward(self, dy):
        if self._decoding:
            raise RuntimeError("MultiHeadAttention.backward() after a forward with a kv_cache: "
                               "incremental decoding keeps no backward cache; run forward "
                               "without kv_cache to train")
        proj, proj_kv, rope, attn, out, relative = self._pop_cache()
        do, dW_o, db_o = linear_backward(dy, out)                            # (B, T, H·D)
        self._accumulate_pair("W_o", dW_o, "b_o", db_o)
        if self.relative is not None:
            dq, dk, dv = self._relative_attention_backward(split_heads(do, self.head_dim), attn, relative)
        else:
            dq, dk, dv = twin(attention_backward)(split_heads(do, self.head_dim), attn)[:3]  # ALiBi: no gradient
        if self.cross:
            dx, dW_q, db_q = linear_backward(merge_heads(dq), proj)         # (B, T, C)
            self._accumulate_pair("W_q", dW_q, "b_q", db_q)
            dmemory, dW_kv, db_kv = linear_backward(merge_heads(dk, dv), proj_kv)  # (B, S, C)
            self._accumulate_pair("W_kv", dW_kv, "b_kv", db_kv)
            return dx, dmemory
        if rope is not None:
            dq, dk = rope_backward(dq, rope), rope_backward(dk, rope)
        dx, dW_qkv, db_qkv = linear_backward(twin(merge_heads)(dq, dk, dv), proj)  # (B, T, C)
        self._accumulate_pair("W_qkv", dW_qkv, "b_qkv", db_qkv)
        return dx

    # ------------------------------------------------------ relative positions
    def _init_relative(self, relative, clip, n_buckets, max_distance, rng, init_std, dtype) -> None:
        """Check the relative-position options; create rel_K, rel_V (Shaw) or rel_bias (T5)."""
        check_choice("relative", relative, RELATIVE)
        if relative is not None and (self.cross or self.rope or self.slopes is not None):
            raise ValueError("relative: relative positions replace RoPE and ALiBi and need a shared time "
                             f"axis; expected cross, rope and alibi off with relative={relative!r}, got "
                             f"cross={self.cross}, rope={self.rope}, alibi={self.slopes is not None}")
        self.relative = relative
        init_std = 0.02 if init_std is None else check_number("init_std", init_std, low=0.0, finite=True)
        if relative == "shaw":
            self.relative_clip = check_int("relative_clip", clip, low=0)
            rows = 2 * self.relative_clip + 1                                    # distances -k .. k
            self.add_param("rel_K", init.normal(rng, (rows, self.head_dim), init_std, dtype))
            self.add_param("rel_V", init.normal(rng, (rows, self.head_dim), init_std, dtype))
        elif relative == "t5":
            n_buckets, self.relative_max_distance = check_bucket_options(
                not self.causal, n_buckets, max_distance, names=("relative_buckets", "relative_max_distance"))
            self.add_param("rel_bias", init.normal(rng, (n_buckets, self.n_head), init_std, dtype))

    def _relative_attention(self, q, k, v, mask):
        """(o (B, H, T, D), attention cache, T5BiasCache or None) with this layer's relative positions."""
        if self.relative == "shaw":
            o, attn = shaw_attention_forward(q, k, v, self.rel_K, self.rel_V, mask)       # (B, H, T, D)
            return o, attn, None
        T, S = q.shape[2], k.shape[2]
        bias, relative = t5_bias_forward(self.rel_bias, T, S, not self.causal, self.relative_max_distance)
        o, attn = self._attend(q, k, v, mask, bias)                                       # (B, H, T, D)
        return o, attn, relative

    def _relative_attention_backward(self, do, attn, relative):
        """do (B, H, T, D) -> dq, dk, dv; accumulates the gradients of the relative tables."""
        if self.relative == "shaw":
            dq, dk, dv, drel_K, drel_V = shaw_attention_backward(do, attn)
            self._accumulate("rel_K", drel_K)
            self._accumulate("rel_V", drel_V)
            return dq, dk, dv
        dq, dk, dv, dbias = twin(attention_backward)(do, attn)               # dbias (H, T, S), summed over B
        self._accumulate("rel_bias", t5_bias_backward(dbias, relative))
        return dq, dk, dv

    def _accumulate_pair(self, W_name, dW, b_name, db) -> None:
        self._accumulate(W_name, dW)
        if db is not None:
            self._accumulate(b_name, db)

    def attention_probs(self):
        """P (B, H, T, S) of the pending forward, for plots; None if there is none."""
        return None if self._cache is None else self._cache.attn.probs

    # -------------------------------------------------------- masks and biases
    def _time_mask(self, T, S, xp):
        """The causal or sliding-window mask (T, S), built once per (T, S); None if neither."""
        if not self.causal:
            return None
        if self.window is not None:
            build = lambda: self._window_mask(T, S, xp)                          # noqa: E731
        else:
            build = lambda: masks.causal_mask(T, S, xp=xp)                       # noqa: E731
        return _memo(self._masks, (T, S), build)

    @staticmethod
    def _sink_mask(kv_cache, T, S, xp):
        """A rolling SinkKVCache's (T, S) mask (sinks + window over slots); None for other caches."""
        return kv_cache.step_mask(T, S, xp) if isinstance(kv_cache, SinkKVCache) else None

    def _window_mask(self, T, S, xp):
        """The sliding window (T, S), dilated or with global positions when asked."""
        if self.dilation > 1:
            return masks.dilated_window_mask(T, self.window, self.dilation, S, xp=xp)
        if self.global_positions:
            return masks.global_window_mask(T, self.window, self.global_positions, S, xp=xp)
        return masks.sliding_window_mask(T, self.window, S, xp=xp)

    def _alibi_bias(self, T, S, xp):
        """ALiBi's (H, T, S) bias in the parameters' dtype, built once per (T, S)."""
        return _memo(self._biases, (T, S),
                     lambda: alibi_bias(self.slopes, T, S, dtype=self.W_o.dtype, xp=xp))

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

    def _after_move(self, fn) -> None:
        self._masks, self._biases = {}, {}     # rebuilt on the new device / in the new dtype

    # ------------------------------------------------------------------ checks
    def _check_inputs(self, x, memory, kv_cache) -> int:
        """Check the inputs of forward; returns S, the number of keys the queries will see."""
        C = self.W_o.shape[1]
        check_ndim("x", x, 3, "(B, T, C)")
        check_dim("x", x, 2, C, "C = d_model")
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
        check_dim("memory", memory, 2, C, "C = d_model")
        check_dtype_like("memory", memory, x, "x")
        return memory.shape[1]




def _memo(table: dict, key, build):
    """table[key], built by build() on first use; the oldest entry goes when the table is full."""
    if key not in table:
        if len(table) >= _MEMO_SIZE:
            table.pop(next(iter(table)))
        table[key] = build()
    return table[key]
