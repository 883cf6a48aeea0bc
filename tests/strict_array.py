"""A strict array type for the backend-agnostic test: NumPy underneath, but only the
calls an array module like CuPy also offers, and no silent way back to the host.

``StrictArray`` wraps a NumPy array (it is NOT an ndarray subclass) and plays the
part of a device array:

- ``__array_namespace__()`` answers ``STRICT``, a namespace object exposing only the
  functions in ``ALLOWED`` (each exists in CuPy with the same meaning); anything
  else is an AttributeError naming the function;
- NumPy functions refuse it: ``np.exp(a)``, ``np.zeros_like(a)`` raise (``__array_ufunc__
  = None``, ``__array_function__``), and ``np.asarray(a)`` / ``np.array(a)`` raise
  (``__array__``): on CuPy those are NumPy-only calls or silent device-to-host copies;
- a plain ndarray or a NumPy float scalar meeting a StrictArray in arithmetic raises:
  CuPy refuses host arrays, and a ``numpy.float64`` scalar would promote float32;
- any operation whose float32 operands give a float64 result raises (a hidden
  promotion), and so does a float64 computation that produces float32 (a hidden
  downcast); ``astype`` is the explicit way to change dtype;
- reductions return 0-d arrays, as CuPy does, not NumPy scalars; ``float()``, ``int()``,
  ``bool()``, ``item()`` and ``tolist()`` are allowed (CuPy allows them: each is a copy to
  the host that waits for the device) and counted in ``TRANSFERS["device_to_host"]``;
- ``ufunc.reduce`` exists only for add and multiply, ``ufunc.reduceat`` only for add, as
  on CuPy;
- ``STRICT.asarray(host_array)`` is the one explicit host-to-device move; every such
  move is counted in ``TRANSFERS`` so a test can assert a hot path makes none.
"""
from __future__ import annotations

import numbers

import numpy as np


class StrictError(TypeError):
    """A call that would be NumPy-only, a silent host copy, or a hidden dtype change."""


TRANSFERS = {"host_to_device": 0, "device_to_host": 0}   # explicit moves; device_to_host: float(), int(),
                                                         # bool(), item(), tolist(): each waits for the device


# ------------------------------------------------------------------ wrapping helpers
def _unwrap(obj, allow_host: bool = False):
    """StrictArray -> its ndarray; containers recursively; a host ndarray raises unless allowed."""
    if isinstance(obj, StrictArray):
        return obj._a
    if isinstance(obj, (list, tuple)):
        return type(obj)(_unwrap(o, allow_host) for o in obj)
    if isinstance(obj, np.ndarray) and not allow_host:
        raise StrictError(f"a host numpy.ndarray {obj.shape} {obj.dtype} met a device array: "
                          "on CuPy this is an error (make it with xp, or move it explicitly)")
    if isinstance(obj, np.generic) and obj.dtype.kind == "f":
        raise StrictError(f"a NumPy float scalar {obj!r} ({obj.dtype}) met a device array: "
                          "it can promote float32 to float64; use a Python float")
    return obj


def _wrap(result):
    if isinstance(result, tuple):
        return tuple(_wrap(r) for r in result)
    if isinstance(result, np.ndarray):
        return StrictArray(result)
    if isinstance(result, np.generic):            # CuPy's reductions give 0-d arrays
        return StrictArray(np.asarray(result))
    return result


def _float_dtypes(args, kwargs):
    found = set()

    def visit(o):
        if isinstance(o, StrictArray):
            if o._a.dtype.kind == "f":
                found.add(o._a.dtype)
        elif isinstance(o, (list, tuple)):
            for x in o:
                visit(x)
    visit(args)
    visit(tuple(kwargs.values()))
    return found


def _check_promotion(name, inputs, result):
    """Raise on float32 in -> float64 out, or float64 in -> float32 out (not via astype)."""
    outs = result if isinstance(result, tuple) else (result,)
    for r in outs:
        dt = getattr(r, "dtype", None)
        if dt is None or dt.kind != "f":
            continue
        if dt == np.float64 and np.dtype(np.float32) in inputs:
            raise StrictError(f"{name}: float32 operands gave a float64 result (a hidden promotion)")
        if dt == np.float32 and np.dtype(np.float64) in inputs and np.dtype(np.float32) not in inputs:
            raise StrictError(f"{name}: float64 operands gave a float32 result (a hidden downcast)")


def _call(name, fn, args, kwargs, allow_host=False):
    inputs = _float_dtypes(args, kwargs)
    result = fn(*_unwrap(args, allow_host), **{k: _unwrap(v, allow_host) for k, v in kwargs.items()})
    _check_promotion(name, inputs, result)
    out = kwargs.get("out")
    if out is not None:                           # hand back the caller's own array
        return out
    return _wrap(result)


