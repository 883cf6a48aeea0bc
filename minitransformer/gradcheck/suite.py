"""The standard gradient-check suite: every layer, a few losses and a whole GPT.

Used by ``python -m minitransformer gradcheck``, by the gradcheck figure and by
benchmarks/gpu_check.py. It sits above models/ in the import order (it builds
a GPT), so it is a module of its own, not part of the checker in __init__.py.
"""
from __future__ import annotations

import numpy as np

from ..backend import to_device
from . import check_module, check_pair


def layer_checks(seed: int = 0, device: str = "cpu"):
    """(name, thunk) pairs; each thunk runs one check and returns its GradcheckResult.

    ``device`` ("cpu" or "cuda"): the inputs are drawn on the host, then they and
    every module are moved there, so the checker perturbs device arrays
    (benchmarks/gpu_check.py runs the same list on CuPy).
    """
    from ..functional.softmax import log_softmax_backward, log_softmax_forward, softmax_backward, softmax_forward
    from ..functional.cross_entropy import cross_entropy_backward, cross_entropy_forward
    from ..functional.attention import attention_backward, attention_forward
    from ..functional.masks import causal_mask
    from ..functional.shaw import shaw_attention_backward, shaw_attention_forward
    from ..layers.activation import ACTIVATIONS, make_activation
    from ..layers.attention import MultiHeadAttention
    from ..layers.attention_pattern import Causal
    from ..layers.attention_positions import T5Bias
    from ..layers.embedding import Embedding
    from ..layers.linear import Linear
    from ..layers.norm import LayerNorm, RMSNorm
    from ..models import GPT, GPTConfig

    rng = np.random.default_rng(seed)
    x = rng.standard_normal((2, 5, 8))                                   # (B, T, C)
    q, k, v = (rng.standard_normal((2, 2, 5, 4)) for _ in range(3))     # (B, H, T, D)
    # Every input is drawn here, before any check runs, so a check sees the same
    # inputs whether it runs alone or after the others.
    targets, emb_ids, gpt_ids = rng.integers(0, 8, (2, 5)), rng.integers(0, 7, (2, 5)), rng.integers(0, 11, (2, 5))
    tables = rng.standard_normal((5, 4)), rng.standard_normal((5, 4))  # Shaw's a^K, a^V rows, k = 2
    x, q, k, v, targets, emb_ids, gpt_ids, mask = (to_device(a, device) for a in
                                                   (x, q, k, v, targets, emb_ids, gpt_ids, causal_mask(5)))
    table_K, table_V = (to_device(a, device) for a in tables)
    f64 = np.float64
    checks = [
        ("linear", lambda: check_module(Linear(8, 6, rng=seed).astype(f64).to(device), x, seed=seed)),
        ("layernorm", lambda: check_module(LayerNorm(8).astype(f64).to(device), x, seed=seed)),
        ("rmsnorm", lambda: check_module(RMSNorm(8).astype(f64).to(device), x, seed=seed)),
        ("softmax", lambda: check_pair(softmax_forward, softmax_backward, {"x": x}, seed=seed)),
        ("log_softmax", lambda: check_pair(log_softmax_forward, log_softmax_backward, {"x": x}, seed=seed)),
        ("cross_entropy", lambda: check_pair(cross_entropy_forward, cross_entropy_backward,
                                             {"logits": x, "targets": targets},
                                             kwargs={"smoothing": 0.1}, wrt=("logits",), seed=seed)),
        ("embedding", lambda: check_module(Embedding(7, 8, rng=seed).astype(f64).to(device),
                                           emb_ids, seed=seed)),
        ("attention (causal)", lambda: check_pair(attention_forward, attention_backward,
                                                  {"q": q, "k": k, "v": v, "mask": mask},
                                                  wrt=("q", "k", "v"), seed=seed)),
        ("multi-head attention", lambda: check_module(
            MultiHeadAttention(8, 2, pattern=Causal(), rng=seed).astype(f64).to(device), x, seed=seed)),
        # h = 5e-5 as in tests/test_attention.py: a nearly saturated softmax row has tiny gradients
        ("Shaw relative attention", lambda: check_pair(
            shaw_attention_forward, shaw_attention_backward,
            {"q": q, "k": k, "v": v, "table_K": table_K, "table_V": table_V, "mask": mask},
            wrt=("q", "k", "v", "table_K", "table_V"), seed=seed, h=5e-5)),
        ("attention + T5 bias", lambda: check_module(
            MultiHeadAttention(8, 2, positions=T5Bias(bidirectional=True, n_buckets=8, max_distance=4),
                               rng=seed, init_std=0.4).astype(f64).to(device), x, seed=seed, h=5e-5)),
    ]
    for name in ACTIVATIONS:
        checks.append((name, lambda name=name: check_module(make_activation(name, f64).to(device), x, seed=seed)))
    # A whole model chains many layers: round-off grows with depth, so the
    # tolerance is the whole-model one (1e-6); a wrong backward still shows ~1.
    tiny = GPTConfig(vocab_size=11, block_size=6, n_layer=2, n_head=2, d_model=8, init_std=0.4)
    checks.append(("GPT (whole model)", lambda: check_module(GPT(tiny, rng=seed, dtype=f64).to(device), gpt_ids,
                                                             seed=seed, tol=1e-6)))
    return checks
