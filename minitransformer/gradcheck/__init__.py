"""Numerical gradient checking, for this project's tests and for students' own layers.

The analytic gradient of a scalar objective is compared with central differences

    dL/dx_i  ≈  sum((out(x + h e_i) - out(x - h e_i)) * g) / 2h,      L = sum(out * g)

(gradcheck/numerical.py: ``numerical_gradient`` and ``relative_error``, the math; this file
puts them around a functional pair or a Module, and reports)

where ``g`` is a RANDOM upstream gradient, never all ones: with ones, errors that
sum to zero hide (the sum over a softmax row has zero gradient whatever the bug).

Everything runs in float64: with h = 1e-6 the central difference has truncation
error O(h²) ≈ 1e-12 and round-off O(eps·|L|/h) ≈ 1e-10·|L|, so a correct backward
shows relative errors around 1e-9 and a wrong one shows errors near 1.

The error per tensor is ``max|a - n| / max(max|a|, max|n|, tiny)`` over the checked
coordinates; a tensor is OK when it is at most ``tol`` OR when the max abs error is
at most ``atol`` (default 1e-10, the round-off of a central difference on an O(1)
objective): gradients near 1e-13 carry round-off as large as themselves, and their
relative error says nothing. Pass ``atol=0`` for the relative test alone. Two entrances:

    check_pair(layernorm_forward, layernorm_backward, {"x": x, "gamma": g, "beta": b})
    check_module(MyLayer(...).astype(np.float64), x)

Both return a ``GradcheckResult``: ``.ok``, ``.max_rel_error``, and ``str(result)``
is a table a student can read (tensor, shape, max abs error, relative error, verdict).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..backend import get_xp, to_numpy
from .numerical import numerical_gradient, relative_error

DEFAULT_TOL = 1e-7  # a correct float64 backward lands near 1e-9; a bug near 1
DEFAULT_ATOL = 1e-10  # absolute floor: eps·|L|/h ≈ 1e-16/1e-6, the round-off of the numerical side


@dataclass
class TensorReport:
    name: str
    shape: tuple
    max_abs_error: float
    rel_error: float
    ok: bool
    n_checked: int


@dataclass
class GradcheckResult:
    rows: list = field(default_factory=list)
    tol: float = DEFAULT_TOL
    atol: float = DEFAULT_ATOL

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.rows)

    @property
    def max_rel_error(self) -> float:
        return max((r.rel_error for r in self.rows), default=0.0)

    def __bool__(self) -> bool:
        return self.ok

    def __str__(self) -> str:
        head = f"{'tensor':<28} {'shape':<18} {'checked':>7} {'max abs err':>12} {'rel err':>10}  verdict"
        lines = [head, "-" * len(head)]
        for r in self.rows:
            lines.append(f"{r.name:<28} {str(r.shape):<18} {r.n_checked:>7} {r.max_abs_error:>12.3e} "
                         f"{r.rel_error:>10.3e}  {'OK' if r.ok else 'NOT OK'}")
        lines.append(f"tolerance {self.tol:.1e} (or max abs err <= {self.atol:.1e}): "
                     f"{'all OK' if self.ok else 'FAILED'}")
        return "\n".join(lines)


def _checker_rng(seed: int):
    """The checker's own stream: seeding it with the data's seed must not make the
    upstream gradient equal the input (a norm ignores exactly that direction)."""
    return np.random.default_rng([seed, 0x67726164])


def _coords(shape, max_coords: int, rng) -> list:
    """Every flat index of a small tensor, a random sample of a big one."""
    size = int(np.prod(shape))
    if size <= max_coords:
        return list(range(size))
    return sorted(rng.choice(size, size=max_coords, replace=False).tolist())


def _numerical(f, g, x, coords, h: float) -> np.ndarray:
    """numerical_gradient of L = sum(f(x) * g) at ``x.flat[coords]``; x is restored."""
    if not get_xp(x).shares_memory(x.reshape(-1), x):
        raise ValueError("gradient check: inputs and parameters must be C-contiguous arrays "
                         "(np.ascontiguousarray), so a perturbation reaches them")
    return numerical_gradient(f, x, g, h, coords).reshape(-1)[coords]


def _require_float64(name: str, x) -> None:
    if getattr(x, "dtype", None) != np.float64:
        raise TypeError(f"{name}: gradient checks need float64, got {getattr(x, 'dtype', type(x))}; "
                        "cast with .astype(np.float64) (Modules: module.astype(np.float64))")


def _upstream(out, rng):
    """A random upstream gradient shaped like ``out``, on out's backend."""
    xp = get_xp(out)
    g = rng.standard_normal(np.shape(out))
    return xp.asarray(g) if np.ndim(out) else float(g)


def _as_tuple(grads) -> tuple:
    return grads if isinstance(grads, tuple) else (grads,)


