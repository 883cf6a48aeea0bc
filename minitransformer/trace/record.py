"""The recorder: ``with trace(model) as t: ...`` keeps every functional call made inside, in order.

How it sees the calls: ``sys.settrace``, the interpreter's own hook for calls. Its
global function runs at every new Python frame of this thread; for a frame whose
code object is a public routine of ``functional/`` (routines.py) it returns a local
function, which hears that frame's return (or exception) and nothing else (line
events off). Nothing is replaced anywhere, so the math files, the Modules'
``twin(...)`` table and ``gpt_reference.py``'s imported names stay exactly as they
are; on exit the previous trace function is put back, which restores everything
the recorder changed. Why this and not something else: docs of ``trace/__init__.py``.

What becomes a Step: a routine called from outside ``functional/`` (a Module, the
reference, a lecture), and a *_forward / *_backward pair called inside one (the
softmax inside attention), with the step it runs in as its parent. A twin of the
speed wing (functional/twins.py's TWINS) is recorded as the plain routine it
stands for, marked ``twin``.

Names: a parameter argument is named by the model's dotted parameter name (by
identity; a transposed view gets "ᵀ"); an argument that an earlier step returned
is linked to it (``Value.source``); a backward's cache argument links the backward
to the forward it reverses, and each of its results to the forward value it is the
gradient of (``dW`` -> ``W``, the upstream ``dy`` -> the forward's ``y``). A step's
scope is the dotted name of the nearest Module up the call stack, else that of its
parameters, else the scope the caller declared (``Trace.named``), else the last one.
"""
from __future__ import annotations

import sys
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from ..functional.twins import TWINS
from .routines import PACKAGE, names_for, routine_of
from .values import Limits, is_array, is_cache, summarize

_CALLERS = 8            # enclosing frames whose names a step keeps (a homework copy marks the student's)


@dataclass
class Step:
    index: int
    routine: object                 # routines.Routine
    phase: str                      # "forward" until the first backward routine, then "backward"
    scope: str                      # "blocks.0.attn.sublayer"
    call: tuple                     # (file, line, function, filename) of the call site
    callers: tuple                  # qualified names of the enclosing functions, innermost first
    parent: int | None = None       # the step this one runs inside
    twin: bool = False              # the speed wing's twin ran
    args: list = field(default_factory=list)
    results: list = field(default_factory=list)
    reverses: int | None = None     # a backward: the forward step it reverses
    reversed_by: int | None = None  # a forward: the backward step that reverses it
    error: str = ""                 # "TypeError: ..." when the routine raised
    known: dict = field(default_factory=dict, repr=False)   # id -> argument name, while it runs

    @property
    def op(self) -> str:
        return self.routine.op

    def value(self, name: str):
        """The argument or result called ``name``, or None."""
        return next((v for v in self.args + self.results if v.name == name), None)


@dataclass
class Trace:
    steps: list = field(default_factory=list)
    meta: dict = field(default_factory=dict)     # what the caller records: family, tokens, loss ...
    error: str = ""                              # what stopped the traced code, if anything
    _default_scope: list = field(default_factory=lambda: [""])

    @contextmanager
    def named(self, scope: str):
        """Steps with no Module and no parameter inside this block get ``scope`` (e.g. "loss")."""
        self._default_scope.append(scope)
        try:
            yield self
        finally:
            self._default_scope.pop()

    def top(self) -> list:
        """The steps called from outside functional/ (no parent), in order."""
        return [s for s in self.steps if s.parent is None]


@contextmanager
def trace(model=None, *, limits: Limits = Limits()):
    """Record every functional call made in the block; ``model`` (any Module, or a dict of named
    parameter arrays such as gpt_reference's ``p``) names the parameters and the scopes."""
    if model is not None and not isinstance(model, dict) and not callable(getattr(model, "parameters", None)):
        raise TypeError(f"model: expected a Module, a dict of named arrays or None, got {type(model).__name__}")
    recorder = _Recorder(model, limits)
    previous = sys.gettrace()
    recorder.chained = previous
    sys.settrace(recorder.on_call)
    try:
        yield recorder.trace
    except BaseException as e:
        recorder.trace.error = f"{type(e).__name__}: {e}"
        raise
    finally:
        sys.settrace(previous)
        recorder.release()