# ------------------------------------------------------------------------ the array
def _binary(op_name):
    op = getattr(np.ndarray, op_name)

    def method(self, other):
        if isinstance(other, (np.ndarray, np.generic)) or isinstance(other, (numbers.Number, StrictArray)):
            return _call(op_name, op, (self, other), {})
        return NotImplemented
    method.__name__ = op_name
    return method


def _inplace(op_name):
    op = getattr(np.ndarray, op_name)

    def method(self, other):
        inputs = _float_dtypes((self, other), {})
        op(self._a, _unwrap(other))
        _check_promotion(op_name, inputs, self._a)
        return self
    method.__name__ = op_name
    return method


def _unary(op_name):
    op = getattr(np.ndarray, op_name)

    def method(self):
        return _wrap(op(self._a))
    method.__name__ = op_name
    return method


# ndarray methods CuPy's ndarray also has, with the same meaning.
METHODS = ("reshape", "transpose", "swapaxes", "sum", "max", "min", "mean", "any", "all", "argmax",
           "argmin", "copy", "ravel", "fill", "cumsum", "prod", "take", "clip", "nonzero", "tolist",
           "item", "var", "std", "dot")
BINARY = ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__truediv__",
          "__rtruediv__", "__floordiv__", "__rfloordiv__", "__mod__", "__rmod__", "__pow__", "__rpow__",
          "__matmul__", "__rmatmul__", "__and__", "__rand__", "__or__", "__ror__", "__xor__", "__rxor__",
          "__lt__", "__le__", "__gt__", "__ge__", "__eq__", "__ne__")
INPLACE = ("__iadd__", "__isub__", "__imul__", "__itruediv__", "__ifloordiv__", "__imod__", "__ipow__",
           "__iand__", "__ior__", "__ixor__")
UNARY = ("__neg__", "__pos__", "__abs__", "__invert__")


class StrictArray:
    __slots__ = ("_a",)
    __array_ufunc__ = None          # NumPy ufuncs refuse it; ndarray binary ops defer to ours
    __hash__ = None

    def __init__(self, a: np.ndarray):
        self._a = a

    # --- the protocols that must not reach NumPy silently
    def __array_namespace__(self, api_version=None):
        return STRICT

    def __array__(self, dtype=None, copy=None):
        raise StrictError("np.asarray / np.array of a device array: a silent copy to the host "
                          "(use backend.to_numpy at an edge)")

    def __array_function__(self, func, types, args, kwargs):
        raise StrictError(f"numpy.{func.__name__} called on a device array: use xp = get_xp(...) "
                          f"and xp.{func.__name__}")

    def __iter__(self):
        raise StrictError("a Python loop over a device array (one sync per element)")

    # --- attributes
    shape = property(lambda self: self._a.shape)
    dtype = property(lambda self: self._a.dtype)
    ndim = property(lambda self: self._a.ndim)
    size = property(lambda self: self._a.size)
    nbytes = property(lambda self: self._a.nbytes)
    itemsize = property(lambda self: self._a.itemsize)
    strides = property(lambda self: self._a.strides)
    T = property(lambda self: StrictArray(self._a.T))

    def __len__(self):
        return len(self._a)

    def __float__(self):
        TRANSFERS["device_to_host"] += 1
        return float(self._a)

    def __int__(self):
        TRANSFERS["device_to_host"] += 1
        return int(self._a)

    def __bool__(self):
        TRANSFERS["device_to_host"] += 1
        return bool(self._a)

    def __index__(self):
        return self._a.__index__()

    def __repr__(self):
        return f"StrictArray({self._a!r})"

    def astype(self, dtype, copy=True):
        return StrictArray(self._a.astype(dtype, copy=copy))

    def __getattr__(self, name):
        if name in METHODS:
            method = getattr(self._a, name)
            if name in ("item", "tolist"):
                TRANSFERS["device_to_host"] += 1
            return lambda *args, **kwargs: _call(name, method, args, kwargs)
        raise AttributeError(f"StrictArray has no method {name!r} (not in the allowed list: "
                             "CuPy may lack it or differ)")

    def __getitem__(self, index):
        return _wrap(self._a[_unwrap(index)])

    def __setitem__(self, index, value):
        inputs = _float_dtypes((self, value), {})
        self._a[_unwrap(index)] = _unwrap(value)
        _check_promotion("__setitem__", inputs, self._a)


for _name in BINARY:
    setattr(StrictArray, _name, _binary(_name))
for _name in INPLACE:
    setattr(StrictArray, _name, _inplace(_name))
for _name in UNARY:
    setattr(StrictArray, _name, _unary(_name))