def _report(result, name, x, analytic, f, g, h, max_coords, rng, tol, atol=DEFAULT_ATOL):
    """A row of ``result``: the analytic gradient of ``x`` against central differences of ``f``
    (a function of x) at a sample of its coordinates."""
    if analytic is None:
        return
    if tuple(analytic.shape) != tuple(x.shape):
        raise ValueError(f"gradient of {name}: expected shape {tuple(x.shape)}, got {tuple(analytic.shape)}")
    coords = _coords(x.shape, max_coords, rng)
    numeric = _numerical(f, g, x, coords, h)
    a = to_numpy(analytic).reshape(-1)[coords]
    abs_err = float(np.max(np.abs(a - numeric))) if len(coords) else 0.0
    rel = relative_error(a, numeric)
    result.rows.append(TensorReport(name, tuple(x.shape), abs_err, rel, rel <= tol or abs_err <= atol,
                                    len(coords)))


def check_pair(forward, backward, inputs: dict, *, kwargs=None, wrt=None, seed: int = 0,
               h: float = 1e-6, tol: float = DEFAULT_TOL, max_coords: int = 256,
               atol: float = DEFAULT_ATOL) -> GradcheckResult:
    """Check a functional pair ``out, cache = forward(**inputs, **kwargs)`` /
    ``grads = backward(g, cache)``.

    ``wrt`` names the inputs that ``backward`` returns gradients for, in its
    order (default: every floating-point input, in the order given); a ``None``
    gradient is skipped. The inputs are perturbed in place and restored.
    ``tol``: relative tolerance; ``atol``: absolute floor (see the module docstring).
    """
    kwargs = kwargs or {}
    rng = _checker_rng(seed)
    wrt = tuple(wrt) if wrt is not None else tuple(
        k for k, v in inputs.items() if getattr(getattr(v, "dtype", None), "kind", None) == "f")
    for name in wrt:
        _require_float64(name, inputs[name])
    out, cache = forward(**inputs, **kwargs)
    g = _upstream(out, rng)
    grads = _as_tuple(backward(g, cache))
    if len(grads) < len(wrt):
        raise ValueError(f"backward returned {len(grads)} gradients for {len(wrt)} inputs {wrt}")

    def output(name):
        """The forward's output as a function of the input ``name`` (the others as given)."""
        return lambda value: forward(**dict(inputs, **{name: value}), **kwargs)[0]

    result = GradcheckResult(tol=tol, atol=atol)
    for name, analytic in zip(wrt, grads):
        _report(result, name, inputs[name], analytic, output(name), g, h, max_coords, rng, tol, atol)
    return result


def _generators(module):
    """Every random generator in the tree (dropout masks), to replay them."""
    return [m.rng for _, m in module.named_modules() if getattr(m, "rng", None) is not None]


def check_module(module, *inputs, seed: int = 0, h: float = 1e-6, tol: float = DEFAULT_TOL,
                 max_coords: int = 64, check_inputs: bool = True, forward_kwargs=None,
                 atol: float = DEFAULT_ATOL) -> GradcheckResult:
    """Check ``module.backward`` against central differences of ``module.forward``.

    Checks every floating-point input (the gradients backward returns, in the
    order of the inputs) and every parameter. Random generators inside the module
    (dropout) are replayed from the same state for every evaluation, so dropout
    can stay on. The module's grads are zeroed first.
    """
    forward_kwargs = forward_kwargs or {}
    rng = _checker_rng(seed)
    for name, p, _ in module.parameters():
        _require_float64(name, p)
    generators = _generators(module)
    states = [gen.bit_generator.state for gen in generators]

    def run(*args):
        for gen, state in zip(generators, states):
            gen.bit_generator.state = state
        return module.forward(*args, **forward_kwargs)

    def of_input(i):
        """The output as a function of input i (the others as given)."""
        return lambda value: run(*inputs[:i], value, *inputs[i + 1:])

    def of_parameter(p):
        """The output as a function of the parameter p: its values set, then the forward run."""
        def f(value):
            if value is not p:
                p[...] = value
            return run(*inputs)
        return f

    module.zero_grad()
    out = run(*inputs)
    g = _upstream(out, rng)
    input_grads = _as_tuple(module.backward(g))

    result = GradcheckResult(tol=tol, atol=atol)
    if check_inputs:
        for i, (x, dx) in enumerate(zip(inputs, input_grads)):
            if getattr(getattr(x, "dtype", None), "kind", None) == "f" and dx is not None:
                _require_float64(f"input[{i}]", x)
                _report(result, f"input[{i}]", x, dx, of_input(i), g, h, max_coords, rng, tol, atol)
    for name, p, grad in module.parameters():
        kept = p.copy()                     # a checker that perturbs a copy leaves its last point in p
        _report(result, name, p, grad.copy(), of_parameter(p), g, h, max_coords, rng, tol, atol)
        p[...] = kept
    return result
