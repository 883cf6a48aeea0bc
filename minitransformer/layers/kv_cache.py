"""The key/value cache of one attention layer, for incremental decoding.

At generation step t a layer needs the keys and values of every earlier position.
Recomputing them costs O(t) projections per step; the cache keeps them, so a step
projects only the new token. ``MultiHeadAttention.forward(x, kv_cache=cache)``
appends to it (self-attention, through ``extend``) or fills it once with the
projected memory (cross-attention).

The rolling variant of StreamingLLM, which keeps the first positions (attention
sinks) and a recent window, lives with generation (generation/sink_cache.py): it
overrides ``extend`` to place positions by cache slot.
"""
from __future__ import annotations

from ..backend import get_xp
from ..validate import check_dtype_like, check_float, check_int, check_ndim, check_same_shape


class KVCache:
    """The keys and values of the positions seen so far, for ONE attention layer.

    ``k``, ``v``: (B, G, length, D) views of buffers that grow by doubling their
    capacity, so appending one token copies only that token (amortised): plain
    concatenation would copy the whole prefix at every step, O(S²) per sequence.
    Self-attention appends every call (keys already rotated when RoPE is on);
    cross-attention stores the projected memory on its first call.
    """

    def __init__(self):
        self._k = None           # (B, G, capacity, D) buffer
        self._v = None           # (B, G, capacity, Dv) buffer
        self.length = 0          # positions held

    @property
    def k(self):
        return None if self._k is None else self._k[:, :, :self.length]    # (B, G, length, D)

    @property
    def v(self):
        return None if self._v is None else self._v[:, :, :self.length]    # (B, G, length, Dv)

    def append(self, k_new, v_new):
        """Append (B, G, T, D) keys and values; returns all keys and values, (B, G, length, D) views."""
        self._check_new(k_new, v_new)
        end = self.length + k_new.shape[2]
        if self._k is None or end > self._k.shape[2]:
            self._grow(k_new, v_new, max(end, 2 * self.length))
        self._k[:, :, self.length:end] = k_new
        self._v[:, :, self.length:end] = v_new
        self.length = end
        return self.k, self.v

    def extend(self, q, k, v, rotate):
        """One self-attention step: the T new queries and keys take the positions
        length .. length + T - 1 (``rotate``: the layer's RoPE, or the identity), and the
        keys and values join the cache.

        Inputs: q (B, H, T, D), k (B, G, T, D), v (B, G, T, Dv), rotate(x, offset) -> (x, cache).
        Returns: q (B, H, T, D), every key and value (B, G, S, D), S = length + T, and the
                 step's own mask: None (the layer's causal mask is all a plain cache needs).
        """
        q, _ = rotate(q, self.length)                                        # (B, H, T, D)
        k, _ = rotate(k, self.length)                                        # (B, G, T, D)
        k, v = self.append(k, v)                                             # (B, G, S, D)
        return q, k, v, None

    def _check_new(self, k_new, v_new) -> None:
        """k_new, v_new (B, G, T, D) and (B, G, T, Dv) floating, the held keys' B, G, D and dtype."""
        for name, a in (("k_new", k_new), ("v_new", v_new)):
            check_ndim(name, a, 4, "(B, G, T, D)")
            check_float(name, a)
        check_same_shape("v_new", v_new[..., :1], k_new.shape[:3] + (1,))
        check_dtype_like("v_new", v_new, k_new, "k_new")
        if self._k is not None and (k_new.shape[:2] != self._k.shape[:2] or
                                    k_new.shape[3] != self._k.shape[3] or k_new.dtype != self._k.dtype):
            raise ValueError(f"kv_cache: holds keys (B, G, ·, D) = {tuple(self._k.shape)} {self._k.dtype}, "
                             f"got new keys {tuple(k_new.shape)} {k_new.dtype}: use one cache per "
                             "layer and per batch")

    def reorder(self, index) -> None:
        """Keep batch rows ``index`` (an integer array), e.g. the surviving beams of a beam search."""
        if self._k is not None:
            self._k, self._v = self._k[index], self._v[index]

    def _grow(self, k_new, v_new, capacity: int) -> None:
        xp = get_xp(k_new)
        B, n_kv_head, _, D = k_new.shape
        k_buf = xp.empty((B, n_kv_head, capacity, D), dtype=k_new.dtype)
        v_buf = xp.empty((B, n_kv_head, capacity, v_new.shape[3]), dtype=v_new.dtype)
        if self.length:
            k_buf[:, :, :self.length] = self.k
            v_buf[:, :, :self.length] = self.v
        self._k, self._v = k_buf, v_buf
