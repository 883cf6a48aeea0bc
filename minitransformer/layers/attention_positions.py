"""Where a position scheme enters attention: one small hook per scheme.

MultiHeadAttention knows nothing about positions beyond two calls to its
``positions`` object (and their backwards):

    qk, cache      = positions.rotate(qk, offset)                   before the scores
    o, attn, cache = positions.attend(attention, q, k, v, mask, params)

| scheme | rotate (q and k)        | attend                                           | learned tables |
|--------|-------------------------|--------------------------------------------------|----------------|
| none   | identity                | attention(q, k, v, mask)                         | none           |
| rope   | RoPE at offset, +1, ... | attention(q, k, v, mask)                         | none           |
| alibi  | identity                | attention(..., bias = -slope_h (i - j))          | none           |
| t5     | identity                | attention(..., bias = rel_bias[bucket(j - i), h]) | rel_bias (n_buckets, H) |
| shaw   | identity                | shaw_attention(q, k, v, rel_K, rel_V, mask)      | rel_K, rel_V (2k+1, D) |

``none`` also serves learned and sinusoidal positions, which the embedding adds.
The learned tables are parameters of the attention layer itself (``attn.rel_bias``
...): ``tables()`` creates them, the layer owns them, ``attend`` reads them from
the layer's ``params`` and ``attend_backward`` returns their gradients by name.
``attention`` is the layer's plain (or twin) attention_forward, with its dropout.
"""
from __future__ import annotations

from .. import init
from ..backend import get_xp
from ..functional.alibi import alibi_bias, alibi_slopes
from ..functional.rope import LAYOUTS, rope_backward, rope_forward
from ..functional.shaw import shaw_attention_backward, shaw_attention_forward
from ..functional.t5_bias import check_bucket_options, t5_bias_backward, t5_bias_forward
from ..validate import check_choice, check_int, check_number

RELATIVE = (None, "shaw", "t5")   # relative position schemes inside attention
_MEMO_SIZE = 8                    # ALiBi biases kept per layer, for the shapes seen last


class NoPositions:
    """No positions inside attention; the base of every scheme (each method the identity)."""
    name = "none"

    def tables(self, rng, init_std: float, dtype) -> dict:
        """The scheme's learned tables, by parameter name (none here)."""
        return {}

    def rotate(self, x, offset: int):
        """x (B, heads, T, D) at positions offset .. offset + T - 1 -> (x, cache)."""
        return x, None

    def rotate_backward(self, dx, cache):
        return dx

    def bias(self, params: dict, T: int, S: int, like):
        """An additive score bias broadcastable to (B, H, T, S) and its cache, or (None, None)."""
        return None, None

    def bias_backward(self, dbias, cache) -> dict:
        """The tables' gradients from dbias, by parameter name (a constant bias: none)."""
        return {}

    def attend(self, attention, q, k, v, mask, params: dict):
        """o (B, H, T, D), the attention cache, this scheme's cache."""
        bias, cache = self.bias(params, q.shape[2], k.shape[2], q)          # (H, T, S) or None
        o, attn = attention(q, k, v, mask, bias)                             # (B, H, T, D)
        return o, attn, cache

    def attend_backward(self, attention_backward, do, attn, cache):
        """do (B, H, T, D) -> dq, dk, dv and the tables' gradients by name."""
        dq, dk, dv, *dbias = attention_backward(do, attn)
        return dq, dk, dv, self.bias_backward(dbias[0], cache) if dbias else {}


class RoPE(NoPositions):
    """Rotary positions: q and k rotated by their absolute positions (functional/rope.py)."""
    name = "rope"

    def __init__(self, layout: str, base: float, scale: float):
        self.layout, self.base, self.scale = layout, base, scale

    def rotate(self, x, offset: int):
        return rope_forward(x, offset, self.base, self.layout, self.scale)  # (B, heads, T, D)

    def rotate_backward(self, dx, cache):
        return rope_backward(dx, cache)