class _Recorder:
    def __init__(self, model, limits: Limits):
        self.trace, self.limits, self.chained = Trace(), limits, None
        named = model.items() if isinstance(model, dict) else \
            ((name, p) for name, p, _ in model.parameters()) if model is not None else ()
        self.params = {id(p): name for name, p in named}
        self.modules = {id(m): name or "model" for name, m in model.named_modules()} \
            if hasattr(model, "named_modules") else {}
        self.twins = {t.__code__: plain.__code__ for plain, t in TWINS.items() if hasattr(t, "__code__")}
        self.open: list = []              # the steps whose frames are running, innermost last
        self.sources: dict = {}           # id(array) -> (step, name, stats, the array: kept alive)
        self.caches: dict = {}            # id(cache) -> (step, cache)
        self.seen_backward = False
        self.kinds: dict = {}             # code -> (Routine or None, is twin)

    def release(self) -> None:
        """Drop every reference to the traced arrays (the Values keep their own copies)."""
        self.sources.clear()
        self.caches.clear()

    # ------------------------------------------------------------------ the hook
    def on_call(self, frame, event, arg):
        chained = self.chained(frame, event, arg) if self.chained is not None else None
        routine, twin = self._kind(frame.f_code)
        if routine is None or (self.open and not routine.pair):
            return chained
        step = self._open(frame, routine, twin)
        if chained is None:
            frame.f_trace_lines = False
        return self._local(step, chained)

    def _kind(self, code):
        if code not in self.kinds:
            plain = self.twins.get(code)
            self.kinds[code] = (routine_of(plain or code), plain is not None)
        return self.kinds[code]

    def _local(self, step: Step, chained):
        def local(frame, event, arg):
            nonlocal chained
            if event == "exception":
                step.error = f"{arg[0].__name__}: {arg[1]}"
            elif event == "return":
                self._close(step, arg)
            if chained is not None:
                chained = chained(frame, event, arg)
            return local
        return local

    # ------------------------------------------------------------------ a call
    def _open(self, frame, routine, twin: bool) -> Step:
        self.seen_backward |= routine.direction == "backward"
        steps = self.trace.steps
        step = Step(len(steps), routine, "backward" if self.seen_backward else "forward", "",
                    _call_site(frame), _callers(frame), self.open[-1].index if self.open else None, twin)
        code = frame.f_code
        names = list(code.co_varnames[:code.co_argcount + code.co_kwonlyargcount])
        if code.co_flags & 0x04:                                   # *args (merge_heads(*parts))
            names.append(code.co_varnames[len(names)])
        arguments = {name: frame.f_locals.get(name) for name in names}
        for name, obj in arguments.items():
            step.args.append(self._argument(name, obj, step))
        step.known = {id(obj): name for name, obj in arguments.items() if is_array(obj)}
        if step.reverses is None and step.parent is not None and routine.direction == "backward":
            step.reverses = self._nested_forward(steps[step.parent], routine.op)
        step.scope = self._scope(frame, step)
        steps.append(step)
        self.open.append(step)
        return step

    def _argument(self, name: str, obj, step: Step):
        if isinstance(obj, tuple) and not is_cache(obj) and obj and all(is_array(o) for o in obj):
            value = summarize(name, None, self.limits)             # *parts: each part its own Value
            value.kind, value.fields = "parts", [self._argument(f"{name}[{i}]", o, step) for i, o in enumerate(obj)]
            return value
        value = summarize(name, obj, self.limits)
        if is_cache(obj) and id(obj) in self.caches:
            step.reverses = self.caches[id(obj)][0]
            value.source = (step.reverses, "cache", True, "")
        elif is_array(obj):
            value.param = self._param(obj)
            value.label = value.param
            if not value.param:
                value.source = self._source(obj, value.stats)
        return value

    def _nested_forward(self, parent: Step, op: str):
        """A pair run inside another backward with a cache made there (attention's softmax): the
        forward it reverses is the same pair inside the forward that the parent reverses."""
        if parent.reverses is None:
            return None
        forward_op = op[:-len("_backward")] + "_forward"
        return next((s.index for s in self.trace.steps if s.parent == parent.reverses and s.op == forward_op
                     and s.reversed_by is None), None)

    def _param(self, obj) -> str:
        if id(obj) in self.params:
            return self.params[id(obj)]
        base = getattr(obj, "base", None)
        if base is not None and id(base) in self.params:
            transposed = obj.ndim == 2 and tuple(obj.shape) == tuple(base.shape)[::-1]
            return self.params[id(base)] + ("ᵀ" if transposed else " (a view)")
        return ""

    def _source(self, obj, stats: dict):
        """(step, name, same, how) of the earlier result ``obj`` is: the very array (same, how ""),
        a view of it ("view"), or the array since changed in place ("changed", a residual's +=)."""
        for key, view in ((id(obj), False), (id(getattr(obj, "base", None)), True)):
            if key in self.sources:
                index, name, was, _ = self.sources[key]
                same = not view and was == stats
                return (index, name, same, "" if same else "view" if view else "changed")
        return None

    def _scope(self, frame, step: Step) -> str:
        f = frame.f_back
        while f is not None:
            owner = f.f_locals.get("self")
            if owner is not None and id(owner) in self.modules:
                return self.modules[id(owner)]
            f = f.f_back
        params = [v.param.rstrip("ᵀ").split(" ")[0] for v in step.args if v.param]
        if params:
            return _common_prefix(params)
        if self.trace._default_scope[-1]:
            return self.trace._default_scope[-1]
        if step.reverses is not None:
            return self.trace.steps[step.reverses].scope
        return self.trace.steps[-1].scope if self.trace.steps else ""

    # ------------------------------------------------------------------ its return
    def _close(self, step: Step, result) -> None:
        self.open.remove(step)
        known, step.known = step.known, {}
        if step.error and result is None:
            return                                                 # it raised: no result
        step.error = ""
        items = result if isinstance(result, tuple) and not is_cache(result) else None
        names = names_for(step.routine, None if items is None else len(items))
        for name, obj in zip(names, (result,) if items is None else items):
            value = summarize(name, obj, self.limits, known)
            step.results.append(value)
            if is_array(obj) and id(obj) not in known:
                known[id(obj)] = f"{name} (the output)"              # a cache field that is the output
            if is_cache(obj):
                self.caches[id(obj)] = (step.index, obj)
            elif is_array(obj):
                stats = value.stats if value.kind != "same" else step.value(value.text).stats   # the argument itself
                self.sources[id(obj)] = (step.index, name, stats, obj)
                if getattr(obj, "base", None) is not None:           # its views find it through the owner
                    self.sources[id(obj.base)] = (step.index, name, None, obj.base)
        if step.reverses is not None:
            self._link_gradients(step, self.trace.steps[step.reverses])

    def _link_gradients(self, step: Step, forward: Step) -> None:
        """dX -> the forward's X; the upstream (the first argument) -> the forward's first result."""
        forward.reversed_by = step.index
        for value in step.results:
            target = forward.value(value.name[1:]) if value.name.startswith("d") else None
            if target is not None:
                value.grad_of = (forward.index, target.name)
                value.label = f"∂L/∂{target.label or target.name}"
        upstream, produced = step.args[0], forward.results[0] if forward.results else None
        if produced is not None and upstream.kind == "array":
            upstream.grad_of = (forward.index, produced.name)


