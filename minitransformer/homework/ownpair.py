"""Check a student's own forward/backward pair from a file: ``FILE.py:FORWARD:BACKWARD``.

Loading. A file inside a package (a folder with ``__init__.py``, up to the top one:
the student's ``minitransformer/`` copy) is imported as the package module it is,
so its relative imports work; the top package is loaded from that folder under a
private name when another package of its name is imported already (the installed
reference). A lone file is loaded by itself.

Inputs. When FORWARD has the name of a function an assignment grades as a pair
(``layernorm_forward``, ``attention_forward`` ...), its graded main case draws the
inputs (homework/assignments/: ranks, masks, options as the grader draws them), the
reference runs on the same inputs, and each wrong tensor gets a diagnosis
(homework/mistakes.py); in a student's copy, which holds no reference and no drawer,
the inputs are the stored public example of that case and only the numerical check
runs (``homework check . ID`` compares with the stored expectations there). Otherwise the inputs come from FORWARD's signature, by name:

    q, k, v                  (B, H, T, D) = (2, 2, 3, 4)
    mask                     (T, T) bool, causal
    x and other first ones   (B, T, C) = (2, 3, 4)
    W                        (C, C)
    other required ones      (C,) vectors (gamma, beta, b, ...)
    parameters with a default keep it

or from ``--shapes name=2,3,4;W=4,5`` (float64 arrays of those shapes). The numerical
gradient check (gradcheck.check_pair) always runs.

Every target that cannot be checked (no such file, no colon, a missing or
non-callable name, a syntax error, a backward that does not take (dout, cache) ...)
raises ``TargetError`` with one line that says what is wrong.
"""
from __future__ import annotations

import importlib
import importlib.util
import inspect
import sys
import traceback
from pathlib import Path

import numpy as np

from ..gradcheck import check_pair
from .diagnose import Row, compare
from .expected import in_student_copy
from .graded import Case, case_table, resolve, run_pair
from .mistakes import diagnose_all

B, H, T, C = 2, 2, 3, 4
USAGE = "expected FILE.py:FORWARD:BACKWARD, e.g. mine.py:layernorm_forward:layernorm_backward"


class TargetError(ValueError):
    """A target that cannot be checked; the message is one line."""


# ------------------------------------------------------------------ the target
def parse_target(target: str) -> tuple[Path, str, str]:
    parts = target.rsplit(":", 2)
    if len(parts) != 3 or not all(parts):
        raise TargetError(f"{target!r}: {USAGE}")
    path, forward, backward = Path(parts[0]), parts[1], parts[2]
    if not path.exists() and ":" in parts[0]:       # FILE.py:a:b:c: more parts than three
        raise TargetError(f"{target!r}: {USAGE} (three parts separated by ':', got "
                          f"{target.count(':') + 1})")
    if not path.exists():
        raise TargetError(f"{path}: no such file")
    if path.is_dir() or path.suffix != ".py":
        raise TargetError(f"{path}: not a Python file (.py); {USAGE}")
    for name in (forward, backward):
        if not name.isidentifier():
            raise TargetError(f"{name!r} is not a Python name; {USAGE}")
    return path, forward, backward


def _package_root(path: Path):
    """(the top package folder, dotted module name) when ``path`` sits inside a package, else None."""
    parts, folder = [path.stem], path.resolve().parent
    top = None
    while (folder / "__init__.py").is_file():
        top = folder
        parts.insert(0, folder.name)
        folder = folder.parent
    if top is None:
        return None
    if parts[-1] == "__init__":
        parts.pop()
    return top, ".".join(parts)


