"""Argument checks for the public entrances, one wording for the whole package.

Every message names the argument, what was expected, and what was given, so a
student sees ``x: expected 3 dimensions (B, T, C), got shape (4, 5)`` instead of a
broadcasting error from deep inside NumPy.
"""
from __future__ import annotations

import math


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


def _shape_of(name: str, x) -> tuple:
    """x's shape, or TypeError naming ``name`` when x is not an array (None, a list, a number)."""
    shape = getattr(x, "shape", None)
    if not isinstance(shape, tuple):
        raise TypeError(f"{name}: expected an array, got {type(x).__name__}")
    return shape


def check_dim(name: str, x, axis: int, size: int, what: str) -> None:
    """Raise ValueError unless ``x.shape[axis] == size`` (``what`` names the size)."""
    shape = _shape_of(name, x)
    if not -len(shape) <= axis < len(shape):
        raise ValueError(f"{name}: expected size {size} ({what}) on axis {axis}, got shape {shape}")
    if x.shape[axis] != size:
        raise ValueError(f"{name}: expected size {size} ({what}) on axis {axis}, "
                         f"got shape {tuple(x.shape)}")


def check_same_shape(name: str, x, expected_shape, what: str = "") -> None:
    """Raise ValueError unless ``x.shape == expected_shape`` (``what``, if given, says where that
    shape comes from, e.g. "logits' shape without its last axis")."""
    _shape_of(name, x)
    if tuple(x.shape) != tuple(expected_shape):
        source = f" (expected: {what})" if what else ""
        raise ValueError(f"{name}: expected shape {tuple(expected_shape)}, got {tuple(x.shape)}{source}")


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
    lo, hi = ids.min(), ids.max()
    if bool((lo < 0) | (hi >= vocab_size)):       # one copy to the host (on a GPU, one wait), not two
        raise ValueError(f"{name}: expected ids in [0, {vocab_size}) (vocab_size {vocab_size}), "
                         f"got values in [{int(lo)}, {int(hi)}]")


def check_probability(name: str, p: float, *, allow_one: bool = False) -> None:
    p = check_number(name, p)
    high_ok = p <= 1.0 if allow_one else p < 1.0
    if not (0.0 <= p and high_ok):
        bracket = "]" if allow_one else ")"
        raise ValueError(f"{name}: expected a probability in [0, 1{bracket}, got {p!r}")


def check_choice(name: str, value, choices) -> None:
    """Raise ValueError unless ``value`` is one of ``choices`` (an array or a list never is)."""
    try:
        ok = getattr(value, "ndim", 0) == 0 and hash(value) is not None and value in choices
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise ValueError(f"{name}: expected one of {tuple(choices)}, got {value!r}")


def check_number(name: str, value, *, low=None, high=None,
                 low_open: bool = False, high_open: bool = False, finite: bool = False) -> float:
    """A real number in the interval given by ``low``/``high`` (closed unless ``*_open``).

    Raises TypeError for a non-number (a bool or an array counts as one), ValueError
    for NaN or a value outside the interval, and with ``finite`` for ±inf too (a
    learning rate, a std or an eps of inf turns every value into inf or NaN). Returns it as a Python float, which
    never promotes a float32 array it multiplies (a NumPy float64 scalar can).
    """
    import numbers  # local imports keep these appended helpers self-contained
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name}: expected a real number, got {type(value).__name__} {value!r}")
    value = float(value)
    too_low = low is not None and (value <= low if low_open else value < low)
    too_high = high is not None and (value >= high if high_open else value > high)
    if finite and value in (float("inf"), float("-inf")):
        raise ValueError(f"{name}: expected a finite number, got {value!r}")
    if value != value or too_low or too_high:
        left = "(" if low_open or low is None else "["
        right = ")" if high_open or high is None else "]"
        interval = f"{left}{'-inf' if low is None else low}, {'inf' if high is None else high}{right}"
        raise ValueError(f"{name}: expected a number in {interval}, got {value!r}")
    return value


