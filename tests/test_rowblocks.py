"""The blocked kernels (minitransformer/fast/kernels/rowblocks.py) give the very bits of one call on the whole array.

Softmax and the tanh GELU run their elementwise passes block by block over
the rows of large arrays. Each test runs a function on an array large enough to be
blocked (blocks made small, so there are many, and a last short one) and again with
blocking switched off, and asks for exact equality.
"""
import numpy as np
import pytest

from minitransformer.fast.kernels import rowblocks, twin_of
from minitransformer.functional.activations import gelu_backward, gelu_forward
from minitransformer.functional.softmax import softmax_backward, softmax_forward


def _ops(x, dy):
    """Every blocked forward and backward on x, with upstream gradient dy."""
    p, pc = twin_of(softmax_forward)(x)                # the blocked kernels are the fast twins
    g, gc = twin_of(gelu_forward)(x, "tanh")
    return [p, twin_of(softmax_backward)(dy, pc), g, gelu_backward(dy, gc)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_blocked_equals_whole(monkeypatch, dtype):
    rng = np.random.default_rng(0)
    x = (3 * rng.standard_normal((7, 53, 96))).astype(dtype)     # 371 rows: blocks of 20, last short
    dy = rng.standard_normal(x.shape).astype(dtype)
    monkeypatch.setattr(rowblocks, "MIN_BYTES", 10**12)
    whole = _ops(x, dy)
    monkeypatch.setattr(rowblocks, "MIN_BYTES", 1024)
    monkeypatch.setattr(rowblocks, "BLOCK_BYTES", 20 * 96 * np.dtype(dtype).itemsize)
    blocked = _ops(x, dy)
    for w, b in zip(whole, blocked):
        np.testing.assert_array_equal(b, w)


def test_kernel_sees_every_row_once(monkeypatch):
    monkeypatch.setattr(rowblocks, "MIN_BYTES", 0)
    monkeypatch.setattr(rowblocks, "BLOCK_BYTES", 3 * 8 * 8)
    x = np.arange(10 * 8, dtype=np.float64).reshape(2, 5, 8)
    y = np.zeros_like(x)
    sizes = []

    def kernel(xb, yb):
        sizes.append(xb.shape[0])
        yb += xb + 1

    rowblocks.in_row_blocks(kernel, x, y)
    assert sizes == [3, 3, 3, 1]
    np.testing.assert_array_equal(y, x + 1)


def test_non_contiguous_input_runs_whole(monkeypatch):
    """A transposed (non-contiguous) array cannot be cut into row views: one call, still correct."""
    monkeypatch.setattr(rowblocks, "MIN_BYTES", 0)
    x = np.random.default_rng(1).standard_normal((16, 12)).T       # (12, 16), not C-contiguous
    y = np.empty((12, 16))
    calls = []

    def kernel(xb, yb):
        calls.append(xb.shape)
        np.multiply(xb, 2.0, out=yb)

    rowblocks.in_row_blocks(kernel, x, y)
    assert calls == [(12, 16)]
    np.testing.assert_array_equal(y, 2 * x)
