"""The generic checkers and input drawers that grade one assignment, in the grader's process.

The reference is this package; the student's functions run in another process
(homework/sandbox.py) and only their results cross back, as arrays. A ``student``
is anything with ``function(spec)`` (a callable) and ``module(spec, *args,
**kwargs)`` (a Module-like): the Sandbox in grading, ``Local`` in a starter
notebook (the student's own copy, in-process, numerical check only).

For every Check of the assignment the drawer makes float64 inputs from a generator
seeded with the grading seed (the instructor's secret, or a public one), both
implementations run on copies of them, every output and gradient is compared
(homework/diagnose.py), and the student's pair goes through the numerical gradient
check, whose forward evaluations are also the student's. Adding a graded case is a
drawer; a diagnosis, a ``mistakes`` entry of the Case; a named check, a Row.
"""
from __future__ import annotations

import importlib
import traceback
from dataclasses import dataclass, field

import numpy as np

from ..gradcheck import check_module, check_pair
from .assignments import BY_ID
from .diagnose import Row, compare

STUDENT = "minitransformer"
REFERENCE = __name__.split(".")[0]


@dataclass
class Case:
    inputs: dict                                 # name -> array (the differentiable ones are float64)
    kwargs: dict = field(default_factory=dict)   # non-array arguments
    wrt: tuple = ()                              # inputs backward returns gradients for, in order
    factors: dict = field(default_factory=dict)  # label -> (value, hint) for "off by a factor"
    masked: dict = field(default_factory=dict)   # tensor name -> bool array of masked entries
    mistakes: object = None                      # (inputs, out, g) -> {tensor: [(label, array)]}


def resolve(package: str, spec: str):
    module, qualname = spec.split(":")
    obj = importlib.import_module(f"{package}.{module}")
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


# ------------------------------------------------------------------------ input drawers
def _shape_bct(rng):
    return int(rng.integers(1, 4)), int(rng.integers(1, 5)), int(rng.integers(2, 7))


def draw_bct(rng, fn, options):
    return Case({"x": rng.standard_normal(_shape_bct(rng))}, dict(options))


def draw_softmax(rng, fn, options):
    def mistakes(inputs, out, g):
        return {"dx": [("y ⊙ dy: the -Σ_j dy_j y_j term is missing", out * g)]}
    return Case({"x": 3 * rng.standard_normal(_shape_bct(rng))}, dict(options), mistakes=mistakes)


def draw_linear(rng, fn, options):
    B, T, d_in = _shape_bct(rng)
    d_out = d_in + int(rng.integers(1, 3))        # d_in != d_out: a transposed dW has the wrong shape
    return Case({"x": rng.standard_normal((B, T, d_in)), "W": rng.standard_normal((d_in, d_out)),
                 "b": rng.standard_normal(d_out)})


def _norm_mistakes(centre):
    def mistakes(inputs, out, g):
        x, gamma = inputs["x"], inputs["gamma"]
        mu = x.mean(-1, keepdims=True) if centre else 0.0
        rstd = 1 / np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + 1e-5)
        missing = "the mean terms -mean(dxhat) - xhat·mean(dxhat ⊙ xhat) are missing"
        return {"dx": [(f"dy ⊙ gamma · rstd: {missing}",
                        g * gamma * rstd)]}
    return mistakes


def draw_layernorm(rng, fn, options):
    x = rng.standard_normal(_shape_bct(rng))
    C = x.shape[-1]
    return Case({"x": x, "gamma": 1 + 0.5 * rng.standard_normal(C), "beta": rng.standard_normal(C)},
                mistakes=_norm_mistakes(True))


def draw_rmsnorm(rng, fn, options):
    x = rng.standard_normal(_shape_bct(rng))
    return Case({"x": x, "gamma": 1 + 0.5 * rng.standard_normal(x.shape[-1])})


