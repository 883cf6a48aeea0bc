"""Argument checks for the public entrances, one wording for the whole package.

Every message names the argument, what was expected, and what was given, so a
student sees ``x: expected 3 dimensions (B, T, C), got shape (4, 5)`` instead of a
broadcasting error from deep inside NumPy.
"""
from __future__ import annotations


def check_ndim(name: str, x, ndim, legend: str = "") -> None:
    """Raise ValueError unless ``x.ndim`` is ``ndim`` (an int or a tuple of ints)."""
    allowed = (ndim,) if isinstance(ndim, int) else tuple(ndim)
    if getattr(x, "ndim", None) not in allowed:
        what = " or ".join(str(n) for n in allowed)
        shape = getattr(x, "shape", type(x).__name__)
        suffix = f" {legend}" if legend else ""
        raise ValueError(f"{name}: expected {what} dimensions{suffix}, got shape {shape}")


def check_min_ndim(name: str, x, ndim: int) -> None:
    if getattr(x, "ndim", -1) < ndim:
        raise ValueError(f"{name}: expected at least {ndim} dimensions, "
                         f"got shape {getattr(x, 'shape', type(x).__name__)}")


def check_dim(name: str, x, axis: int, size: int, what: str) -> None:
    """Raise ValueError unless ``x.shape[axis] == size`` (``what`` names the size)."""
    if x.shape[axis] != size:
        raise ValueError(f"{name}: expected size {size} ({what}) on axis {axis}, "
                         f"got shape {tuple(x.shape)}")


def check_same_shape(name: str, x, expected_shape) -> None:
    if tuple(x.shape) != tuple(expected_shape):
        raise ValueError(f"{name}: expected shape {tuple(expected_shape)}, got {tuple(x.shape)}")


def check_float(name: str, x) -> None:
    """Raise TypeError unless ``x`` is an array of floating point numbers."""
    kind = getattr(getattr(x, "dtype", None), "kind", None)
    if kind != "f":
        raise TypeError(f"{name}: expected a floating point array, "
                        f"got {getattr(x, 'dtype', type(x).__name__)}")


def check_integer_ids(name: str, ids, vocab_size: int) -> None:
    """Raise TypeError/ValueError unless ``ids`` holds integers in [0, vocab_size).

    CuPy does not raise on out-of-range indices (they wrap around), so token ids
    are validated here, at the entrance, on every backend.
    """
    kind = getattr(getattr(ids, "dtype", None), "kind", None)
    if kind not in ("i", "u"):
        raise TypeError(f"{name}: expected an integer array of token ids, "
                        f"got {getattr(ids, 'dtype', type(ids).__name__)}")
    if ids.size == 0:
        return
    lo, hi = int(ids.min()), int(ids.max())
    if lo < 0 or hi >= vocab_size:
        raise ValueError(f"{name}: expected ids in [0, {vocab_size}) (vocab_size {vocab_size}), "
                         f"got values in [{lo}, {hi}]")


def check_probability(name: str, p: float, *, allow_one: bool = False) -> None:
    high_ok = p <= 1.0 if allow_one else p < 1.0
    if not (0.0 <= p and high_ok):
        bracket = "]" if allow_one else ")"
        raise ValueError(f"{name}: expected a probability in [0, 1{bracket}, got {p!r}")


def check_choice(name: str, value, choices) -> None:
    if value not in choices:
        raise ValueError(f"{name}: expected one of {tuple(choices)}, got {value!r}")
