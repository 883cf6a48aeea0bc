"""The generic checkers and input drawers that grade one assignment (run in a subprocess).

The grader (homework/grade.py) starts ``python -c`` with the student's copy first on
sys.path, loads THIS package (the reference, the real minitransformer) under another
name, and calls ``main(assignment_id, ...)``. Two packages are then loaded side by side:

    STUDENT    "minitransformer", the student's copy (PYTHONPATH=DIR)
    REFERENCE  this file's own package, under the grader's private name

For every Check of the assignment the drawer makes float64 inputs from a seeded
generator (random shapes, masks, ignored targets), both implementations run on
copies of them, and every output and gradient is compared (homework/diagnose.py);
then the student's pair runs through the numerical gradient check
(gradcheck.check_pair / check_module). Every OTHER assignment's functions are
swapped for the reference's first, so a bug costs the points of its own
assignment only (a wrong softmax does not fail attention).

In a starter notebook STUDENT == REFERENCE (the student's own copy): only the
numerical check runs, there is nothing to compare against.
"""
from __future__ import annotations

import importlib
import json
import sys
import traceback
from dataclasses import dataclass, field

import numpy as np

from ..gradcheck import check_module, check_pair
from .assignments import BY_ID
from .diagnose import Row, compare

STUDENT = "minitransformer"
REFERENCE = __name__.split(".")[0]
MARKER = "@@homework-result@@ "   # prefixes the one JSON line the grader reads


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
def _copy(case: Case) -> dict:
    return {k: np.array(v, copy=True) for k, v in case.inputs.items()}


def _grads(result) -> tuple:
    return result if isinstance(result, tuple) else (result,)


def _upstream(out, seed):
    return np.random.default_rng([seed, 7]).standard_normal(np.shape(out))


def _rows_for(name, s, r, case, mistakes) -> Row:
    row = compare(name, s, r, factors=case.factors, masked=case.masked.get(name))
    if not row.ok and not row.diagnosis and s is not None and np.shape(s) == np.shape(r):
        for label, candidate in mistakes.get(name, ()):
            if compare(name, s, candidate).ok:
                row.diagnosis = f"matches {label}"
                break
    return row


def check_pair_spec(check, case, seed, reference: bool) -> list:
    s_fwd, s_bwd = resolve(STUDENT, check.forward), resolve(STUDENT, check.backward)
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
    try:
        num = check_pair(s_fwd, s_bwd, dict(case.inputs), kwargs=case.kwargs, wrt=wrt, seed=seed)
    except ValueError as e:           # a gradient of the wrong shape: the table above says which
        return rows + [Row("numerical check", "-", float("nan"), float("nan"), False, f"could not run: {e}")]
    rows += [Row(f"numerical d{r.name}", str(r.shape), r.max_abs_error, r.rel_error, r.ok) for r in num.rows]
    return rows


def check_function_spec(check, case, seed, reference: bool) -> list:
    if not reference:
        return []
    r_out = resolve(REFERENCE, check.forward)(**case.kwargs)
    s_out = resolve(STUDENT, check.forward)(**case.kwargs)
    return [compare("out", s_out, r_out)]


def _build(package, check, case):
    cls = resolve(package, check.forward)
    args, kwargs = case.kwargs["ctor"]
    if "spec" in case.kwargs:
        args = (resolve(package, "layers.blocks:BlockSpec")(**case.kwargs["spec"]),)
    return cls(*args, **kwargs)


def check_module_spec(check, case, seed, reference: bool) -> list:
    x = case.inputs["x"]
    student = _build(STUDENT, check, case)
    rows = []
    if reference:
        ref = _build(REFERENCE, check, case)
        student.load_state_dict(ref.state_dict())
        r_out = ref.forward(x.copy())
        g = _upstream(r_out, seed)
        r_dx = ref.backward(g.copy())
        s_out = student.forward(x.copy())
        rows.append(compare("out", s_out, r_out))
        s_dx = student.backward(g.copy())
        rows.append(compare("dx", s_dx, r_dx, factors=case.factors))
        s_grads = {n: gr for n, _, gr in student.parameters()}
        for name, _, r_grad in ref.parameters():
            rows.append(compare(f"d{name}", s_grads.get(name), r_grad, factors=case.factors))
    student.zero_grad()
    num = check_module(student, x.copy(), seed=seed, max_coords=16, tol=1e-6)  # small 0.02-std weights: ~1e-8
    rows += [Row(f"numerical d{r.name}", str(r.shape), r.max_abs_error, r.rel_error, r.ok) for r in num.rows]
    return rows