def draw_cross_entropy(rng, fn, options):
    B, T, V = _shape_bct(rng)
    T += 2                                                      # room for kept and ignored targets
    targets = rng.integers(0, V, (B, T))
    ignored = rng.random((B, T)) < 0.3
    ignored[0, 0], ignored[0, 1] = True, False                  # at least one of each
    targets[ignored] = -100
    n_kept = int((~ignored).sum())
    smoothing = [0.0, 0.1][int(rng.integers(0, 2))]
    return Case({"logits": 2 * rng.standard_normal((B, T, V)), "targets": targets},
                {"ignore_index": -100, "smoothing": smoothing}, wrt=("logits",),
                factors={"N_kept/N": (n_kept / ignored.size, "averaged over the ignored targets too?"),
                         "N/N_kept": (ignored.size / n_kept, "")},
                masked={"dlogits": np.broadcast_to(ignored[..., None], (B, T, V))})


def draw_embedding(rng, fn, options):
    B, T, C = _shape_bct(rng)
    V = int(rng.integers(2, 6))
    return Case({"ids": rng.integers(0, V, (B, T + 2)), "W": rng.standard_normal((V, C))}, wrt=("W",))


def draw_dropout(rng, fn, options):
    x = rng.standard_normal(_shape_bct(rng))
    p = float(rng.uniform(0.1, 0.6))
    return Case({"x": x}, {"p_drop": p, "mask": rng.random(x.shape) >= p}, wrt=("x",),
                factors={"1/(1-p)": (1 / (1 - p), "the inverted scaling 1/(1-p) applied twice?"),
                         "1-p": (1 - p, "forgot the inverted scaling 1/(1-p)?")})


def draw_attention(rng, fn, options):
    B, H, T, S, D = (int(rng.integers(1, 3)), int(rng.integers(1, 3)), int(rng.integers(1, 5)),
                     int(rng.integers(1, 6)), 8)           # D = 8: √D is not mistaken for 2
    mask = rng.random((B, 1, T, S)) < 0.75
    mask[..., 0] = True                                          # every query sees a key ...
    if T > 1 and rng.random() < 0.5:
        mask[0, 0, -1, :] = False                                # ... except, sometimes, one: output 0
    inputs = {"q": rng.standard_normal((B, H, T, D)), "k": rng.standard_normal((B, H, S, D)),
              "v": rng.standard_normal((B, H, S, D)), "mask": mask}
    wrt = ("q", "k", "v")
    if rng.random() < 0.5:
        inputs["bias"] = rng.standard_normal((1, H, T, S))
        wrt += ("bias",)
    return Case(inputs, wrt=wrt,
                factors={f"√D with D={D}": (D ** 0.5, "forgot 1/√D?"),
                         f"1/√D with D={D}": (D ** -0.5, "applied 1/√D twice?")})


def draw_bhtd(rng, fn, options):
    B, H, T = int(rng.integers(1, 3)), int(rng.integers(1, 3)), int(rng.integers(1, 5))
    D = 2 * int(rng.integers(1, 4))
    return Case({"x": rng.standard_normal((B, H, T, D))}, {"offset": int(rng.integers(0, 4))})


def draw_sinusoidal(rng, fn, options):
    return Case({}, {"max_len": int(rng.integers(1, 12)), "d": int(rng.integers(1, 10)), "dtype": np.float64})


def draw_causal_mask(rng, fn, options):
    T = int(rng.integers(1, 6))
    return Case({}, {"T": T, "S": T + int(rng.integers(0, 3))})


def draw_mha(rng, fn, options):
    B, T = int(rng.integers(1, 3)), int(rng.integers(1, 5))
    return Case({"x": rng.standard_normal((B, T, 8))},
                {"ctor": ((8, 2), {"causal": True, "rng": 0, "dtype": np.float64})},
                factors={"√D with D=4": (2.0, "forgot 1/√D?"),
                         "1/√D with D=4": (0.5, "applied 1/√D twice?")})


def draw_block(rng, fn, options):
    B, T = int(rng.integers(1, 3)), int(rng.integers(1, 5))
    return Case({"x": rng.standard_normal((B, T, 8))},
                {"ctor": ((), {"rng": 0, "dtype": np.float64}),
                 "spec": dict(d_model=8, n_head=2, d_ff=16, norm_position="pre")})


DRAWERS = {"bct": draw_bct, "softmax": draw_softmax, "linear": draw_linear, "layernorm": draw_layernorm,
           "rmsnorm": draw_rmsnorm, "cross_entropy": draw_cross_entropy, "embedding": draw_embedding,
           "dropout": draw_dropout, "attention": draw_attention, "bhtd": draw_bhtd,
           "sinusoidal": draw_sinusoidal, "causal_mask": draw_causal_mask, "mha": draw_mha,
           "block": draw_block}