# -------------------------------------------------------------------- the namespace
class StrictUfunc:
    """A NumPy ufunc behind the strict wrapping: call, reduce, reduceat, at."""

    def __init__(self, name):
        self._name, self._ufunc = name, getattr(np, name)

    def __call__(self, *args, **kwargs):
        return _call(self._name, self._ufunc, args, kwargs)

    def reduce(self, *args, **kwargs):
        self._cupy_has(REDUCE_UFUNCS, "reduce")
        return _call(self._name + ".reduce", self._ufunc.reduce, args, kwargs)

    def reduceat(self, *args, **kwargs):
        self._cupy_has(REDUCEAT_UFUNCS, "reduceat")
        return _call(self._name + ".reduceat", self._ufunc.reduceat, args, kwargs)

    def _cupy_has(self, names, method):
        if self._name not in names:
            raise StrictError(f"{self._name}.{method}: CuPy's ufuncs have {method} only for "
                              f"{', '.join(names)} (NotImplementedError there)")


# The ufunc methods CuPy implements (cupy/_core/_kernel.pyx, ufunc.reduce / reduceat);
# any other raises NotImplementedError on CuPy.
REDUCE_UFUNCS = ("add", "multiply")
REDUCEAT_UFUNCS = ("add",)


class StrictGenerator:
    """A device-side random generator (like cupy.random.Generator): draws are StrictArrays."""

    def __init__(self, seed=None):
        self._g = np.random.default_rng(seed)

    def random(self, size=None, dtype=np.float64):
        return StrictArray(np.asarray(self._g.random(size, dtype=dtype)))

    def standard_normal(self, size=None, dtype=np.float64):
        return StrictArray(np.asarray(self._g.standard_normal(size, dtype=dtype)))

    def integers(self, low, high=None, size=None):
        return StrictArray(np.asarray(self._g.integers(low, high, size=size)))


class _Random:
    @staticmethod
    def default_rng(seed=None):
        return StrictGenerator(seed)


# Functions CuPy offers with NumPy's meaning. Not here on purpose: errstate, seterr,
# shares_memory and anything else NumPy-only.
UFUNCS = ("add", "subtract", "multiply", "divide", "true_divide", "negative", "exp", "expm1", "log",
          "log1p", "sqrt", "abs", "absolute", "tanh", "sin", "cos", "maximum", "minimum", "fmax", "fmin",
          "copysign", "not_equal", "equal", "less", "greater", "logical_and", "logical_or",
          "logical_not", "isneginf", "isposinf", "isfinite", "isnan", "reciprocal", "square", "sign",
          "power", "matmul", "frexp", "ldexp")
FUNCTIONS = ("zeros", "ones", "empty", "full", "zeros_like", "ones_like", "empty_like", "full_like",
             "arange", "eye", "where", "take", "einsum", "moveaxis", "swapaxes", "argsort", "flatnonzero",
             "copyto", "vdot", "dot", "concatenate", "stack", "broadcast_to", "sum", "clip",
             "ascontiguousarray", "tril", "triu", "cumsum", "argmax", "sort", "searchsorted", "repeat")
CONSTANTS = ("float16", "float32", "float64", "int32", "int64", "bool_", "inf", "pi", "newaxis", "e", "finfo")
ALLOWED = UFUNCS + FUNCTIONS + CONSTANTS + ("asarray", "random")


class StrictNamespace:
    random = _Random()

    def __init__(self):
        for name in UFUNCS:
            setattr(self, name, StrictUfunc(name))
        for name in CONSTANTS:
            setattr(self, name, getattr(np, name))
        for name in FUNCTIONS:
            setattr(self, name, self._function(name))

    @staticmethod
    def _function(name):
        fn = getattr(np, name)
        return lambda *args, **kwargs: _call(name, fn, args, kwargs)

    @staticmethod
    def asarray(a, dtype=None):
        """The explicit move (CuPy's asarray accepts host arrays and copies them over)."""
        if isinstance(a, StrictArray):
            return StrictArray(np.asarray(a._a, dtype=dtype))
        if isinstance(a, np.ndarray):
            TRANSFERS["host_to_device"] += 1
        return StrictArray(np.asarray(a, dtype=dtype))

    def __getattr__(self, name):
        raise AttributeError(f"the strict namespace has no {name!r}: not in ALLOWED (a NumPy-only "
                             "function, or one whose CuPy counterpart differs)")


STRICT = StrictNamespace()


def to_strict(a):
    """A StrictArray holding a copy of ``a`` (a NumPy array); other objects pass through."""
    if isinstance(a, np.ndarray):
        return StrictArray(a.copy())
    return a


def from_strict(a) -> np.ndarray:
    """The NumPy array inside a StrictArray (the test's explicit way back)."""
    return a._a if isinstance(a, StrictArray) else a
