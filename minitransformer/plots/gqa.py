"""Grouped-query attention (Ainslie et al. 2023): which query heads share a key/value head,
and what that saves in the KV cache.

    gqa_figure   MHA (G = H), GQA (1 < G < H), MQA (G = 1): the head sharing, and the
                 KV-cache bytes per token per layer

Query head h reads kv head h // (H / G) (functional/repeat_kv.py). The figure does
not compute that rule itself: it reads it off repeat_kv and attention_forward, giving
kv head g the value g so that every query head outputs the number of the kv head
it read. The cache sizes are measured on a real KVCache filled by
MultiHeadAttention. Heads are numbered from 0, as everywhere in plots/.
"""
from __future__ import annotations

import numpy as np

from ..functional.attention import attention_forward
from ..functional.repeat_kv import repeat_kv_forward
from ..layers import KVCache, MultiHeadAttention
from ..layers.attention_pattern import Causal
from ..validate import check_int
from ._common import new_figure, save

VARIANTS = (("MHA", 8), ("GQA", 2), ("MQA", 1))   # (name, G kv heads) for H = 8 query heads


def kv_head_of_query(n_head: int, n_kv_head: int) -> np.ndarray:
    """(H,) ints: the kv head each query head reads, read off repeat_kv then attention_forward.

    q and k are zeros, so every head attends uniformly; v of kv head g is the constant g,
    so query head h outputs exactly the number of its kv head.
    """
    H, G = check_int("n_head", n_head, low=1), check_int("n_kv_head", n_kv_head, low=1)
    if H % G:
        raise ValueError(f"n_kv_head: expected a divisor of n_head={H}, got {G}")
    q = np.zeros((1, H, 1, 2))                                      # (B, H, T, D)
    k = np.zeros((1, G, 1, 2))                                      # (B, G, S, D)
    v = np.broadcast_to(np.arange(G, dtype=np.float64)[None, :, None, None], (1, G, 1, 1))  # (B, G, S, 1)
    k_heads, _ = repeat_kv_forward(k, H // G)                       # (B, H, S, D)
    v_heads, _ = repeat_kv_forward(np.ascontiguousarray(v), H // G)  # (B, H, S, 1)
    out, _ = attention_forward(q, k_heads, v_heads)                 # (B, H, T, 1)
    return np.rint(out[0, :, 0, 0]).astype(int)                     # (H,)


def kv_cache_bytes_per_token(n_head: int, n_kv_head: int, head_dim: int, tokens: int = 16) -> float:
    """Bytes of one layer's KVCache per token (float32), measured after ``tokens`` tokens."""
    layer = MultiHeadAttention(n_head * head_dim, n_head, n_kv_head=n_kv_head, pattern=Causal(), rng=0)
    cache = KVCache()
    layer.forward(np.zeros((1, tokens, n_head * head_dim), np.float32), kv_cache=cache)
    return (cache.k.nbytes + cache.v.nbytes) / tokens


def gqa_figure(n_head: int = 8, variants=VARIANTS, head_dim: int = 64, path=None):
    """Left: the query heads (circles) and the kv heads (squares) they read, one row per
    variant. Right: the KV-cache size per token per layer, 2·G·D numbers (float32 here).

    Inputs: n_head H; variants, (name, G) pairs with G dividing H; head_dim D; path or None.
    Returns: fig, data {"names", "n_kv_head" (V,), "kv_of_query" (V, H) ints,
                        "cache_bytes" (V,) float bytes per token per layer}.
    """
    H, D = check_int("n_head", n_head, low=1, high=64), check_int("head_dim", head_dim, low=1)
    names = [str(name) for name, _ in variants]
    G = np.array([check_int(f"variants[{n}] kv heads", g, low=1) for n, (_, g) in enumerate(variants)])
    if len(G) == 0 or np.any(H % G):
        raise ValueError(f"variants: expected (name, G) pairs with G dividing n_head={H}, got {list(variants)}")
    kv_of_query = np.stack([kv_head_of_query(H, g) for g in G])     # (V, H)
    cache_bytes = np.array([kv_cache_bytes_per_token(H, g, D) for g in G])   # (V,)
    fig, axes = new_figure(15, 1.6 * len(G) + 1.8, 1, 2, width_ratios=(1.5, 1))
    _draw_sharing(axes[0, 0], names, G, kv_of_query)
    ax = axes[0, 1]
    bars = ax.barh(np.arange(len(G)), cache_bytes, color="#4c9be8")
    ax.bar_label(bars, [f"{b:,.0f} B = 2·{g}·{D}·4" for b, g in zip(cache_bytes, G)], padding=4)
    ax.set_yticks(np.arange(len(G)), [f"{n}\nG = {g}" for n, g in zip(names, G)])
    ax.invert_yaxis()
    ax.set_xlim(0, 1.6 * cache_bytes.max())
    ax.set_xlabel("KV-cache bytes per token per layer (float32)")
    ax.set_title(f"KV cache: 2·G·D numbers per token, D = {D}")
    fig.suptitle(f"Multi-head, grouped-query and multi-query attention, H = {H} query heads")
    save(fig, path)
    return fig, {"names": names, "n_kv_head": G, "kv_of_query": kv_of_query, "cache_bytes": cache_bytes}


def _draw_sharing(ax, names, G, kv_of_query) -> None:
    """One band per variant: query heads on top, kv heads below, a line for each read."""
    H = kv_of_query.shape[1]
    for row, (name, g, reads) in enumerate(zip(names, G, kv_of_query)):
        top, bottom = -3.0 * row, -3.0 * row - 1.6
        kv_x = (np.arange(g) + 0.5) * H / g - 0.5                   # kv head g under its query heads
        for h, kv in enumerate(reads):
            ax.plot([h, kv_x[kv]], [top, bottom], color=f"C{kv % 10}", linewidth=1.2, zorder=1)
            ax.scatter(h, top, s=260, color="white", edgecolor=f"C{kv % 10}", linewidth=2, zorder=2)
            ax.text(h, top, str(h), ha="center", va="center", fontsize=8, zorder=3)
        for kv, x in enumerate(kv_x):
            ax.scatter(x, bottom, s=300, marker="s", color=f"C{kv % 10}", zorder=2)
            ax.text(x, bottom, str(kv), ha="center", va="center", fontsize=8, color="white", zorder=3)
        ax.text(-1.2, (top + bottom) / 2, f"{name}\nG = {g}", ha="right", va="center", fontsize=10)
    ax.set_xlim(-3.2, H - 0.3)
    ax.set_ylim(-3.0 * len(G) + 0.8, 0.8)
    ax.set_axis_off()
    ax.set_title("query heads (circles, top) read kv heads (squares, below): h reads h // (H / G)")
