"""What a decoder costs at inference and in training, from its config alone: the KV cache's
bytes and the FLOPs per token (Kaplan et al. 2020, "Scaling Laws for Neural Language Models",
section 2.1 and Table 1).

KV cache. Decoding keeps every layer's keys and values of the tokens seen so far:

    bytes per token     = 2 · n_layer · G · D · b          2: K and V; G kv heads of D numbers;
    bytes per sequence  = T · bytes per token · batch      b bytes a number (2 in float16)

Grouped-query attention divides it by H / G: LLaMA-2-70B (80 layers, 64 heads, G = 8, D = 128)
keeps 2·80·8·128·2 = 327,680 bytes a token in float16, where 64 kv heads would keep 2,621,440.

FLOPs per token. A matrix product of a (1, n) row by an (n, m) matrix costs 2nm FLOPs (a
multiply and an add per weight), so a token's forward pass through N multiplied weights
costs 2N; attention adds the scores Q Kᵀ and the sum P V, 2 · 2 · T · C per layer for a
token that sees T others (C = H · D), of which Kaplan et al. count the causal half:

    forward   ≈ 2 N + 2 · n_layer · T · C            (the form of Kaplan's C_forward, with n_ctx = T)
    training  ≈ 3 × forward ≈ 6 N + ...               (the backward costs two forwards:
                                                      one product for the input's gradient, one for the weight's)

N here counts the weights that take part in a product: every parameter except the lookup
tables (learned positions; the token embedding unless it is tied to the output matrix, which
multiplies). Kaplan et al.'s N is smaller: the blocks' weights only (12 · n_layer · C² for
d_ff = 4C), without the output matrix, the biases and the norms; the same formula with their
N gives a lower count (lecture 11 computes both for GPT-2 small). The softmax and the norms'
own arithmetic are a few FLOPs a number, left out as in the paper. In a mixture of experts
(ffn="moe") a token multiplies by the router and its k experts only: N is then
``active_parameters``, the parameters per token, far fewer than the total.
"""
from __future__ import annotations

from ..validate import check_flag, check_int, check_number
from .config import GPTConfig
from .presets import count_parameters, ffn_parameters


def _check_decoder(config) -> GPTConfig:
    if not isinstance(config, GPTConfig):
        raise TypeError(f"config: expected a GPTConfig (a decoder), got {type(config).__name__}")
    config.__post_init__()          # checked again: a field set after construction (n_layer = -12) is not
    return config


def kv_cache_bytes(config, tokens: int = 1, batch: int = 1, bytes_per_number: float = 2) -> int:
    """2 · n_layer · G · D · bytes_per_number · tokens · batch: the KV cache of ``batch`` sequences
    of ``tokens`` tokens (tokens = 1: per token). bytes_per_number: 2 for float16/bfloat16, 4 for float32."""
    c = _check_decoder(config)
    tokens, batch = check_int("tokens", tokens, low=0), check_int("batch", batch, low=0)
    b = check_number("bytes_per_number", bytes_per_number, low=0.0, low_open=True, finite=True)
    G = c.n_kv_head or c.n_head
    return int(2 * c.n_layer * G * c.head_dim * b * tokens * batch)


def matmul_parameters(config) -> int:
    """N: the parameters that multiply (all but the lookup tables: learned positions, and the
    token embedding unless the output matrix is tied to it)."""
    c = _check_decoder(config)
    lookups = (c.block_size * c.d_model if c.position == "learned" else 0)
    lookups += 0 if c.tie_weights else c.vocab_size * c.d_model
    return count_parameters(c) - lookups


def active_parameters(config) -> int:
    """The parameters one token's forward pass multiplies by: ``matmul_parameters``, less, in a
    mixture of experts (ffn="moe"), the E − k experts per layer that the token skips (the
    router still scores all E)."""
    c = _check_decoder(config)
    skipped = c.n_layer * (c.n_experts - c.top_k) if c.ffn == "moe" else 0
    return matmul_parameters(c) - skipped * ffn_parameters(c)


def flops_per_token(config, context: int, training: bool = False) -> int:
    """2 N + 2 · n_layer · context · C for a forward pass (one token attending to ``context``
    tokens); three times that with ``training`` (forward + backward). N counts the parameters
    the token multiplies by (``active_parameters``: all of them but the experts it skips)."""
    c = _check_decoder(config)
    T = check_int("context", context, low=0)
    training = check_flag("training", training)         # "False" is a true string
    forward = 2 * active_parameters(c) + 2 * c.n_layer * T * c.d_model
    return 3 * forward if training else forward
