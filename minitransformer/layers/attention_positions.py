"""Where a position scheme enters attention: one small hook per scheme.

MultiHeadAttention knows nothing about positions beyond two calls to its
``positions`` object (and their backwards):

    qk, cache      = positions.rotate(qk, offset)                   before the scores
    o, attn, cache = positions.attend(attention, q, k, v, mask, params)

| scheme                      | rotate (q and k)        | attend                                            | learned tables |
|-----------------------------|-------------------------|---------------------------------------------------|----------------|
| NoPositions()               | identity                | attention(q, k, v, mask)                          | none           |
| RoPE(layout, base, scale)   | RoPE at offset, +1, ... | attention(q, k, v, mask)                          | none           |
| ALiBi()                     | identity                | attention(..., bias = -slope_h (i - j))           | none           |
| T5Bias(bidirectional, ...)  | identity                | attention(..., bias = rel_bias[bucket(j - i), h]) | rel_bias (n_buckets, H) |
| Shaw(clip)                  | identity                | shaw_attention(q, k, v, rel_K, rel_V, mask)       | rel_K, rel_V (2k+1, D) |

``NoPositions`` also serves learned and sinusoidal positions, which the embedding adds.
The learned tables are parameters of the attention layer itself (``attn.rel_bias``
...): ``tables()`` creates them, the layer owns them, ``attend`` reads them from
the layer's ``params`` and ``attend_backward`` returns their gradients by name.
``attention`` is the layer's plain (or twin) attention_forward, with its dropout.

A hook holds options only, no arrays but a memo: the layers of a model share one.
``make_positions(config, causal)`` reads the config's position fields (``position``,
``rope_layout``, ``rope_scale``, ``relative_clip``, ``relative_buckets``,
``relative_max_distance``), the one place that turns them into a hook and checks them.
"""
from __future__ import annotations

from .. import init
from ..backend import get_xp
from ..functional.alibi import alibi_bias, alibi_slopes
from ..functional.rope import LAYOUTS, rope_backward, rope_forward
from ..functional.shaw import shaw_attention_backward, shaw_attention_forward
from ..functional.t5_bias import check_bucket_options, t5_bias_backward, t5_bias_forward
from ..validate import check_choice, check_flag, check_int, check_number

_MEMO_SIZE = 8                    # ALiBi biases kept per hook, for the shapes seen last


class NoPositions:
    """No positions inside attention; the base of every scheme (each method the identity)."""
    name = "none"
    relative = False              # a relative scheme needs queries and keys on one time axis

    def __repr__(self):
        options = ", ".join(f"{k}={v!r}" for k, v in vars(self).items() if not k.startswith("_"))
        return f"{type(self).__name__}({options})"

    def check_layer(self, n_head: int, head_dim: int) -> None:
        """ValueError when this scheme cannot serve a layer of these heads (RoPE: an odd head dim)."""

    def tables(self, n_head: int, head_dim: int, rng, init_std: float, dtype) -> dict:
        """The scheme's learned tables for one layer, by parameter name (none here)."""
        return {}

    def rotate(self, x, offset: int):
        """x (B, heads, T, D) at positions offset .. offset + T - 1 -> (x, cache)."""
        return x, None

    def rotate_backward(self, dx, cache):
        return dx

    def bias(self, params: dict, H: int, T: int, S: int, like):
        """An additive score bias broadcastable to (B, H, T, S) and its cache, or (None, None)."""
        return None, None

    def bias_backward(self, dbias, cache) -> dict:
        """The tables' gradients from dbias, by parameter name (a constant bias: none)."""
        return {}

    def attend(self, attention, q, k, v, mask, params: dict):
        """o (B, H, T, D), the attention cache, this scheme's cache."""
        bias, cache = self.bias(params, q.shape[1], q.shape[2], k.shape[2], q)  # (H, T, S) or None
        o, attn = attention(q, k, v, mask, bias)                             # (B, H, T, D)
        return o, attn, cache

    def attend_backward(self, attention_backward, do, attn, cache):
        """do (B, H, T, D) -> dq, dk, dv and the tables' gradients by name."""
        dq, dk, dv, *dbias = attention_backward(do, attn)
        return dq, dk, dv, self.bias_backward(dbias[0], cache) if dbias else {}


