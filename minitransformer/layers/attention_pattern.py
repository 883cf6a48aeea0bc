"""Which keys a query may see: the attention pattern, one small object per kind.

MultiHeadAttention asks its ``pattern`` one question per forward,

    mask = pattern.mask(T, S, xp)        (T, S) bool, True = may attend; None = every key

and combines the answer with the padding and the KV cache's masks. The masks
themselves are made in functional/masks.py; a pattern only chooses one and keeps
it per (T, S), so a model whose layers share one pattern builds each mask once.

| pattern                          | key j visible to the query at position p_i     | config                          |
|----------------------------------|------------------------------------------------|---------------------------------|
| Full()                           | always                                         | (an encoder, cross-attention)   |
| Causal()                         | j <= p_i                                       | every decoder                   |
| SlidingWindow(window)            | p_i - window < j <= p_i                        | ``window``                      |
| DilatedWindow(window, dilation)  | every dilation-th key of the causal window     | ``window``, ``dilation``        |
| GlobalWindow(window, positions)  | the causal window, or a global key or query    | ``window``, ``global_positions``|
| BidirectionalWindow(window)      | abs(p_i - j) < window (Longformer's encoder)   | ``window`` in an encoder        |

``make_pattern(config, causal)`` reads the config's fields, the one place that
turns them into a pattern (and checks them, naming the field).
"""
from __future__ import annotations

from ..functional import masks
from ..validate import check_int, check_items

_MEMO_SIZE = 8   # masks kept per pattern, for the (T, S) shapes seen last


class Full:
    """Every key visible: no mask. The base of every pattern."""
    causal = False

    def __init__(self):
        self._memo = {}          # (T, S, array module's name) -> the (T, S) mask

    def mask(self, T: int, S: int, xp):
        """The (T, S) mask for T queries (the last T of S positions) and S keys; None: every key."""
        key = (T, S, getattr(xp, "__name__", type(xp).__name__))   # on another device: another mask
        if key not in self._memo:
            if len(self._memo) >= _MEMO_SIZE:
                self._memo.pop(next(iter(self._memo)))     # the oldest goes
            self._memo[key] = self._build(T, S, xp)
        return self._memo[key]

    def _build(self, T, S, xp):
        return None

    def __repr__(self):
        options = ", ".join(f"{k}={v!r}" for k, v in vars(self).items() if not k.startswith("_"))
        return f"{type(self).__name__}({options})"


class Causal(Full):
    """A query sees its own position and the ones before it."""
    causal = True

    def _build(self, T, S, xp):
        return masks.causal_mask(T, S, xp=xp)


class SlidingWindow(Causal):
    """The ``window`` most recent positions (the query's own included)."""

    def __init__(self, window: int):
        super().__init__()
        self.window = check_int("window", window, low=1)

    def _build(self, T, S, xp):
        return masks.sliding_window_mask(T, self.window, S, xp=xp)


class DilatedWindow(Causal):
    """Every ``dilation``-th position of a window of ``window`` keys (Child et al. 2019)."""

    def __init__(self, window: int, dilation: int):
        super().__init__()
        self.window = check_int("window", window, low=1)
        self.dilation = check_int("dilation", dilation, low=2)

    def _build(self, T, S, xp):
        return masks.dilated_window_mask(T, self.window, self.dilation, S, xp=xp)


class GlobalWindow(Causal):
    """The sliding window, plus positions that see and are seen by all (Longformer, causal)."""

    def __init__(self, window: int, global_positions):
        super().__init__()
        self.window = check_int("window", window, low=1)
        self.global_positions = tuple(check_int(f"global_positions[{n}]", g, low=0) for n, g in
                                      enumerate(check_items("global_positions", global_positions)))

    def _build(self, T, S, xp):
        return masks.global_window_mask(T, self.window, self.global_positions, S, xp=xp)


class BidirectionalWindow(Full):
    """Keys less than ``window`` positions away on either side (an encoder's local attention)."""

    def __init__(self, window: int):
        super().__init__()
        self.window = check_int("window", window, low=1)

    def _build(self, T, S, xp):
        return masks.bidirectional_window_mask(T, self.window, S, xp=xp)


def make_pattern(config, causal: bool) -> Full:
    """The pattern of ``config``'s self-attention: its fields ``window``, ``dilation`` and
    ``global_positions`` (TransformerConfig's), causal or both ways. ValueError names the field."""
    window, dilation, global_positions = config.window, config.dilation, tuple(config.global_positions)
    masks.check_sparse_pattern(window, dilation, global_positions)
    if not causal:
        if dilation > 1 or global_positions:
            raise ValueError("dilation, global_positions: the sparse patterns are causal; a window that looks "
                             f"both ways has neither; expected dilation=1 and no global positions, got "
                             f"dilation={dilation}, global_positions={list(global_positions)}")
        return Full() if window is None else BidirectionalWindow(window)
    if window is None:
        return Causal()
    if dilation > 1:
        return DilatedWindow(window, dilation)
    if global_positions:
        return GlobalWindow(window, global_positions)
    return SlidingWindow(window)
