"""Hypothesis strategies shared by the tests: shapes, float64 arrays, seeds."""
from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

seeds = st.integers(min_value=0, max_value=2**32 - 1)


@st.composite
def shapes(draw, min_dims=1, max_dims=4, min_side=1, max_side=5):
    """A shape with size-1 sides allowed (broadcasting bugs hide there)."""
    n = draw(st.integers(min_dims, max_dims))
    return tuple(draw(st.integers(min_side, max_side)) for _ in range(n))


def normal_array(seed: int, shape, scale: float = 1.0, dtype=np.float64) -> np.ndarray:
    """A contiguous array of N(0, scale²) entries from an explicit generator."""
    return (scale * np.random.default_rng(seed).standard_normal(shape)).astype(dtype)


scales = st.sampled_from([1e-3, 1.0, 3.0])          # magnitudes for gradient checks
big_scales = st.sampled_from([1.0, 1e2, 1e4])       # magnitudes for finiteness invariants


def integer_ids(seed: int, shape, high: int, dtype=np.int64) -> np.ndarray:
    """Integers uniform in [0, high) from an explicit generator (token ids, class targets)."""
    return np.random.default_rng(seed).integers(0, high, size=shape).astype(dtype)


@st.composite
def head_counts(draw, max_heads: int = 4):
    """(H, G): H query heads and G kv heads, G a divisor of H (G = H multi-head, G = 1 multi-query)."""
    H = draw(st.integers(1, max_heads))
    n_kv_head = draw(st.sampled_from([g for g in range(1, H + 1) if H % g == 0]))
    return H, n_kv_head


def uniform_array(seed: int, shape, bound: float, dtype=np.float64) -> np.ndarray:
    """A contiguous array uniform in [-bound, bound] from an explicit generator."""
    return np.random.default_rng(seed).uniform(-bound, bound, shape).astype(dtype)


# Magnitudes for activation inputs: the middle, the bend, and the tails up to |x| = 30.
activation_bounds = st.sampled_from([1.0, 5.0, 30.0])


def forward_in_chunks(layer, x, chunks, kv_cache):
    """layer.forward over consecutive chunks of x's time axis (sizes ``chunks``) through one
    KV cache, the outputs joined along time: what a full forward of x should equal."""
    outputs, start = [], 0
    for n in chunks:
        outputs.append(layer.forward(x[:, start:start + n], kv_cache=kv_cache))
        start += n
    return np.concatenate(outputs, axis=1)