# ------------------------------------------------------------------------ checkers
class Local:
    """The student's own copy in this process (starters): no reference, no confinement."""

    def function(self, spec):
        return resolve(STUDENT, spec)

    def module(self, spec, *args, **kwargs):
        return resolve(STUDENT, spec)(*args, **kwargs)


def _copy(case: Case) -> dict:
    return {k: np.array(v, copy=True) for k, v in case.inputs.items()}


def _grads(result) -> tuple:
    return result if isinstance(result, tuple) else (result,)


def _upstream(out, seed):
    return np.random.default_rng([seed, 7]).standard_normal(np.shape(out))


def _rows_for(name, s, r, case, mistakes) -> Row:
    if s is not None and not isinstance(s, (np.ndarray, np.generic, float, int, bool)):
        return Row(name, str(np.shape(r)), float("nan"), float("nan"), False,
                   f"not an array: a {type(s).__name__}")
    row = compare(name, s, r, factors=case.factors, masked=case.masked.get(name))
    if not row.ok and not row.diagnosis and s is not None and np.shape(s) == np.shape(r):
        for label, candidate in mistakes.get(name, ()):
            if compare(name, s, candidate).ok:
                row.diagnosis = f"matches {label}"
                break
    return row


def _numerical_rows(run) -> list:
    try:
        num = run()
    except (ValueError, TypeError) as e:     # a gradient of the wrong shape: the rows above say which
        return [Row("numerical check", "-", float("nan"), float("nan"), False, f"could not run: {e}")]
    return [Row(f"numerical d{r.name}", str(r.shape), r.max_abs_error, r.rel_error, r.ok) for r in num.rows]


def check_pair_spec(check, case, seed, student, reference: bool) -> list:
    s_fwd, s_bwd = student.function(check.forward), student.function(check.backward)
    wrt = case.wrt or tuple(k for k, v in case.inputs.items() if v.dtype.kind == "f")
    rows = []
    if reference:
        r_fwd, r_bwd = resolve(REFERENCE, check.forward), resolve(REFERENCE, check.backward)
        r_out, r_cache = r_fwd(**_copy(case), **case.kwargs)
        g = _upstream(r_out, seed)
        r_grads = _grads(r_bwd(np.array(g), r_cache))
        s_result = s_fwd(**_copy(case), **case.kwargs)
        if not (isinstance(s_result, tuple) and len(s_result) == 2):
            return [Row("out", str(np.shape(r_out)), float("nan"), float("nan"), False,
                        "the forward must return (out, cache)")]
        s_out, s_cache = s_result
        mistakes = case.mistakes(case.inputs, np.asarray(r_out), g) if case.mistakes else {}
        rows.append(_rows_for("out", s_out, r_out, case, mistakes))
        s_grads = _grads(s_bwd(np.array(g), s_cache))
        for i, name in enumerate(wrt):
            s = s_grads[i] if i < len(s_grads) else None
            rows.append(_rows_for(f"d{name}", s, r_grads[i], case, mistakes))
    return rows + _numerical_rows(lambda: check_pair(s_fwd, s_bwd, dict(_copy(case)), kwargs=case.kwargs,
                                                     wrt=wrt, seed=seed, max_coords=32))


def check_function_spec(check, case, seed, student, reference: bool) -> list:
    if not reference:
        return []
    r_out = resolve(REFERENCE, check.forward)(**case.kwargs)
    s_out = student.function(check.forward)(**case.kwargs)
    return [_rows_for("out", s_out, r_out, case, {})]


def _build(student, check, case):
    args, kwargs = case.kwargs["ctor"]
    if "spec" in case.kwargs:
        spec = case.kwargs["spec"]
        ref = resolve(REFERENCE, check.forward)(resolve(REFERENCE, "layers.blocks:BlockSpec")(**spec), **kwargs)
        mine = student.module(check.forward, student.function("layers.blocks:BlockSpec")(**spec), **kwargs)
        return ref, mine
    return resolve(REFERENCE, check.forward)(*args, **kwargs), student.module(check.forward, *args, **kwargs)