def _common_prefix(names: list) -> str:
    parts = [n.split(".") for n in names]
    common = []
    for group in zip(*parts):
        if len(set(group)) > 1:
            break
        common.append(group[0])
    if len(common) == len(parts[0]):                               # one parameter: its module
        common = common[:-1]
    return ".".join(common)


def _where(code) -> str:
    path = Path(code.co_filename)
    try:
        return path.resolve().relative_to(PACKAGE).as_posix()
    except ValueError:
        return path.name


def _qualname(frame) -> str:
    code = frame.f_code
    qualname = getattr(code, "co_qualname", None)                  # Python 3.11+
    if qualname is None:
        owner = frame.f_locals.get("self")
        qualname = f"{type(owner).__name__}.{code.co_name}" if owner is not None else code.co_name
    return qualname


def _call_site(frame) -> tuple:
    """(file as shown, line, function, the file's full name) of the line that called the routine."""
    f = frame.f_back
    return ("", 0, "", "") if f is None else (_where(f.f_code), f.f_lineno, _qualname(f), f.f_code.co_filename)


def _callers(frame) -> tuple:
    found, f = [], frame.f_back
    while f is not None and len(found) < _CALLERS:
        found.append(f"{_where(f.f_code)}:{_qualname(f)}")
        f = f.f_back
    return tuple(found)
