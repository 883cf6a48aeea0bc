"""The key/value cache of one attention layer, for incremental decoding.

At generation step t a layer needs the keys and values of every earlier position.
Recomputing them costs O(t) projections per step; the cache keeps them, so a step
projects only the new token. ``MultiHeadAttention.forward(x, kv_cache=cache)``
appends to it (self-attention) or fills it once with the projected memory
(cross-attention).

``SinkKVCache`` is the rolling variant of StreamingLLM: it keeps the first
positions (attention sinks) and a recent window, so decoding can go on past the
context the model was trained on.
"""
from __future__ import annotations

from ..backend import get_xp
from ..functional.masks import global_window_mask
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


class SinkKVCache(KVCache):
    """A rolling cache that keeps the first ``n_sink`` positions and the most recent ones
    (StreamingLLM, Xiao et al. 2023): generation runs past the context, with bounded memory.

    Each ``append`` returns the held keys followed by the new ones (this step's keys), then
    evicts the middle: it keeps the first n_sink positions ever seen (the "attention
    sinks", which trained models use as a place to put unneeded attention) and the
    ``window - 1`` most recent, so the next single token sees n_sink + window keys,
    itself included. n_sink = 0 is the plain sliding-window cache.

    Positions are cache slots: a key's position is its index in the cache at this step,
    not its place in the text. So keys are stored BEFORE RoPE (MultiHeadAttention rotates
    the held keys by their slots at every step), and ALiBi distances are slot distances.
    ``positions``: (length,) the text positions of the held entries, for inspection.
    """

    def __init__(self, n_sink: int, window: int):
        super().__init__()
        self.n_sink = check_int("n_sink", n_sink, low=0)
        self.window = check_int("window", window, low=1)
        self.positions = None    # (length,) int64 text positions held
        self.seen = 0            # positions appended so far

    def append(self, k_new, v_new):
        """Append (B, G, T, D) keys and values (before RoPE); returns the held ones followed by
        the new ones, (B, G, length + T, D), then keeps the sinks and the window - 1 most recent."""
        self._check_new(k_new, v_new)
        xp = get_xp(k_new)
        T = k_new.shape[2]
        new_positions = xp.arange(self.seen, self.seen + T)                  # (T,)
        if self._k is None:
            k_all, v_all, positions = k_new, v_new, new_positions             # (B, G, T, D)
        else:
            k_all = xp.concatenate([self._k, k_new], axis=2)                 # (B, G, length + T, D)
            v_all = xp.concatenate([self._v, v_new], axis=2)
            positions = xp.concatenate([self.positions, new_positions])      # (length + T,)
        keep = self.kept_slots(positions.shape[0], xp)                       # (kept,) slot indices
        self._k, self._v, self.positions = k_all[:, :, keep], v_all[:, :, keep], positions[keep]
        self.length, self.seen = int(keep.shape[0]), self.seen + T
        return k_all, v_all

    def kept_slots(self, S: int, xp):
        """The slots that survive eviction out of S: 0 .. n_sink - 1 and the last window - 1."""
        recent = max(self.window - 1, 0)
        if S <= self.n_sink + recent:
            return xp.arange(S)
        return xp.concatenate([xp.arange(self.n_sink), xp.arange(S - recent, S)])

    def step_mask(self, T: int, S: int, xp):
        """(T, S) the keys each of this step's T queries may see: the sinks and its window
        (the last T of the S slots are the queries): functional.masks.global_window_mask."""
        return global_window_mask(T, self.window, range(self.n_sink), S, xp=xp)

