"""Private speed kernels for functional/: the same quantities as the plain forms,
computed with fewer passes over memory. Students read the plain forms in
functional/; nothing here is needed to understand the math.

Each twin has the plain function's name, arguments, result and cache type, so a
fast forward can feed a plain backward and the other way round; tests/test_kernels.py
ties every twin to its plain form (1e-12 in float64). The layers call
``fast(plain)(...)``: the twin on the hot path, the plain form where there is none.
"""
from __future__ import annotations

PLAIN_ONLY: frozenset[str] = frozenset()   # names whose plain form is used even on the hot path
                                           # (homework export writes the assignments' names here)

TWINS: dict = {}   # plain function's name -> its twin; filled on the first call of fast()


def twins() -> dict:
    """TWINS, filled on first use: every plain function's name that has a fast twin -> the twin.

    Built lazily: the twin modules import the plain modules (for the cache types),
    so importing them here at module load would be a cycle.
    """
    if not TWINS:
        from . import attention, cross_entropy, gelu, heads, norm, softmax
        for module, names in ((softmax, ("softmax_forward", "softmax_backward", "log_softmax_forward")),
                              (norm, ("layernorm_forward", "layernorm_backward",
                                      "rmsnorm_forward", "rmsnorm_backward")),
                              (gelu, ("gelu_forward",)),
                              (heads, ("merge_heads",)),
                              (attention, ("attention_forward", "attention_backward")),
                              (cross_entropy, ("cross_entropy_forward", "cross_entropy_backward"))):
            TWINS.update({name: getattr(module, name) for name in names})
    return TWINS


def fast(plain):
    """The fast twin of a plain functional routine (same arguments, result, cache type),
    or `plain` itself when it has none or its name is in PLAIN_ONLY."""
    if plain.__name__ in PLAIN_ONLY:
        return plain
    return twins().get(plain.__name__, plain)