def load_module(path: Path):
    """The module of ``path``, imported as its package's module when it has one."""
    try:
        found = _package_root(path)
        if found is None:
            spec = importlib.util.spec_from_file_location(path.stem, path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            return module
        top, dotted = found
        return importlib.import_module(_import_name(top, dotted))
    except SyntaxError as e:
        raise TargetError(f"{e.filename or path}:{e.lineno}: syntax error: {e.msg}") from None
    except Exception as e:            # noqa: BLE001 - anything the student's module raises on import
        raise TargetError(f"{path}: importing it raised {_one_line(e)}") from None


def _import_name(top: Path, dotted: str) -> str:
    """``dotted``, or the same module under a private top name when a package of that name
    from another folder is imported already."""
    name = top.name
    loaded = sys.modules.get(name)
    if loaded is None:
        sys.path.insert(0, str(top.parent))
        return dotted
    if Path(getattr(loaded, "__file__", "") or "").resolve().parent == top:
        return dotted
    private = f"_gradcheck_{name}"
    if private not in sys.modules:
        spec = importlib.util.spec_from_file_location(private, top / "__init__.py",
                                                      submodule_search_locations=[str(top)])
        module = importlib.util.module_from_spec(spec)
        sys.modules[private] = module
        spec.loader.exec_module(module)
    return private + dotted[len(name):]


def _function(module, name: str, path: Path, role: str):
    if not hasattr(module, name):
        defined = sorted(n for n, v in vars(module).items()
                         if inspect.isfunction(v) and v.__module__ == module.__name__)
        raise TargetError(f"{path}: no {role} named {name!r} (functions defined there: "
                          f"{', '.join(defined) or 'none'})")
    fn = getattr(module, name)
    if not callable(fn):
        raise TargetError(f"{path}: {name!r} is not a function (it is a {type(fn).__name__})")
    return fn


def _check_arity(forward, backward, path) -> None:
    try:
        fwd, bwd = inspect.signature(forward), inspect.signature(backward)
    except (TypeError, ValueError):
        return
    if not fwd.parameters:
        raise TargetError(f"{path}: {forward.__name__}() takes no arguments: a forward takes its inputs")
    try:
        bwd.bind(None, None)
    except TypeError:
        raise TargetError(f"{path}: {backward.__name__}{bwd} must take (dout, cache): the upstream "
                          "gradient and what the forward returned second") from None


def load_pair(target: str):
    """(forward, backward) from ``FILE.py:FORWARD:BACKWARD``; TargetError when it cannot be."""
    path, forward_name, backward_name = parse_target(target)
    module = load_module(path)
    forward = _function(module, forward_name, path, "forward")
    backward = _function(module, backward_name, path, "backward")
    _check_arity(forward, backward, path)
    return forward, backward


# ------------------------------------------------------------------ the inputs
MAX_ENTRIES = 2 ** 22     # one --shapes input: 32 MiB of float64, far more than a gradient check needs


def parse_shapes(text: str) -> dict:
    """"x=2,3,4;W=4,5" -> {"x": (2, 3, 4), "W": (4, 5)}; TargetError on a malformed one, an empty
    text, a name given twice or an input above MAX_ENTRIES entries."""
    shapes = {}
    for item in filter(None, (s.strip() for s in text.split(";"))):
        name, _, dims = item.partition("=")
        try:
            shape = tuple(int(d) for d in dims.split(",") if d.strip())
        except ValueError:
            shape = None
        if not name.strip().isidentifier() or not shape or min(shape) < 1:
            raise TargetError(f"--shapes: expected NAME=D1,D2,...;NAME=... with positive sizes, got {item!r}")
        if name.strip() in shapes:
            raise TargetError(f"--shapes: {name.strip()} is given twice, got {text!r}")
        if int(np.prod(shape, dtype=object)) > MAX_ENTRIES:
            raise TargetError(f"--shapes: expected at most {MAX_ENTRIES} entries per input, got {item!r} "
                              f"({int(np.prod(shape, dtype=object))})")
        shapes[name.strip()] = shape
    if not shapes:
        raise TargetError(f"--shapes: expected NAME=D1,D2,...;NAME=..., got {text!r}")
    return shapes


def graded_case(forward_name: str):
    """The graded main case of the pair whose forward has this name, or None."""
    for graded in (g for cases in case_table().values() for g in cases):
        if graded.check.backward and graded.check.forward.split(":")[1] == forward_name \
                and graded.dtype == "float64":
            return graded
    return None


def graded_inputs(graded, seed: int) -> Case:
    """The graded case's inputs: drawn from ``seed`` (trusted side), or in a student's copy, which
    holds no drawer, the stored public example of the case."""
    if in_student_copy():
        from .expected import Stored
        return Stored().case(graded, case_table()[graded.assignment].index(graded), 0, 0).case
    return graded.draw(np.random.default_rng(seed))


def draw_inputs(forward, seed: int, shapes=None) -> Case:
    """Inputs from the signature (or ``shapes``), float64, seeded."""
    rng = np.random.default_rng(seed)
    inputs = {}
    for name, p in inspect.signature(forward).parameters.items():
        if shapes:
            if name in shapes:
                inputs[name] = rng.standard_normal(shapes[name])
            continue
        if p.default is not inspect.Parameter.empty or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        if name in ("q", "k", "v"):
            inputs[name] = rng.standard_normal((B, H, T, C))
        elif name == "mask":
            inputs[name] = np.tril(np.ones((T, T), bool))
        else:
            inputs[name] = rng.standard_normal((B, T, C) if not inputs else (C, C) if name == "W" else (C,))
    if shapes:
        unknown = set(shapes) - set(inputs)
        if unknown:
            raise TargetError(f"--shapes: {forward.__name__} has no parameter {', '.join(sorted(unknown))}")
    return Case(inputs, wrt=tuple(k for k, v in inputs.items() if v.dtype.kind == "f"))


# ------------------------------------------------------------------ the check
def check_file(target: str, seed: int = 0, shapes=None) -> tuple[list, bool]:
    """(rows, whether a reference was found) for the student's pair in ``target``."""
    forward, backward = load_pair(target)
    graded = None if shapes else graded_case(forward.__name__)
    case = graded_inputs(graded, seed) if graded else draw_inputs(forward, seed, shapes)
    rows = []
    compared = graded is not None and not in_student_copy()     # a student's copy holds no reference
    try:
        _check_returns(forward, backward, case)
        if compared:
            rows += _compared(graded, case, forward, backward, seed)
        num = check_pair(forward, backward, {k: v.copy() for k, v in case.inputs.items()},
                         kwargs=case.kwargs, wrt=case.wrt or None, seed=seed)
    except TargetError:
        raise
    except Exception as e:            # noqa: BLE001 - the student's code raised: one line, where
        raise TargetError(f"running the pair raised {_one_line(e)}") from None
    rows += [Row(f"numerical d{r.name}", str(r.shape), r.max_abs_error, r.rel_error, r.ok) for r in num.rows]
    return rows, compared


def _check_returns(forward, backward, case) -> None:
    """Run the pair once and check the form of what it returns, which check_pair would take on
    trust: (out, cache) from the forward, out floating point; one gradient per input of
    ``case.wrt``, in order, each an array of its input's shape. TargetError otherwise."""
    wrt = case.gradient_inputs()
    result = forward(**{k: np.array(v, copy=True) for k, v in case.inputs.items()}, **case.kwargs)
    if not (isinstance(result, (tuple, list)) and len(result) == 2):
        got = f"a tuple of {len(result)}" if isinstance(result, (tuple, list)) else _kind(result)
        raise TargetError(f"{forward.__name__} must return (out, cache), got {got}")
    out, cache = result
    if np.asarray(out).dtype.kind != "f":
        raise TargetError(f"{forward.__name__}'s out: expected floating point numbers, got {_kind(out)}")
    grads = backward(np.ones_like(out) if np.ndim(out) else 1.0, cache)
    grads = tuple(grads) if isinstance(grads, (tuple, list)) else (grads,)
    if len(grads) != len(wrt):
        raise TargetError(f"{backward.__name__} returned {len(grads)} gradient{'s' * (len(grads) != 1)} for "
                          f"the {len(wrt)} input{'s' * (len(wrt) != 1)} {', '.join(wrt)} of "
                          f"{forward.__name__}: expected one per input, in that order")
    for name, grad in zip(wrt, grads):
        shape = tuple(np.shape(case.inputs[name]))
        if getattr(grad, "shape", None) is None or tuple(grad.shape) != shape:
            got = f"shape {tuple(grad.shape)}" if getattr(grad, "shape", None) is not None else _kind(grad)
            raise TargetError(f"{backward.__name__}'s d{name}: expected an array of {name}'s shape {shape}, "
                              f"got {got}")


def _kind(value) -> str:
    """What a value is, for a message: 'ndarray of shape (2, 3) and dtype int64', 'NoneType'."""
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        return f"{type(value).__name__} of shape {tuple(value.shape)} and dtype {value.dtype}"
    return type(value).__name__


def _compared(graded, case, forward, backward, seed) -> list:
    from .reference import trial_inputs, upstream_for  # the trusted side: outside a student's copy only
    package = __name__.split(".")[0]
    ref, g = run_pair(case, resolve(package, graded.check.forward), resolve(package, graded.check.backward),
                      g=lambda out: upstream_for(out, seed))
    student, _ = run_pair(case, forward, backward, g=g)
    stem = graded.check.forward.split(":")[1].removesuffix("_forward")
    messages = diagnose_all(graded.assignment, trial_inputs(graded, case, g), student, ref, function=stem)
    rows = []
    for tensor, r in ref.items():
        if r is None:
            continue
        row = compare(tensor, student.get(tensor), r)
        row.diagnosis = messages.get(tensor, row.diagnosis) if not row.ok else ""
        rows.append(row)
    return rows


def _one_line(e: BaseException) -> str:
    frames = traceback.extract_tb(e.__traceback__)
    where = f" (at {frames[-1].filename}:{frames[-1].lineno} in {frames[-1].name})" if frames else ""
    text = str(e).splitlines()[0] if str(e) else ""
    return f"{type(e).__name__}: {text}{where}"
