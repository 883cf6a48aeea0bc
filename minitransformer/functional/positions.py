"""Position information that has no parameters, one file per scheme, gathered here.

    sinusoidal_table   added to the token embeddings          functional/sinusoidal.py
    rope_forward/backward   rotates q and k inside attention   functional/rope.py
    alibi_slopes, alibi_bias   a bias on the attention scores  functional/alibi.py

Learned positions are a parameter table: layers/positions.py. Relative schemes with
learned tables act inside attention: functional/shaw.py (Shaw et al.) and
functional/t5_bias.py (T5's buckets); their tables live in MultiHeadAttention.
"""
from .alibi import alibi_bias, alibi_slopes
from .rope import RopeCache, rope_backward, rope_forward
from .sinusoidal import sinusoidal_table

__all__ = ["alibi_bias", "alibi_slopes", "RopeCache", "rope_backward", "rope_forward",
           "sinusoidal_table"]