def check_int(name: str, value, *, low=None, high=None) -> int:
    """An integer in [low, high] (either end may be None); returns it as a Python int.

    Raises TypeError for a non-integer (2.0 and True included), ValueError when out of range.
    """
    import numbers
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name}: expected an integer, got {type(value).__name__} {value!r}")
    value = int(value)
    if (low is not None and value < low) or (high is not None and value > high):
        interval = f"[{'-inf' if low is None else low}, {'inf' if high is None else high}]"
        raise ValueError(f"{name}: expected an integer in {interval}, got {value}")
    return value


def check_generator(name: str, rng) -> None:
    """Raise TypeError unless ``rng`` is a ``numpy.random.Generator``.

    Data routines take an explicit generator, never a seed: a seed passed again at
    every step would draw the same batch every step.
    """
    import numpy as np  # local: the rest of this module needs no NumPy
    cupy_generator = type(rng).__module__.startswith("cupy") and type(rng).__name__ == "Generator"
    if not isinstance(rng, np.random.Generator) and not cupy_generator:
        raise TypeError(f"{name}: expected a numpy.random.Generator (numpy.random.default_rng(seed)), "
                        f"got {type(rng).__name__}")


def check_dtype_like(name: str, x, ref, ref_name: str) -> None:
    """Raise TypeError unless ``x`` has the dtype of ``ref`` (mixing would promote silently)."""
    dtype = getattr(x, "dtype", None)
    if dtype is None or dtype != ref.dtype:
        given = dtype if dtype is not None else f"{type(x).__name__} (not an array)"
        raise TypeError(f"{name}: expected dtype {ref.dtype} (the dtype of {ref_name}), got {given}")


def check_class_targets(name: str, targets, num_classes: int, ignore_index: int) -> None:
    """Raise TypeError/ValueError unless ``targets`` holds integers in [0, num_classes)
    or equal to ``ignore_index`` (the positions a loss skips)."""
    kind = getattr(getattr(targets, "dtype", None), "kind", None)
    if kind not in ("i", "u"):
        raise TypeError(f"{name}: expected an integer array of class indices, "
                        f"got {getattr(targets, 'dtype', type(targets).__name__)}")
    bad = ((targets < 0) | (targets >= num_classes)) & (targets != ignore_index)
    if bool(bad.any()):
        first = int(targets[bad].reshape(-1)[0])
        raise ValueError(f"{name}: expected class indices in [0, {num_classes}) or ignore_index "
                         f"{ignore_index}, got {first} (and {int(bad.sum()) - 1} more out of range)")


def check_bool(name: str, x) -> None:
    """Raise TypeError unless ``x`` is a boolean array (masks: True = may attend)."""
    if getattr(getattr(x, "dtype", None), "kind", None) != "b":
        raise TypeError(f"{name}: expected a boolean array, "
                        f"got {getattr(x, 'dtype', type(x).__name__)}")


def check_broadcastable(name: str, x, shape, legend: str = "") -> None:
    """Raise ValueError unless ``x`` broadcasts to ``shape`` without changing ``shape``:
    at most len(shape) dimensions, each (aligned from the right) 1 or equal."""
    target = tuple(shape)
    given = tuple(getattr(x, "shape", ()))
    ok = len(given) <= len(target) and all(
        g in (1, t) for g, t in zip(given[::-1], target[::-1]))
    if not ok:
        suffix = f" {legend}" if legend else ""
        raise ValueError(f"{name}: expected a shape broadcastable to {target}{suffix}, got {given}")


def check_even(name: str, x, axis: int, what: str) -> None:
    """Raise ValueError unless ``x.shape[axis]`` is even (``what`` names the two halves)."""
    if x.shape[axis] % 2:
        raise ValueError(f"{name}: expected an even size ({what}) on axis {axis}, "
                         f"got shape {tuple(x.shape)}")


def check_real_finite(name: str, x) -> None:
    """Raise TypeError unless ``x`` is a real (bool, integer or floating) array, ValueError
    when it holds NaN or ±inf: loaded weights that are not finite make every output NaN."""
    kind = getattr(getattr(x, "dtype", None), "kind", None)
    if kind not in ("b", "i", "u", "f"):
        raise TypeError(f"{name}: expected a real numeric array, "
                        f"got {getattr(x, 'dtype', type(x).__name__)}")
    if kind == "f":
        from .backend import get_xp
        xp = get_xp(x)
        bad = ~xp.isfinite(x)
        if bool(bad.any()):
            raise ValueError(f"{name}: expected finite values, got {int(bad.sum())} NaN or inf "
                             f"of {int(x.size)}")