class ALiBi(NoPositions):
    """A fixed linear distance penalty on the scores (functional/alibi.py), built once per shape."""
    name = "alibi"

    def __init__(self, n_head: int):
        self.slopes = alibi_slopes(n_head)
        self._memo = {}            # (T, S, dtype, array type) -> (H, T, S) bias

    def bias(self, params, T, S, like):
        key = (T, S, str(like.dtype), type(like))                            # on a new device or dtype: a new bias
        if key not in self._memo:
            if len(self._memo) >= _MEMO_SIZE:
                self._memo.pop(next(iter(self._memo)))                       # the oldest goes
            self._memo[key] = alibi_bias(self.slopes, T, S, dtype=like.dtype, xp=get_xp(like))  # (H, T, S)
        return self._memo[key], None


class T5Bias(NoPositions):
    """T5's learned bias per distance bucket and head (functional/t5_bias.py)."""
    name = "t5"

    def __init__(self, n_head: int, bidirectional: bool, n_buckets: int, max_distance: int):
        self.n_head, self.bidirectional = n_head, bidirectional
        self.n_buckets, self.max_distance = n_buckets, max_distance

    def tables(self, rng, init_std, dtype):
        return {"rel_bias": init.normal(rng, (self.n_buckets, self.n_head), init_std, dtype)}

    def bias(self, params, T, S, like):
        return t5_bias_forward(params["rel_bias"], T, S, self.bidirectional, self.max_distance)  # (H, T, S)

    def bias_backward(self, dbias, cache):
        return {"rel_bias": t5_bias_backward(dbias, cache)}                 # dbias (H, T, S), summed over B


class Shaw(NoPositions):
    """Shaw et al.'s relative attention: learned a^K, a^V inside the scores and the values."""
    name = "shaw"

    def __init__(self, head_dim: int, clip: int):
        self.head_dim, self.clip = head_dim, clip

    def tables(self, rng, init_std, dtype):
        rows = 2 * self.clip + 1                                             # distances -k .. k
        rel_K = init.normal(rng, (rows, self.head_dim), init_std, dtype)
        rel_V = init.normal(rng, (rows, self.head_dim), init_std, dtype)
        return {"rel_K": rel_K, "rel_V": rel_V}

    def attend(self, attention, q, k, v, mask, params):
        o, attn = shaw_attention_forward(q, k, v, params["rel_K"], params["rel_V"], mask)  # (B, H, T, D)
        return o, attn, None

    def attend_backward(self, attention_backward, do, attn, cache):
        dq, dk, dv, drel_K, drel_V = shaw_attention_backward(do, attn)
        return dq, dk, dv, {"rel_K": drel_K, "rel_V": drel_V}


def make_positions(n_head: int, head_dim: int, *, causal: bool, cross: bool, rope: bool, rope_layout: str,
                   rope_base: float, rope_scale: float, alibi: bool, relative, relative_clip: int,
                   relative_buckets: int, relative_max_distance: int) -> NoPositions:
    """The hook for MultiHeadAttention's position options, checked (messages name the option)."""
    check_choice("rope_layout", rope_layout, LAYOUTS)
    rope_base = check_number("rope_base", rope_base, low=0.0, low_open=True, finite=True)
    rope_scale = check_number("rope_scale", rope_scale, low=0.0, low_open=True, finite=True)
    if rope_scale != 1.0 and not rope:
        raise ValueError(f"rope_scale: position interpolation scales RoPE's angles; expected rope=True "
                         f"with rope_scale={rope_scale}, got rope=False")
    check_choice("relative", relative, RELATIVE)
    if relative is not None and (cross or rope or alibi):
        raise ValueError("relative: relative positions replace RoPE and ALiBi and need a shared time "
                         f"axis; expected cross, rope and alibi off with relative={relative!r}, got "
                         f"cross={cross}, rope={rope}, alibi={alibi}")
    if rope and alibi:
        raise ValueError("alibi: one position scheme per layer; expected rope or alibi, got both")
    if rope:
        if head_dim % 2:
            raise ValueError(f"rope: RoPE rotates pairs, so the head dim d_model/n_head must be even, "
                             f"got head dim {head_dim}")
        return RoPE(rope_layout, rope_base, rope_scale)
    if alibi:
        return ALiBi(n_head)
    if relative == "shaw":
        return Shaw(head_dim, check_int("relative_clip", relative_clip, low=0))
    if relative == "t5":
        n_buckets, max_distance = check_bucket_options(not causal, relative_buckets, relative_max_distance,
                                                       names=("relative_buckets", "relative_max_distance"))
        return T5Bias(n_head, not causal, n_buckets, max_distance)
    return NoPositions()
