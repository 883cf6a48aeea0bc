"""A graded case in this process: its drawn inputs, and the functions run on them.

An assignment (homework/assignment.py) names its graded cases; a case's drawer, on the
trusted side (homework/assignments/), makes a ``Case`` from the grading seed. A student's
copy holds no drawer (it could be replayed to find the seed): it reads the same cases'
records from its mark, and the public seed's drawn ``Case`` from the numbers the export
stored (homework/expected.py).

    Case          a drawn case: inputs, options, what backward returns gradients for
    KnownFunction a function of a case that the grader knows (its gradient too) and lends to the
                  student's code for one call: the child calls it through the parent
                  (homework/needs.py); Tabulated, its values at a few points, is what a
                  student's copy holds of it
    tolerance     the relative error a right tensor of a case stays within (diagnose.TOLERANCE)
    run_pair      a functional pair on a case in this process (run_module: a Module)
    Local         the student's code in this process, with the Sandbox's interface

None of this computes an assigned function: it calls the functions it is given.
"""
from __future__ import annotations

import importlib
from pathlib import Path
from dataclasses import dataclass, field

import numpy as np

from .diagnose import tolerance as dtype_tolerance

STUDENT = "minitransformer"                  # the package name inside a student's copy
BACKWARD_CALLS = "backward_calls"            # a Module case's option: forward and backward this many times
REFERENCE = __name__.split(".")[0]           # this package: the reference, or a student's copy


@dataclass
class Case:
    inputs: dict                                 # name -> array (the differentiable ones are float64)
    kwargs: dict = field(default_factory=dict)   # non-array arguments (and a lent function's)
    wrt: tuple = ()                              # inputs backward returns gradients for, in order
    factors: dict = field(default_factory=dict)  # label -> (value, hint) for "off by a factor"
    masked: dict = field(default_factory=dict)   # tensor name -> bool array of masked entries

    def gradient_inputs(self) -> tuple:
        """The inputs backward returns gradients for: ``wrt``, or every floating-point input in order."""
        return self.wrt or tuple(k for k, v in self.inputs.items() if v.dtype.kind == "f")


def tolerance(graded) -> float:
    """The relative error a right tensor of the graded case ``graded`` stays within."""
    return dtype_tolerance(graded.dtype)


def case_table() -> dict:
    """assignment id -> its GradedCases, the main case first (homework/registry.py)."""
    from .registry import case_table as table
    return table()


class KnownFunction:
    """A function an assignment's case passes to the student's code (a gradient checker's ``f``). Its
    definition is the grader's (trusted): in the grader's child it is a question to the parent;
    here it is called directly; ``tabulated()`` is the table a student's copy stores instead."""

    def __call__(self, x):
        raise NotImplementedError(f"{type(self).__name__} defines no function")

    def tabulated(self) -> "Tabulated":
        raise NotImplementedError(f"{type(self).__name__} has no table")


@dataclass
class Tabulated(KnownFunction):
    """A function known at ``points`` only, with its ``values`` there: what a student's copy holds of a
    function the grader lends to the student's code (the functions a gradient checker is graded on).
    A point within ``step``/100 of a stored one (in every entry) gets its value; any other point is
    refused with a message that says which points are known."""
    points: np.ndarray               # (k, *shape): the points, stacked
    values: np.ndarray               # (k, *out): the function's value at each
    step: float                      # the perturbation the points differ by (h)

    def __call__(self, x):
        x = np.asarray(x, dtype=np.float64)
        if x.shape == self.points.shape[1:]:
            far = np.abs(self.points - x).reshape(len(self.points), -1).max(axis=1)
            k = int(np.argmin(far))
            if far[k] <= self.step / 100:
                return np.array(self.values[k], copy=True)
        raise ValueError(f"this copy knows f only at x and at x ± h e_i (the public example, x of shape "
                         f"{self.points.shape[1:]}, h = {self.step:g}); the grader computes f anywhere")

    def tabulated(self) -> "Tabulated":
        return self


def resolve(package: str, spec: str):
    """The object ``spec`` = "module:Qual.name" names in ``package``."""
    module, qualname = spec.split(":")
    obj = importlib.import_module(f"{package}.{module}")
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


# ------------------------------------------------------------------ a case in this process
def _copies(inputs: dict) -> dict:
    return {k: np.array(v, copy=True) for k, v in inputs.items()}


def _upstream(g, out):
    """``g`` itself, or ``g(out)`` when it is a function of the output (a drawn upstream gradient)."""
    return g(out) if callable(g) else g


def run_pair(case: Case, forward, backward, g=None) -> tuple[dict, object]:
    """{"out": ..., "d<name>": ...} of a functional pair on copies of the case's inputs, and the
    upstream gradient used (``g``, an array or a function of the output). A forward-only check
    (backward None) returns only "out"."""
    out_cache = forward(**_copies(case.inputs), **case.kwargs)
    if backward is None:
        return {"out": out_cache}, None
    out, cache = out_cache
    g = _upstream(g, out)
    grads = backward(np.array(g, copy=True), cache)
    grads = grads if isinstance(grads, tuple) else (grads,)
    result = {"out": out}
    for i, name in enumerate(case.gradient_inputs()):
        result[f"d{name}"] = grads[i] if i < len(grads) else None
    return result, g