def check_module_spec(check, case, seed, student, reference: bool) -> list:
    x = case.inputs["x"]
    ref, mine = _build(student, check, case)
    rows = []
    if reference:
        mine.load_state_dict(ref.state_dict())
        r_out = ref.forward(x.copy())
        g = _upstream(r_out, seed)
        r_dx = ref.backward(g.copy())
        s_out = mine.forward(x.copy())
        rows.append(_rows_for("out", s_out, r_out, case, {}))
        s_dx = mine.backward(g.copy())
        rows.append(_rows_for("dx", s_dx, r_dx, case, {}))
        s_grads = {n: gr for n, _, gr in mine.parameters()}
        for name, _, r_grad in ref.parameters():
            rows.append(_rows_for(f"d{name}", s_grads.get(name), r_grad, case, {}))
    mine.zero_grad()
    return rows + _numerical_rows(lambda: check_module(mine, x.copy(), seed=seed, max_coords=16, tol=1e-6))


CHECKERS = {"pair": check_pair_spec, "function": check_function_spec, "module": check_module_spec}


def run(assignment_id: str, student, *, seed: int = 0, examples: int = 3, reference: bool = True) -> dict:
    """Grade one assignment; the result record (status, score, rows, message).

    An exception of the student's code is the assignment's result; the sandbox's own
    failures (a timeout, a dead process: sandbox.ChildGone) propagate to the grader.
    """
    from .sandbox import ChildGone, StudentError
    assignment = BY_ID[assignment_id]
    result = {"id": assignment.id, "max_score": assignment.points, "score": 0.0, "status": "ok",
              "message": "", "rows": []}
    try:
        rows = []
        for c, check in enumerate(assignment.checks):
            merged: dict = {}
            for e in range(examples if reference else 1):
                rng = np.random.default_rng([seed, c, e])
                case = DRAWERS[check.draw](rng, resolve(REFERENCE, check.forward), check.options)
                for row in CHECKERS[check.checker](check, case, seed + e, student, reference):
                    row.name = f"{_label(check)}{row.name}"
                    if row.name not in merged or (merged[row.name].ok and not row.ok):
                        merged[row.name] = row
            rows += sorted(merged.values(), key=lambda r: "numerical" in r.name)   # stable: compared first
        result["rows"] = [r.to_dict() for r in rows]
        n_ok = sum(r.ok for r in rows)
        result["score"] = round(assignment.points * n_ok / max(len(rows), 1), 2)
        result["status"] = "ok" if n_ok == len(rows) else "fail"
    except ChildGone:
        raise
    except StudentError as e:
        if e.type == "NotImplementedError":
            result.update(status="not implemented", message=f"not implemented: {e}")
        else:
            result.update(status="exception", message=f"exception: {e.type}: {e}" + (f" (at {e.where})"
                                                                                     if e.where else ""))
    except NotImplementedError as e:          # Local: the student's own exceptions, in-process
        result.update(status="not implemented", message=f"not implemented: {e}")
    except Exception as e:
        result.update(status="exception", message=_exception_line(e))
    return result


def _label(check) -> str:
    options = ",".join(f"{k}={v}" for k, v in check.options.items())
    name = check.forward.split(":")[1].removesuffix("_forward")
    return f"{name}{'[' + options + ']' if options else ''} "


def _exception_line(e: BaseException) -> str:
    frames = traceback.extract_tb(e.__traceback__)
    where = f" (at {frames[-1].filename}:{frames[-1].lineno} in {frames[-1].name})" if frames else ""
    return f"exception: {type(e).__name__}: {e}{where}"


def numerical_check(assignment_id: str, seed: int = 0) -> str:
    """The starter notebooks' check: the numerical gradient table of the student's own pair."""
    result = run(assignment_id, Local(), seed=seed, examples=1, reference=False)
    if result["status"] != "ok" and not result["rows"]:
        return result["message"]
    lines = [f"{r['name']:<40} {r['shape']:<16} {r['max_abs_error']:>10.3e} {r['rel_error']:>10.3e}  "
             f"{'OK' if r['ok'] else 'NOT OK'}" for r in result["rows"]]
    return "\n".join(lines) or "forward-only: compare with `homework check` (no gradient to check)"
