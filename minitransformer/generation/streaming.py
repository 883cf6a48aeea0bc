"""Scoring a long text token by token through a rolling KV cache (StreamingLLM).

    nll_t = -log p(x_{t+1} | what the cache holds after x_0 .. x_t)

Token t is fed alone; the cache keeps the first ``n_sink`` positions and the
``window`` most recent (generation/sink_cache.py ``rolling_cache(model, n_sink, window)``), so the
text may be many times longer than block_size. With n_sink = 0 this is the plain
sliding-window cache: once the first tokens are evicted, a model trained with them
always in view loses the place it parks unneeded attention (the "attention sink",
Xiao et al. 2023), and its loss jumps; keeping a few first tokens avoids that.
"""
from __future__ import annotations

import numpy as np

from ..backend import to_device, to_numpy
from ..functional.softmax import log_softmax_forward
from ..models import GPT
from ..validate import check_int, check_integer_ids, check_ndim
from .generate import _device, _inference
from .sink_cache import rolling_cache


def streaming_nll(model, ids, window: int, n_sink: int = 4):
    """The NLL of every next token of ``ids``, fed one token at a time through a rolling cache.

    Inputs: model, a GPT with RoPE, ALiBi or no positions; ids (B, N) token ids, N >= 2, any
            length; window, the recent positions kept; n_sink, the first positions kept.
    Returns: nll (B, N - 1) float64, nll[b, t] = -log p(ids[b, t + 1] | cache after ids[b, :t + 1]).
    """
    if not isinstance(model, GPT):
        raise TypeError(f"model: expected a GPT, got {type(model).__name__}")
    check_ndim("ids", ids, 2, "(B, N)")
    check_integer_ids("ids", ids, model.config.vocab_size)
    check_int("window", window, low=1)
    check_int("n_sink", n_sink, low=0)                    # None is not 0: 0 sinks is written 0
    ids = np.asarray(to_numpy(ids), dtype=np.int64)
    if ids.shape[1] < 2:
        raise ValueError(f"ids: expected at least 2 tokens per row (one to predict), got shape {ids.shape}")
    cache = rolling_cache(model, n_sink=n_sink, window=window)
    device = _device(model)
    nll = np.empty((ids.shape[0], ids.shape[1] - 1))                          # (B, N - 1)
    with _inference(model):
        for t in range(ids.shape[1] - 1):
            logits = model.forward(to_device(ids[:, t:t + 1], device), cache=cache)   # (B, 1, V)
            logp, _ = log_softmax_forward(to_numpy(logits[:, 0]).astype(np.float64))  # (B, V)
            nll[:, t] = -logp[np.arange(ids.shape[0]), ids[:, t + 1]]
    return nll