def new(target: str, **kwargs) -> dict:
    """A constructor argument that is an object (a position hook, a pattern, a BlockSpec): made on the
    side that builds the Module (module_arguments), from plain values a case can store and send."""
    return {"new": target, "kwargs": kwargs}


def module_arguments(case: Case, make) -> tuple:
    """(args, kwargs) of a module case's constructor, ``ctor``, with every ``new(target, ...)`` in
    them made by ``make(target, kwargs)`` (innermost first); a case with a ``spec`` passes
    (BlockSpec(**spec),). ``make`` runs where the Module is built: this package's classes here,
    the student's in the confined child (homework/evaluate.py)."""
    def made(value):
        if isinstance(value, dict) and set(value) == {"new", "kwargs"}:
            return make(value["new"], made(value["kwargs"]))
        if isinstance(value, dict):
            return {k: made(v) for k, v in value.items()}
        if isinstance(value, (tuple, list)):
            return type(value)(made(v) for v in value)
        return value
    args, kwargs = case.kwargs["ctor"]
    if "spec" in case.kwargs:
        args = (made(new("layers.blocks:BlockSpec", **case.kwargs["spec"])),)
    return made(tuple(args)), made(dict(kwargs))


def build_module(cls, case: Case, package: str | None = None):
    """The Module of a module case, ``cls(*args, **kwargs)`` (module_arguments), its objects made from
    ``package``'s classes (this one by default)."""
    package = package or REFERENCE
    args, kwargs = module_arguments(case, lambda target, kw: resolve(package, target)(**kw))
    return cls(*args, **kwargs)


def input_gradients(grads, cross: bool) -> dict:
    """{"dx"} of a Module backward's result, or {"dx", "dmemory"} with cross-attention (which
    returns the pair); a gradient that is not there is None (an empty tuple, a short one)."""
    grads = grads if isinstance(grads, tuple) else (grads,)
    found = {"dx": grads[0] if grads else None}
    if cross:
        found["dmemory"] = grads[1] if len(grads) > 1 else None
    return found


def run_module(module, case: Case, g=None) -> tuple[dict, object]:
    """{"out", "dx", "dmemory" (cross), "d<param>"...} of a Module on copies of the case's inputs; with
    the case's option ``backward_calls`` = n, forward and backward n times (the parameters' gradients
    add up: a Module's backward accumulates)."""
    module.zero_grad()
    for _ in range(int(case.kwargs.get(BACKWARD_CALLS, 1))):   # no zero_grad between: the gradients add
        out = module.forward(**_copies(case.inputs))
        g = _upstream(g, out)
        grads = module.backward(np.array(g, copy=True))
    result = {"out": out, **input_gradients(grads, "memory" in case.inputs)}
    for name, _, grad in module.parameters():
        result[f"d{name}"] = np.array(grad, copy=True)
    return result, g


# ------------------------------------------------------------------ a student in this process
class Local:
    """The student's own copy in this process (a student's local check): no confinement. The
    same interface as the Sandbox: ``call`` answers the value and the arguments after the call,
    an exception of the student's code comes back as sandbox.StudentError."""

    def __init__(self):
        self.echoed = []                 # the arguments of the last two calls (live: as they are now)

    def function(self, spec):
        fn = resolve(STUDENT, spec)

        def local(*args, **kwargs):
            return _student(fn, args, kwargs)
        return local

    def call(self, spec, args=(), kwargs=None, blocked=None) -> tuple:
        return self.echo(resolve(STUDENT, spec), args, kwargs, blocked)

    def echo(self, fn, args, kwargs, blocked=None) -> tuple:
        """``blocked``: a forward that raises while ``fn`` runs (child.blocked_forward)."""
        from .child import blocked_forward
        args, kwargs = [_copy(a) for a in args], {k: _copy(v) for k, v in (kwargs or {}).items()}
        with blocked_forward(STUDENT, blocked):
            value = _student(fn, args, kwargs)
        self.echoed = (self.echoed + [(tuple(args), kwargs)])[-2:]
        return value, tuple(_copy(a) for a in args), {k: _copy(v) for k, v in kwargs.items()}   # as after it

    def again(self) -> tuple:
        """(args, kwargs) of the call before the last, as they are now (the Sandbox's ``again``)."""
        return self.echoed[0]

    def module(self, spec, *args, **kwargs):
        return LocalModule(_student(resolve(STUDENT, spec), args, kwargs), self)


class LocalModule:
    """A Module of the student's copy with the Sandbox's RemoteModule ``call``; anything else is
    the Module's own (gradcheck.check_module takes it as it is)."""

    def __init__(self, module, local: Local):
        self.module, self.local = module, local

    def __getattr__(self, name):
        return getattr(self.module, name)

    def call(self, name, args=(), kwargs=None, blocked=None) -> tuple:
        return self.local.echo(getattr(self.module, name), args, kwargs, blocked)


def _copy(value):
    return np.array(value, copy=True) if isinstance(value, np.ndarray) else value


def _student(fn, args, kwargs):
    from .sandbox import StudentError
    try:
        return fn(*args, **kwargs)
    except Exception as e:                   # noqa: BLE001 - the student's code: its result
        from .child import student_frames           # the stand-in of a blocked forward left out
        frames = [f for f in student_frames(e.__traceback__) if "numpy" not in Path(f.filename).parts]
        where = f"{frames[-1].filename}:{frames[-1].lineno} in {frames[-1].name}" if frames else ""
        raise StudentError({"type": type(e).__name__, "message": str(e), "where": where}) from None
