"""Array-module dispatch: NumPy by default, CuPy when it is installed and used.

Every routine in ``functional/`` and ``layers/`` starts with ``xp = get_xp(...)``
and allocates through ``xp``; nothing there names NumPy directly. Moves between
host and device happen only at the edges: model construction / ``Module.to``,
batching, and ``to_numpy`` before plotting or saving.

A CuPy array dispatches to ``cupy`` itself (an isinstance check: the namespace a
CuPy array's ``__array_namespace__`` returns is not the ``cupy`` module in every
release, and functions of another module would hand back host arrays). Any other
array dispatches through the array API's ``__array_namespace__`` protocol: a NumPy
array answers ``numpy``, and the test suite's strict stand-in for a device array
(which refuses NumPy-only calls) answers its own namespace.
"""
from __future__ import annotations

import numpy as np

try:  # CuPy is an optional extra ([gpu]); everything works without it.
    import cupy as _cupy
except Exception:  # ImportError, or a CuPy wheel whose CUDA runtime is missing
    _cupy = None

DEVICES = ("cpu", "cuda")


def cupy_available() -> bool:
    """True when CuPy imports and sees at least one CUDA device."""
    if _cupy is None:
        return False
    try:
        return _cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:
        return False


def get_xp(*arrays):
    """The array module (``numpy``, ``cupy``, ...) of the first array that has one.

    Python scalars and ``None`` are skipped; with no array at all, NumPy.
    """
    for a in arrays:
        if _cupy is not None and isinstance(a, _cupy.ndarray):
            return _cupy
        namespace = getattr(a, "__array_namespace__", None)
        if namespace is not None:
            return namespace()
    return np


def xp_for_device(device: str):
    """The array module that lives on ``device`` ("cpu" or "cuda")."""
    _check_device(device)
    if device == "cpu":
        return np
    if not cupy_available():
        raise ValueError("device: 'cuda' needs CuPy and a CUDA GPU, and CuPy "
                         + ("sees no CUDA device" if _cupy is not None else "is not installed")
                         + "; install the extra: pip install -e \".[gpu]\" (CUDA 12: \".[gpu-cuda12]\"; "
                         "or use device='cpu')")
    return _cupy


def device_of(a) -> str:
    """"cuda" for a CuPy array, "cpu" otherwise."""
    return "cuda" if _cupy is not None and isinstance(a, _cupy.ndarray) else "cpu"


def to_numpy(a):
    """A NumPy array with the values of ``a`` (a copy from the GPU, a view on the CPU)."""
    if _cupy is not None and isinstance(a, _cupy.ndarray):
        return _cupy.asnumpy(a)
    return np.asarray(a)


def to_device(a, device: str):
    """``a`` on ``device``; the same object when it is already there."""
    _check_device(device)
    if device_of(a) == device:
        return a
    if device == "cpu":
        return to_numpy(a)
    return xp_for_device(device).asarray(a)


def default_rng(seed=None, device: str = "cpu"):
    """A random generator for ``device``: NumPy's PCG64 on the CPU, CuPy's on the GPU.

    ``seed`` may be an int, None, or already a generator (returned as it is), so
    every constructor can take ``rng`` in any of these forms.
    """
    if _is_generator(seed):
        return seed
    from .validate import check_seed_or_generator
    check_seed_or_generator("rng", seed)
    if device == "cpu":
        return np.random.default_rng(seed)
    return xp_for_device(device).random.default_rng(seed)


def _is_generator(obj) -> bool:
    if isinstance(obj, np.random.Generator):
        return True
    return _cupy is not None and isinstance(obj, _cupy.random.Generator)


def _check_device(device) -> None:
    from .validate import check_choice
    check_choice("device", device, DEVICES)