def check_upstream(name: str, dout, out_shape, out_dtype) -> None:
    """The upstream gradient of ``backward``: an array of the forward output's shape and dtype.

    Raises TypeError when ``dout`` is not an array or its dtype differs from ``out_dtype``
    (mixing would promote the gradients silently), ValueError when its shape is not
    ``out_shape`` (it would broadcast silently). Modules call it through
    ``Module._pop_cache(dout)``, which records the output at ``_save(cache, out)``.
    """
    shape = getattr(dout, "shape", None)
    dtype = getattr(dout, "dtype", None)
    if shape is None or dtype is None:
        raise TypeError(f"{name}: expected an array of shape {tuple(out_shape)} and dtype {out_dtype} "
                        f"(the forward output's), got {type(dout).__name__}")
    if tuple(shape) != tuple(out_shape):
        raise ValueError(f"{name}: expected shape {tuple(out_shape)} (the forward output's), "
                         f"got {tuple(shape)}")
    if dtype != out_dtype:
        raise TypeError(f"{name}: expected dtype {out_dtype} (the forward output's), got {dtype}")


MAX_ELEMENTS = 2 ** 31   # 8 GiB of float32 in one parameter: far above any model this library trains


def check_size(names: str, shape) -> None:
    """ValueError naming the arguments ``names`` when an array of ``shape`` would hold more than
    MAX_ELEMENTS entries: a typo (d_model=10**9) would otherwise end in a MemoryError or NumPy's
    "Maximum allowed dimension exceeded", which name nothing."""
    n = 1
    for s in shape:
        n *= int(s)
    if n > MAX_ELEMENTS:
        raise ValueError(f"{names}: expected at most {MAX_ELEMENTS} parameters in one array, "
                         f"got shape {tuple(int(s) for s in shape)} ({n} entries)")


def check_dtype(name: str, dtype, kinds: str = "f"):
    """A NumPy dtype of one of the ``kinds`` ("f": floating point); TypeError naming ``name`` for
    anything else (None, True, "abc", an int dtype). Returns ``numpy.dtype(dtype)``."""
    import numpy as np
    try:
        dt = None if dtype is None or isinstance(dtype, bool) else np.dtype(dtype)
    except (TypeError, ValueError):
        dt = None
    if dt is None or dt.kind not in kinds:
        what = "a floating point dtype (numpy.float32, 'float64', ...)" if kinds == "f" else f"a dtype of kind {kinds!r}"
        raise TypeError(f"{name}: expected {what}, got {dtype!r}")
    return dt


def check_path(name: str, path) -> str:
    """A file path (str or os.PathLike); TypeError naming ``name`` for anything else. Returns a str."""
    import os
    if isinstance(path, bytes) or not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"{name}: expected a file path (str or pathlib.Path), got {type(path).__name__} {path!r}")
    text = os.fspath(path)
    if not text or "\0" in text:
        raise ValueError(f"{name}: expected a file path, got {text!r}")
    return text


def check_writable_dir(name: str, path) -> str:
    """A folder we can write in, created if missing; OSError naming ``name`` (a flag such as
    --out) when it cannot be created or written (read-only, under a file, /proc). Returns it."""
    import os
    import tempfile
    path = check_path(name, path)
    try:
        os.makedirs(path, exist_ok=True)
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as e:
        raise OSError(f"{name}: cannot write in {path!r} ({e.strerror or e})") from None
    return path


def check_seed_or_generator(name: str, rng) -> None:
    """Raise unless ``rng`` is None, an integer seed >= 0, or a random Generator (NumPy's or CuPy's):
    TypeError for another type (a float, a bool, a list), ValueError for a negative seed."""
    import numbers
    if rng is None or type(rng).__name__ == "Generator":
        return
    if isinstance(rng, bool) or not isinstance(rng, numbers.Integral):
        raise TypeError(f"{name}: expected None, an integer seed >= 0 or a numpy.random.Generator, "
                        f"got {type(rng).__name__} {rng!r}")
    if rng < 0:
        raise ValueError(f"{name}: expected an integer seed >= 0, got {rng}")


