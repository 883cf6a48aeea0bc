"""What published decoders cost, from their presets (models/costs.py):

    costs_figure   left: the KV cache of one sequence against its length, LLaMA-2-7B, LLaMA-2-70B
                   with its 8 kv heads (GQA) and the same model with 64 (as if multi-head);
                   right: the share of a token's forward FLOPs spent in attention's
                   2 · n_layer · T · C against the context T, for GPT-2 small and the LLaMAs
"""
from __future__ import annotations

import numpy as np

from ..models.costs import flops_per_token, kv_cache_bytes
from ..models.presets import preset
from ._common import new_figure, save

GIB = 2 ** 30


def costs_figure(contexts=(512, 1024, 2048, 4096, 8192, 16384, 32768), path=None):
    """Inputs: contexts, the sequence lengths T to evaluate (ints >= 1); path or None.

    Returns: fig, data {"contexts" (n,), "kv_gib" {label: (n,) GiB per sequence in float16},
                        "attention_share" {preset: (n,) fraction of the forward FLOPs}}.
    """
    T = np.array([int(t) for t in contexts])
    if T.size == 0 or np.any(T < 1):
        raise ValueError(f"contexts: expected sequence lengths >= 1, got {list(contexts)}")
    caches = {"LLaMA-2-7B (32 kv heads)": preset("llama-2-7b"),
              "LLaMA-2-70B, GQA (8 kv heads)": preset("llama-2-70b"),
              "LLaMA-2-70B if MHA (64 kv heads)": preset("llama-2-70b", n_kv_head=None)}
    kv_gib = {label: np.array([kv_cache_bytes(c, tokens=int(t)) for t in T]) / GIB for label, c in caches.items()}
    share = {}
    for name in ("gpt2-small", "llama-2-7b", "llama-2-70b"):
        c = preset(name)
        weights = flops_per_token(c, 0)                                  # 2N: the context-free part
        share[name] = np.array([1 - weights / flops_per_token(c, int(t)) for t in T])
    fig, axes = new_figure(11, 4.2, 1, 2)
    left, right = axes[0]
    for label, gib in kv_gib.items():
        left.plot(T, gib, marker="o", label=label)
    left.set(xscale="log", yscale="log", xlabel="sequence length T (tokens)", ylabel="KV cache, GiB (float16)",
             title="KV cache of one sequence: 2 · n_layer · G · D · 2 bytes · T")
    left.set_xticks(T, [str(t) for t in T])
    left.legend(fontsize=8)
    for name, s in share.items():
        right.plot(T, 100 * s, marker="o", label=name)
    right.set(xscale="log", xlabel="context T (tokens)", ylabel="attention's share of forward FLOPs (%)",
              title="2·n_layer·T·C against 2N per token")
    right.set_xticks(T, [str(t) for t in T])
    right.legend(fontsize=8)
    save(fig, path)
    return fig, {"contexts": T, "kv_gib": kv_gib, "attention_share": share}
