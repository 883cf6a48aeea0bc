"""Check a student's own forward/backward pair from a file: ``FILE.py:FORWARD:BACKWARD``.

The inputs are drawn from the forward's signature, in float64 with a seeded generator:

    the first parameter without a default   x, shape (B, T, C) = (2, 3, 4)
    a parameter named W                     (C, C)
    every other parameter without default   a (C,) vector (gamma, beta, b, ...)
    parameters with a default               keep it

The numerical gradient check (gradcheck.check_pair) always runs. When FORWARD has
the name of a function in the assignment table (``layernorm_forward``, ...), the
reference implementation runs on the same inputs too, and each wrong tensor gets a
diagnosis (homework/diagnose.py); without one there is only the numerical table.
"""
from __future__ import annotations

import importlib
import importlib.util
import inspect
from pathlib import Path

import numpy as np

from ..gradcheck import check_pair
from .assignments import ASSIGNMENTS
from .diagnose import Row, compare

SHAPE = (2, 3, 4)   # (B, T, C)


def load_pair(target: str):
    """(forward, backward) from ``FILE.py:FORWARD:BACKWARD``."""
    path, forward, backward = target.rsplit(":", 2)
    spec = importlib.util.spec_from_file_location(Path(path).stem, path)
    if spec is None:
        raise FileNotFoundError(f"{path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, forward), getattr(module, backward)


def draw_inputs(forward, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    C = SHAPE[-1]
    inputs = {}
    for i, (name, p) in enumerate(inspect.signature(forward).parameters.items()):
        if p.default is not inspect.Parameter.empty or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        shape = SHAPE if not inputs else (C, C) if name == "W" else (C,)
        inputs[name] = rng.standard_normal(shape)
    return inputs


def reference_pair(forward_name: str):
    """The table's (forward, backward) whose forward has this name, or None."""
    package = __name__.split(".")[0]
    for a in ASSIGNMENTS:
        for c in a.checks:
            if c.checker == "pair" and c.forward.split(":")[1] == forward_name:
                module = importlib.import_module(f"{package}.{c.forward.split(':')[0]}")
                return getattr(module, forward_name), getattr(module, c.backward.split(":")[1])
    return None


def check_file(target: str, seed: int = 0) -> tuple[list, bool]:
    """(rows, whether a reference was found) for the student's pair in ``target``."""
    forward, backward = load_pair(target)
    inputs = draw_inputs(forward, seed)
    rows = []
    ref = reference_pair(forward.__name__)
    if ref is not None:
        r_out, r_cache = ref[0](**{k: v.copy() for k, v in inputs.items()})
        g = np.random.default_rng([seed, 7]).standard_normal(np.shape(r_out))
        r_grads = _tuple(ref[1](g.copy(), r_cache))
        s_out, s_cache = forward(**{k: v.copy() for k, v in inputs.items()})
        rows.append(compare("out", s_out, r_out))
        s_grads = _tuple(backward(g.copy(), s_cache))
        for i, name in enumerate(inputs):
            if i < len(r_grads) and r_grads[i] is not None:
                rows.append(compare(f"d{name}", s_grads[i] if i < len(s_grads) else None, r_grads[i],
                                    factors={"C": (4.0, "a sum where a mean belongs?")}))
    num = check_pair(forward, backward, inputs, seed=seed)
    rows += [Row(f"numerical d{r.name}", str(r.shape), r.max_abs_error, r.rel_error, r.ok) for r in num.rows]
    return rows, ref is not None


def _tuple(x):
    return x if isinstance(x, tuple) else (x,)