def check_flag(name: str, value) -> bool:
    """A Python bool (or NumPy bool scalar); TypeError naming ``name`` for anything else (0, "yes", an array)."""
    if type(value).__name__ not in ("bool", "bool_"):
        raise TypeError(f"{name}: expected True or False, got {type(value).__name__} {value!r}")
    return bool(value)


def check_items(name: str, value) -> list:
    """The items of a list, tuple or 1-D array as a list; TypeError naming ``name`` for anything else
    (None, a number, a str, a dict, an array of another ndim)."""
    if hasattr(value, "tolist") and getattr(value, "ndim", None) == 1:
        return value.tolist()
    if not isinstance(value, (list, tuple, range)):
        raise TypeError(f"{name}: expected a list (or a 1-D array), got {type(value).__name__} {value!r:.60}")
    return list(value)


def check_token_ids(name: str, ids, vocab_size: int) -> list:
    """Token ids as a list of Python ints in [0, vocab_size): a list or a 1-D integer array."""
    import numbers
    ids = check_items(name, ids)
    for position, i in enumerate(ids):
        if isinstance(i, bool) or not isinstance(i, numbers.Integral):
            raise TypeError(f"{name}: expected integer token ids, got {i!r} at position {position}")
        if not 0 <= i < vocab_size:
            raise ValueError(f"{name}: expected ids in [0, {vocab_size}), got {i} at position {position}")
    return [int(i) for i in ids]


# ---------------------------------------------------------------- the command line's numbers
def cli_integer(low: int):
    """An argparse ``type=``: an integer >= ``low``; a bad value gives a one-line error naming the flag."""
    import argparse

    def parse(text):
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < low:
            what = "a positive integer" if low == 1 else f"an integer >= {low}"
            raise argparse.ArgumentTypeError(f"expected {what}, got {value}")
        return value
    parse.__name__ = "int"
    return parse


def cli_real(low: float, high: float = math.inf, low_open=True, high_open=True):
    """An argparse ``type=``: a finite number in the interval; one-line errors like ``cli_integer``."""
    import argparse

    def parse(text):
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        if not (math.isfinite(value) and (value > low if low_open else value >= low)
                and (value < high if high_open else value <= high)):
            interval = f"{'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}"
            raise argparse.ArgumentTypeError(f"expected a number in {interval}, got {text}")
        return value
    parse.__name__ = "float"
    return parse


def cli_one_line_error(parser):
    """``parser.error`` that prints ``error: --flag: what was expected, got what`` and no usage dump."""
    def error(message):
        if message.startswith("argument "):
            message = message[len("argument "):]
        parser.exit(2, f"error: {message} (see: {parser.prog} --help)\n")
    return error


def check_random_source(name: str, rng) -> None:
    """Raise TypeError unless ``rng`` draws like a Generator (a ``random(size, dtype)`` method):
    NumPy's, CuPy's, or a device-side generator of the same interface. 0 or a seed is refused."""
    if not callable(getattr(rng, "random", None)) or isinstance(rng, type):
        raise TypeError(f"{name}: expected a random Generator (numpy.random.default_rng(seed)), "
                        f"got {type(rng).__name__} {rng!r:.40}")


def check_mask(name: str, mask, shape, meaning: str = "True/1 = real token", shape_from: str = "") -> None:
    """A 0/1 array of ``shape``: booleans, or the integers 0/1 tokenizers give (``meaning`` says
    what 1 marks: by default a real token of a padding mask). TypeError for another dtype (a
    float mask of 0.5 is neither), ValueError for another shape or an integer other than 0 and 1."""
    check_same_shape(name, mask, shape, shape_from)
    kind = getattr(getattr(mask, "dtype", None), "kind", None)
    if kind not in ("b", "i", "u"):
        raise TypeError(f"{name}: expected booleans or integers 0/1 ({meaning}), "
                        f"got {getattr(mask, 'dtype', type(mask).__name__)}")
    if kind != "b" and bool(((mask != 0) & (mask != 1)).any()):
        raise ValueError(f"{name}: expected 0/1 (or True/False; {meaning}), got values in "
                         f"[{int(mask.min())}, {int(mask.max())}]")
