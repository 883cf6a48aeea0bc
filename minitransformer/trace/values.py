"""What a trace keeps of one argument or result: its name, shape, dtype, statistics, a bounded preview.

    value = summarize("x", x, limits)      # at the moment of the call (later in-place writes do not change it)

An array keeps five statistics (min, max, mean, std, max |·|) over its finite
entries and the counts of NaN, -inf and +inf, and a preview: the first 2-D slices over the last two
axes (index 0, 1, ... of the leading axes, in order), each cropped to at most
``limits.rows`` × ``limits.cols``, until ``limits.values`` entries are kept. A
cache (a NamedTuple) keeps its fields, each summarized the same way; a number keeps
its value. ``limits.keep`` also keeps a full copy of every array (``Value.array``),
which the homework comparison reads; the page never embeds it.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np

from ..backend import to_numpy


@dataclass(frozen=True)
class Limits:
    rows: int = 48          # rows of one preview slice
    cols: int = 64          # columns of one preview slice
    values: int = 4096      # entries over all slices of one array
    keep: bool = False      # keep a full float64 copy of every array too


@dataclass
class Value:
    name: str                       # its name in the routine: "x", "W", "dx", "cache"
    kind: str                       # "array", "cache", "parts", "number", "same", "none" or "other"
    shape: tuple = ()
    dtype: str = ""
    stats: dict = field(default_factory=dict)     # min, max, mean, std, absmax; nan, neginf, posinf counts
    slices: list = field(default_factory=list)    # [(leading index tuple, 2-D float64 array)]
    fields: list = field(default_factory=list)    # a cache's fields, as Values
    number: float | None = None     # a number's value
    text: str = ""                  # what it is, in words, for "other"
    array: object = None            # the full array (float64 copy), when Limits.keep
    label: str = ""                 # what it is in the model: "blocks.0.attn.sublayer.W_qkv", "step 3 y"
    param: str = ""                 # the parameter it is (dotted name, "ᵀ" for a transposed view), or ""
    source: tuple | None = None     # (step, result name, the same array?, "" / "view" / "changed"), or None
    grad_of: tuple | None = None    # backward: (forward step, name there) of the value this is the gradient of


def is_array(obj) -> bool:
    """NumPy or CuPy arrays (a tuple shape and a dtype), never NumPy scalars or the modules themselves."""
    return isinstance(getattr(obj, "shape", None), tuple) and hasattr(obj, "dtype") and not isinstance(obj, np.generic)


def is_cache(obj) -> bool:
    """A functional routine's cache: a NamedTuple."""
    return isinstance(obj, tuple) and hasattr(obj, "_fields")


def summarize(name: str, obj, limits: Limits, known: dict | None = None) -> Value:
    """The Value of ``obj`` under ``name``, computed now. ``known``: id -> the argument's name, for a
    cache's fields that are arguments of the same call (named, not summarized twice)."""
    if obj is None:
        return Value(name, "none")
    if known and id(obj) in known:
        return Value(name, "same", text=known[id(obj)])
    if is_cache(obj):
        return Value(name, "cache", text=type(obj).__name__,
                     fields=[summarize(f, getattr(obj, f), limits, known) for f in obj._fields])
    if is_array(obj):
        return _array(name, obj, limits)
    if isinstance(obj, (bool, int, float, np.generic)):
        return Value(name, "number", number=float(obj), text=repr(obj.item() if isinstance(obj, np.generic) else obj))
    return Value(name, "other", text=_short(obj))


def _array(name: str, obj, limits: Limits) -> Value:
    a = to_numpy(obj)
    value = Value(name, "array", tuple(int(n) for n in a.shape), str(a.dtype))
    if a.dtype.kind not in "biuf":
        value.text = f"{a.dtype} array"
        return value
    value.stats = _stats(a)
    value.slices = _slices(a, limits)
    if limits.keep:
        value.array = a.astype(np.float64)                                  # a copy, in float64
    return value


def _stats(a: np.ndarray) -> dict:
    """Over the finite entries; the others counted apart (a masked score is -inf by design).
    An all-finite array (nearly all of them) is read in its own dtype, float64 accumulators."""
    if a.size and (a.dtype.kind in "biu" or bool(np.isfinite(a).all())):
        low, high = float(a.min()), float(a.max())
        return {"min": low, "max": high, "mean": float(a.mean(dtype=np.float64)),
                "std": float(a.std(dtype=np.float64)), "absmax": max(abs(low), abs(high))}
    a = a.astype(np.float64)
    finite = a[np.isfinite(a)]
    counts = {"nan": int(np.isnan(a).sum()), "neginf": int(np.isneginf(a).sum()), "posinf": int(np.isposinf(a).sum())}
    counts = {k: n for k, n in counts.items() if n}
    if finite.size == 0:
        return counts
    return {"min": float(finite.min()), "max": float(finite.max()), "mean": float(finite.mean()),
            "std": float(finite.std()), "absmax": float(np.abs(finite).max()), **counts}


def _slices(a: np.ndarray, limits: Limits) -> list:
    """The first 2-D slices over the last two axes, each cropped, within limits.values entries.
    A last axis of 1 (a grey image's channel) is dropped first, so an image previews as an image."""
    if a.ndim == 0:
        return [((), a.reshape(1, 1).astype(np.float64))]
    if a.ndim >= 3 and a.shape[-1] == 1:
        a = a[..., 0]
    grid = a.reshape((1,) + a.shape) if a.ndim == 1 else a                      # (..., rows, cols)
    lead = grid.shape[:-2]
    rows, cols = min(grid.shape[-2], limits.rows), min(grid.shape[-1], limits.cols)
    if rows * cols == 0:
        return []
    found, kept = [], 0
    for index in itertools.product(*(range(n) for n in lead)):
        if found and kept + rows * cols > limits.values:
            break
        found.append((index, grid[index][:rows, :cols].astype(np.float64)))  # (rows, cols), a copy
        kept += rows * cols
    return found


def _short(obj) -> str:
    text = repr(obj)
    return text if len(text) <= 80 else text[:77] + "..."