CHECKERS = {"pair": check_pair_spec, "function": check_function_spec, "module": check_module_spec}


# ------------------------------------------------------------------------ isolation and the entry
def isolate(assignment_id: str) -> None:
    """Swap every other assignment's functions in the student's copy for the reference's."""
    for a in BY_ID.values():              # load every module that may hold a target by name
        for t in a.targets:
            importlib.import_module(f"{STUDENT}.{t.module}")
    for other in BY_ID.values():
        if other.id == assignment_id:
            continue
        for t in other.targets:
            s_mod = importlib.import_module(f"{STUDENT}.{t.module}")
            r_mod = importlib.import_module(f"{REFERENCE}.{t.module}")
            if "." in t.qualname:
                cls, method = t.qualname.split(".")
                setattr(getattr(s_mod, cls), method, getattr(r_mod, cls).__dict__[method])
                continue
            s_fn, r_fn = getattr(s_mod, t.qualname), getattr(r_mod, t.qualname)
            for module in list(sys.modules.values()):
                if getattr(module, "__name__", "").startswith(STUDENT + ".") and \
                        getattr(module, t.qualname, None) is s_fn:
                    setattr(module, t.qualname, r_fn)


def run(assignment_id: str, seed: int = 0, examples: int = 3) -> dict:
    """Grade one assignment; returns the result record (status, score, rows, message)."""
    assignment = BY_ID[assignment_id]
    reference = STUDENT != REFERENCE
    result = {"id": assignment.id, "max_score": assignment.points, "score": 0.0, "status": "ok",
              "message": "", "rows": []}
    try:
        if reference:
            isolate(assignment.id)
        rows = []
        for c, check in enumerate(assignment.checks):
            merged: dict = {}
            for e in range(examples if reference else 1):
                rng = np.random.default_rng([seed, c, e])
                fn = resolve(REFERENCE, check.forward)
                case = DRAWERS[check.draw](rng, fn, check.options)
                for row in CHECKERS[check.checker](check, case, seed + e, reference):
                    row.name = f"{_label(check)}{row.name}"
                    if row.name not in merged or (merged[row.name].ok and not row.ok):
                        merged[row.name] = row
            rows += sorted(merged.values(), key=lambda r: "numerical" in r.name)   # stable: compared first
        result["rows"] = [r.to_dict() for r in rows]
        n_ok = sum(r.ok for r in rows)
        result["score"] = round(assignment.points * n_ok / max(len(rows), 1), 2)
        result["status"] = "ok" if n_ok == len(rows) else "fail"
    except NotImplementedError as e:
        result.update(status="not implemented", message=f"not implemented: {e}")
    except BaseException as e:           # SystemExit from student code included
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


def main(assignment_id: str, seed: int = 0, examples: int = 3) -> None:
    """Print the one JSON line the grader reads."""
    result = run(assignment_id, seed, examples)
    sys.stdout.write("\n" + MARKER + json.dumps(result) + "\n")
    sys.stdout.flush()


def numerical_check(assignment_id: str, seed: int = 0) -> str:
    """The starter notebooks' check: the numerical gradient table of the student's own pair."""
    result = run(assignment_id, seed, 1)
    if result["status"] != "ok" and not result["rows"]:
        return result["message"]
    lines = [f"{r['name']:<40} {r['shape']:<16} {r['max_abs_error']:>10.3e} {r['rel_error']:>10.3e}  "
             f"{'OK' if r['ok'] else 'NOT OK'}" for r in result["rows"]]
    return "\n".join(lines) or "forward-only: compare with `homework check` (no gradient to check)"
