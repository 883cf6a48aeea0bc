"""Benchmark-only instrumentation: time every matrix product of a training step in place.

The library's matrix products are written ``a @ b``, which NumPy runs as the ufunc
``np.matmul``. An ndarray subclass that overrides ``__array_ufunc__`` sees every
one of them (and every other ufunc) without any change to the library:

    model._map_params(as_timed)          # parameters (and gradients) become TimedArray views
    ...run a step on TimedArray ids...   # every array the step makes is a TimedArray too
    MATMUL.seconds, MATMUL.calls         # time spent inside np.matmul, and how many calls

A product counts as a matrix-matrix product (GEMM) when both operands have at
least 2 dimensions; the matrix-vector products LayerNorm uses as fast row means
and column sums (``a @ ones``) are counted apart, as GEMV: they are reductions,
not the model's matrix products. The wrapper adds a few microseconds to every
ufunc call, so the instrumented step is a little slower than a plain one; the
benchmark divides the in-place GEMM time by the PLAIN step's time.
"""
from __future__ import annotations

import time

import numpy as np


class MatmulClock:
    """Accumulated seconds and call counts of the products seen since ``reset()``."""

    def __init__(self):
        self.reset()

    def reset(self) -> None:
        self.gemm_seconds = 0.0
        self.gemm_calls = 0
        self.gemv_seconds = 0.0
        self.gemv_calls = 0
        self.shapes = {}            # (shape a, shape b) -> [calls, seconds]


MATMUL = MatmulClock()


def _plain(x):
    return x.view(np.ndarray) if isinstance(x, TimedArray) else x


class _TimedNamespace:
    """NumPy, except that the functions creating arrays hand back TimedArrays.

    The library allocates through ``xp = get_xp(...)`` (``xp.empty``, ``xp.zeros`` ...); a
    plain ndarray made there would carry its products out of sight of the clock.
    """
    CREATE = ("empty", "zeros", "ones", "full", "empty_like", "zeros_like", "ones_like",
              "full_like", "arange", "asarray", "eye", "where", "take", "einsum")

    def __getattr__(self, name):
        value = getattr(np, name)
        if name in self.CREATE:
            return lambda *args, **kwargs: _wrap(value(*args, **kwargs))
        return value


TIMED_NUMPY = _TimedNamespace()


class TimedArray(np.ndarray):
    """An ndarray whose ufunc calls go through a wrapper that times ``np.matmul``."""

    def __array_namespace__(self, api_version=None):
        return TIMED_NUMPY

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        args = [_plain(x) for x in inputs]
        out = kwargs.get("out")
        if out is not None:
            kwargs["out"] = tuple(_plain(o) for o in out)
        if ufunc is np.matmul and method == "__call__":
            t0 = time.perf_counter()
            result = ufunc(*args, **kwargs)
            dt = time.perf_counter() - t0
            a, b = args[0], args[1]
            key = (tuple(np.shape(a)), tuple(np.shape(b)))
            if np.ndim(a) >= 2 and np.ndim(b) >= 2:
                MATMUL.gemm_seconds += dt
                MATMUL.gemm_calls += 1
                entry = MATMUL.shapes.setdefault(key, [0, 0.0])
                entry[0] += 1
                entry[1] += dt
            else:
                MATMUL.gemv_seconds += dt
                MATMUL.gemv_calls += 1
        else:
            result = getattr(ufunc, method)(*args, **kwargs)
        if out is not None:      # with out=, hand back the caller's own arrays
            return out[0] if len(out) == 1 else out
        return _wrap(result)


def _wrap(result):
    if isinstance(result, tuple):
        return tuple(_wrap(r) for r in result)
    if isinstance(result, np.ndarray) and not isinstance(result, TimedArray):
        return result.view(TimedArray)
    return result


def as_timed(a):
    """A TimedArray view of ``a`` (no copy); other objects pass through."""
    return a.view(TimedArray) if isinstance(a, np.ndarray) else a


def clock_reading(replica=None) -> tuple:
    """(gemm seconds, gemv seconds, gemm calls) of this process's clock; a DataParallel's
    ``call_workers(clock_reading)`` reads its worker processes' clocks (``replica`` unused)."""
    return MATMUL.gemm_seconds, MATMUL.gemv_seconds, MATMUL.gemm_calls
