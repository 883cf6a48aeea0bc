"""Twins of some plain functional routines: the same quantities, fewer passes over memory.

Each twin has the plain function's name, arguments, result and cache type, so a
fast forward can feed a plain backward and the other way round;
tests/test_kernels.py ties every twin to its plain form (1e-12 in float64).
``pairs()`` lists (plain, twin); ``minitransformer.fast.enable()`` writes them into
the core's hook, ``minitransformer.functional.twins.TWINS``.
"""
from __future__ import annotations


def pairs() -> list:
    """[(plain function, its twin)] for every plain routine that has a twin here."""
    from ...functional import activations, attention, cross_entropy, heads, norm, softmax
    from . import attention as fast_attention, cross_entropy as fast_cross_entropy, gelu as fast_gelu
    from . import heads as fast_heads, norm as fast_norm, softmax as fast_softmax
    names = ((softmax, fast_softmax, ("softmax_forward", "softmax_backward", "log_softmax_forward")),
             (norm, fast_norm, ("layernorm_forward", "layernorm_backward", "rmsnorm_forward", "rmsnorm_backward")),
             (activations, fast_gelu, ("gelu_forward",)),
             (heads, fast_heads, ("merge_heads",)),
             (attention, fast_attention, ("attention_forward", "attention_backward")),
             (cross_entropy, fast_cross_entropy, ("cross_entropy_forward", "cross_entropy_backward")))
    return [(getattr(plain, name), getattr(fast, name)) for plain, fast, group in names for name in group]


def twin_of(plain):
    """The twin of the plain routine ``plain`` (whether or not the wing is switched on), or ``plain``."""
    return dict(pairs()).get(plain, plain)
