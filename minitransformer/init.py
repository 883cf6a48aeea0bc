"""Parameter initialisation, on the host (NumPy), from an explicit generator.

Modules create their parameters here in the constructor; ``Module.to("cuda")``
moves them afterwards. Nothing here touches a global random state.
"""
from __future__ import annotations

import numpy as np

from .validate import check_dtype


def normal(rng, shape, std: float, dtype=np.float32) -> np.ndarray:
    """Entries drawn from N(0, std²)."""
    return (std * rng.standard_normal(shape)).astype(check_dtype("dtype", dtype))


def zeros(shape, dtype=np.float32) -> np.ndarray:
    return np.zeros(shape, dtype=check_dtype("dtype", dtype))


def ones(shape, dtype=np.float32) -> np.ndarray:
    return np.ones(shape, dtype=check_dtype("dtype", dtype))