class RoPE(NoPositions):
    """Rotary positions: q and k rotated by their absolute positions (functional/rope.py)."""
    name = "rope"

    def __init__(self, layout: str = "interleaved", base: float = 10000.0, scale: float = 1.0):
        check_choice("layout", layout, LAYOUTS)
        self.layout = layout
        self.base = check_number("base", base, low=0.0, low_open=True, finite=True)
        self.scale = check_number("scale", scale, low=0.0, low_open=True, finite=True)

    def check_layer(self, n_head, head_dim):
        if head_dim % 2:
            raise ValueError(f"positions: RoPE rotates pairs, so the head dim d_model/n_head must be even, "
                             f"got head dim {head_dim}")

    def rotate(self, x, offset: int):
        return rope_forward(x, offset, self.base, self.layout, self.scale)  # (B, heads, T, D)

    def rotate_backward(self, dx, cache):
        return rope_backward(dx, cache)


class ALiBi(NoPositions):
    """A fixed linear distance penalty on the scores (functional/alibi.py), built once per shape."""
    name = "alibi"

    def __init__(self):
        self._memo = {}            # (H, T, S, dtype, array type) -> (H, T, S) bias

    def bias(self, params, H, T, S, like):
        key = (H, T, S, str(like.dtype), type(like))                         # on a new device or dtype: a new bias
        if key not in self._memo:
            if len(self._memo) >= _MEMO_SIZE:
                self._memo.pop(next(iter(self._memo)))                       # the oldest goes
            self._memo[key] = alibi_bias(alibi_slopes(H), T, S, dtype=like.dtype, xp=get_xp(like))  # (H, T, S)
        return self._memo[key], None


class T5Bias(NoPositions):
    """T5's learned bias per distance bucket and head (functional/t5_bias.py)."""
    name = "t5"
    relative = True

    def __init__(self, bidirectional: bool, n_buckets: int = 32, max_distance: int = 128):
        self.bidirectional = check_flag("bidirectional", bidirectional)     # encoder: True; causal decoder: False
        self.n_buckets, self.max_distance = check_bucket_options(bidirectional, n_buckets, max_distance)

    def tables(self, n_head, head_dim, rng, init_std, dtype):
        return {"rel_bias": init.normal(rng, (self.n_buckets, n_head), init_std, dtype)}

    def bias(self, params, H, T, S, like):
        return t5_bias_forward(params["rel_bias"], T, S, self.bidirectional, self.max_distance)  # (H, T, S)

    def bias_backward(self, dbias, cache):
        return {"rel_bias": t5_bias_backward(dbias, cache)}                 # dbias (H, T, S), summed over B


class Shaw(NoPositions):
    """Shaw et al.'s relative attention: learned a^K, a^V inside the scores and the values."""
    name = "shaw"
    relative = True

    def __init__(self, clip: int = 16):
        self.clip = check_int("clip", clip, low=0)

    def tables(self, n_head, head_dim, rng, init_std, dtype):
        rows = 2 * self.clip + 1                                             # distances -k .. k
        rel_K = init.normal(rng, (rows, head_dim), init_std, dtype)
        rel_V = init.normal(rng, (rows, head_dim), init_std, dtype)
        return {"rel_K": rel_K, "rel_V": rel_V}

    def attend(self, attention, q, k, v, mask, params):
        o, attn = shaw_attention_forward(q, k, v, params["rel_K"], params["rel_V"], mask)  # (B, H, T, D)
        return o, attn, None

    def attend_backward(self, attention_backward, do, attn, cache):
        dq, dk, dv, drel_K, drel_V = shaw_attention_backward(do, attn)
        return dq, dk, dv, {"rel_K": drel_K, "rel_V": drel_V}


def make_positions(config, causal: bool) -> NoPositions:
    """The hook of ``config``'s self-attention: its fields ``position``, ``rope_layout``,
    ``rope_scale``, ``relative_clip``, ``relative_buckets``, ``relative_max_distance``
    (TransformerConfig's); ``causal`` picks T5's one-way buckets. ValueError names the field."""
    position = config.position
    check_choice("rope_layout", config.rope_layout, LAYOUTS)
    scale = check_number("rope_scale", config.rope_scale, low=0.0, low_open=True, finite=True)
    if scale != 1.0 and position != "rope":
        raise ValueError(f"rope_scale: position interpolation scales RoPE's angles; expected "
                         f"position='rope' with rope_scale={scale}, got position={position!r}")
    clip = check_int("relative_clip", config.relative_clip, low=0)
    n_buckets, max_distance = check_bucket_options(not causal, config.relative_buckets, config.relative_max_distance,
                                                   names=("relative_buckets", "relative_max_distance"))
    if position == "rope":
        return RoPE(config.rope_layout, scale=scale)
    if position == "alibi":
        return ALiBi()
    if position == "shaw":
        return Shaw(clip)
    if position == "t5":
        return T5Bias(not causal, n_buckets, max_distance)
    return NoPositions()                  # learned, sinusoidal (added by the embedding) or none
