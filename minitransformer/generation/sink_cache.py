"""The rolling KV cache of StreamingLLM (Xiao et al. 2023): decoding past the context.

A plain KV cache (layers/kv_cache.py) grows with every token, and a model with
learned positions cannot go past block_size. A rolling cache keeps the first
``n_sink`` positions (the "attention sinks") and a recent window, and numbers
positions by cache slot, so a model with RoPE, ALiBi or no positions decodes
indefinitely with bounded memory:

    SinkKVCache(n_sink, window)              one attention layer's rolling cache
    SinkDecoderCache(n_layer, n_sink, window) one per layer of a GPT
    rolling_cache(model, n_sink, window)     the checked way to make one for a model

MultiHeadAttention calls ``cache.extend(q, k, v, rotate)``; this cache's version
rotates by slot and adds its own mask, the plain cache's by position.
"""
from __future__ import annotations

from ..backend import get_xp
from ..functional.masks import global_window_mask
from ..layers.kv_cache import KVCache
from ..models.decoder import DecoderCache, DecoderStack
from ..validate import check_int


class SinkKVCache(KVCache):
    """A rolling cache that keeps the first ``n_sink`` positions and the most recent ones
    (StreamingLLM, Xiao et al. 2023): generation runs past the context, with bounded memory.

    Each ``append`` returns the held keys followed by the new ones (this step's keys), then
    evicts the middle: it keeps the first n_sink positions ever seen (the "attention
    sinks", which trained models use as a place to put unneeded attention) and the
    ``window - 1`` most recent, so the next single token sees n_sink + window keys,
    itself included. n_sink = 0 is the plain sliding-window cache.

    Positions are cache slots: a key's position is its index in the cache at this step,
    not its place in the text. So keys are stored BEFORE RoPE (``extend`` rotates the held
    keys by their slots at every step), and ALiBi distances are slot distances.
    ``positions``: (length,) the text positions of the held entries, for inspection.
    """

    def __init__(self, n_sink: int, window: int):
        super().__init__()
        self.n_sink = check_int("n_sink", n_sink, low=0)
        self.window = check_int("window", window, low=1)
        self.positions = None    # (length,) int64 text positions held
        self.seen = 0            # positions appended so far

    def extend(self, q, k, v, rotate):
        """One self-attention step by cache slot: the held and new keys (before RoPE) are
        rotated by their slots 0 .. S-1, the T queries by the last T slots.

        Inputs: q (B, H, T, D), k (B, G, T, D), v (B, G, T, Dv), rotate(x, offset) -> (x, cache).
        Returns: q (B, H, T, D), the held and new keys and values (B, G, S, D), and the step's
                 (T, S) mask: the sinks and each query's window.
        """
        T = q.shape[2]
        k, v = self.append(k, v)                                             # (B, G, S, D) slots 0 .. S-1
        S = k.shape[2]
        q, _ = rotate(q, S - T)                                              # (B, H, T, D) the last T slots
        k, _ = rotate(k, 0)                                                  # (B, G, S, D)
        return q, k, v, self.step_mask(T, S, get_xp(q))

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


class SinkDecoderCache(DecoderCache):
    """Per-layer rolling caches: the first n_sink positions and a recent window; positions
    are cache slots, so decoding can go past block_size. ``length`` counts every token
    fed; ``position`` is the next token's slot."""

    def __init__(self, n_layer: int, n_sink: int, window: int):
        n_layer = check_int("n_layer", n_layer, low=1)
        super().__init__(n_layer, cross=False)
        self.self_attn = [SinkKVCache(n_sink, window) for _ in range(n_layer)]

    @property
    def position(self) -> int:
        return self.self_attn[0].length


def rolling_cache(model, n_sink: int, window: int) -> SinkDecoderCache:
    """A rolling cache for ``model`` (a decoder-only stack with RoPE, ALiBi or no positions),
    keeping the first ``n_sink`` positions and the ``window`` most recent."""
    if not isinstance(model, DecoderStack):
        raise TypeError(f"model: expected a decoder-only model (a GPT), got {type(model).__name__}; a rolling "
                        "cache keeps one decoder stack's self-attention keys")
    if model.cross:
        raise ValueError("model: a rolling cache is for decoder-only models; expected a GPT, "
                         "got a cross-attending decoder (an encoder-decoder's)")
    config = model.config
    n_sink = check_int("n_sink", n_sink, low=0)
    window = check_int("window", window, low=1)
    if config.position in ("learned", "sinusoidal"):
        raise ValueError(f"window: a rolling cache assigns positions by cache slot, which needs relative "
                         f"positions (rope, alibi or none); {config.position} absolute positions "
                         f"cannot go past block_size={config.block_size}")
    if n_sink + window > config.block_size:
        raise ValueError(f"window: the cache slots n_sink + window must fit block_size={config.block_size}, "
                         f"got n_sink={n_sink} + window={window} = {n_sink + window}")
    return SinkDecoderCache(config.n_layer, n_sink, window)
