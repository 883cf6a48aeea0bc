"""Grade one assignment on its graded cases (homework/assignments/<id>.py), in the grader's process.

For every graded case of the assignment and every drawn example:

    draw        the case's inputs, from the seed (the instructor's secret, or the public 0)
    student     the student's functions run on them (in the confined child, or in-process in
                a student's own copy) and send back their results and their arguments as they
                are after the call
    reference   the reference's results on the same inputs (this installation's:
                homework/reference.py, trusted side; or, in a student's copy, the public
                seed's stored ones: homework/expected.py), as a ``Drawn``
    compare     each tensor within the case's tolerance (diagnose.compare)
    diagnose    each wrong tensor with the catalogue (mistakes.diagnose_all), its variants
                computed here from the same inputs
    promises    float32 in, float32 out (mistakes.dtype_message); no input and no upstream
                gradient changed in place (mistakes.mutation_message: before vs after the
                call, and the forward's inputs again after the backward, through its cache)

The outcomes go to the rubric (homework/rubric.py): a wrong tensor fails its own check
and no other. The numerical gradient check of the student's code runs on the first
example of each pair's (or Module's) main case and is shown, not scored. ``run`` returns a
``result.Result``: the rows, the rubric's marks, the score and the status.
A ``student`` offers ``call(spec, args, kwargs)`` -> (value, args after, kwargs after),
``again()`` -> (args, kwargs) of the call before the last as they are now,
``function(spec)`` and ``module(spec, *args, **kwargs)`` (its ``call(method, args,
kwargs)`` the same echo): the Sandbox, or graded.Local.
"""
from __future__ import annotations

import inspect
import math
from dataclasses import dataclass, field

import numpy as np

from ..gradcheck import check_module, check_pair
from .child import BLOCKED
from .diagnose import Row, compare
from .explain import explain
from .graded import BACKWARD_CALLS, REFERENCE, Case, input_gradients, module_arguments, resolve, tolerance
from .mistakes import dtype_message, entries, fits, mutation_message
from .properties import JUDGES
from .registry import get
from .result import EXCEPTION, FAIL, NOT_IMPLEMENTED, OK, Result
from .rubric import UNCHANGED, score
from .sandbox import ChildGone, StudentError

RAISED, DTYPE, PARAMS = "raised", "dtype", "d(parameters)"
FORWARD_IN_BACKWARD = ("the backward calls its own forward ({forward}): it is not derived, it differentiates "
                       "the forward (numerically or by rerunning it); the graded backward runs with its "
                       "forward unavailable")
NOT_PARAMETERS = ("out", "dx", "dmemory", RAISED, DTYPE, UNCHANGED)
NAN = float("nan")


@dataclass
class Failure:
    """A case whose student call raised: the case, the exception, the tensors the call never
    delivered (and whether it delivered any), the drawn shapes by name (inputs, upstream gradient,
    expected results) for homework/explain.py."""
    case: str
    error: StudentError
    undelivered: list = field(default_factory=list)
    delivered: bool = False
    drawn: dict = field(default_factory=dict)


@dataclass
class Drawn:
    """One example of a graded case, as the reference gives it: the drawn inputs, the expected results,
    the upstream gradient (None for a function), a Module's initial parameters (None otherwise)."""
    case: Case
    expected: dict
    upstream: object = None
    state: dict | None = None


def stem(graded) -> str:
    """The function a case runs, as the catalogue names it: "layernorm", "MultiHeadAttention"."""
    return graded.check.forward.split(":")[1].removesuffix("_forward")


# ------------------------------------------------------------------ the student's results
def _student_pair(student, graded, case, g):
    """(results, the forward's arguments after the call and after the backward (None when the
    backward did not run), the upstream gradient after, error)."""
    check = graded.check
    value, _, after = student.call(check.forward, (), {**case.inputs, **case.kwargs})
    if check.backward is None:
        return {"out": value}, (after, None), None, None
    if not (isinstance(value, tuple) and len(value) == 2):
        raise StudentError({"type": "TypeError", "message": f"{check.forward.split(':')[1]} must return "
                            f"(out, cache), it returned a {type(value).__name__}"})
    out, cache = value
    try:
        grads, args_after, _ = student.call(check.backward, (g, cache), {}, blocked=check.forward)
    except StudentError as e:
        return {"out": out}, (after, None), None, e
    grads = grads if isinstance(grads, tuple) else (grads,)
    results = {"out": out}
    for i, name in enumerate(case.gradient_inputs()):
        results[f"d{name}"] = grads[i] if i < len(grads) else None
    return results, (after, student.again()[1]), _first(args_after), None


def _student_module(student, graded, case, g, state):
    args, kwargs = module_arguments(case, lambda target, kw: student.call(target, (), kw)[0])
    module = student.module(graded.check.forward, *args, **kwargs)
    module.load_state_dict(state)
    for _ in range(int(case.kwargs.get(BACKWARD_CALLS, 1))):       # twice: the gradients must add up
        out, _, after = module.call("forward", (), dict(case.inputs))
        try:
            grads, args_after, _ = module.call("backward", (g,), blocked=f"{graded.check.forward}.forward")
        except StudentError as e:
            return {"out": out}, (after, None), None, e, module
    results = {"out": out, **input_gradients(grads, "memory" in case.inputs)}
    for name, _, grad in module.parameters():
        results[f"d{name}"] = grad
    return results, (after, student.again()[1]), _first(args_after), None, module


def _first(echoed: tuple):
    """The first argument as the child echoed it back, or None when it sent none back (an echo the
    student's code emptied: then it cannot be shown unchanged)."""
    return echoed[0] if echoed else None


def _is_array(value) -> bool:
    return isinstance(value, (np.ndarray, np.generic, float, int, bool))


# ------------------------------------------------------------------ one assignment's tally
class Tally:
    """The rows of one assignment (the worst example of each) and its outcomes (every example)."""

    def __init__(self):
        self.rows: dict = {}            # (case name, tensor) -> Row
        self.numerical: dict = {}
        self.outcomes: dict = {}        # (case name, tensor) -> bool, for the rubric
        self.errors: list = []          # Failure, one per case that raised
        self.trivial: dict = {}         # case name -> every example's answer trivially reachable so far
        self.flags: list = []           # what the instructor should look at (a backward calling its forward)

    def add(self, case, tensor, row: Row, *, scored: bool = True, into=None) -> None:
        rows = self.rows if into is None else into
        old = rows.get((case, tensor))
        if old is None or (old.ok and not row.ok) or (not old.ok and not row.ok and row.diagnosis
                                                      and not old.diagnosis):
            rows[(case, tensor)] = row
        if scored:
            self.outcomes[(case, tensor)] = self.outcomes.get((case, tensor), True) and row.ok


def _row(name, s, r, tol) -> Row:
    if s is not None and not _is_array(s):
        return Row(name, str(np.shape(r)), NAN, NAN, False, f"not an array: a {type(s).__name__}")
    return compare(name, s, r, tol=tol)


def _by_property(graded, case, g, student, tol) -> dict:
    """The rows of a case judged by a property (properties.JUDGES): its message, or a catalogue
    predicate's that recognises the tensor (more pointed)."""
    inputs = dict(case.inputs, **case.kwargs, upstream=g)
    rows = {}
    for tensor, (ok, message) in JUDGES[graded.judge](inputs, student, g, tol).items():
        s = student.get(tensor)
        if not ok:
            message = _predicate_message(graded, tensor, inputs, s) or message
        rows[tensor] = Row(f"{graded.name} · {tensor}", str(np.shape(s)), NAN, NAN, ok, message)
    return rows


def _predicate_message(graded, tensor, inputs, student) -> str:
    """The first catalogue entry of the case's function with a predicate that recognises ``student``."""
    for mistake in entries(graded.assignment, stem(graded)):
        if mistake.match is None or not any(fits(tensor, t) for t in mistake.tensors):
            continue
        try:
            if mistake.match(inputs, tensor, student, None):
                return mistake.message
        except (KeyError, ValueError, TypeError, IndexError):
            continue
    return ""


def _judge(tally, graded, ref, g, student, diagnose, case=None) -> None:
    """Compare every tensor the student returned; diagnose the wrong ones (the catalogue, then
    the generic patterns of homework/diagnose.py)."""
    tol, rows = tolerance(graded), {}
    if graded.judge is not None:
        rows = _by_property(graded, case, g, student, tol)
    for tensor, r in ref.items():
        if graded.judge is None and r is not None and tensor in student:
            rows[tensor] = _row(f"{graded.name} · {tensor}", student[tensor], r, tol)
    if graded.judge is None and any(not row.ok for row in rows.values()):
        clean = {t: v if _is_array(v) else None for t, v in student.items()}
        messages = diagnose(clean)
        for tensor, row in rows.items():
            if not row.ok and messages.get(tensor) and _is_array(student[tensor]):   # not "returned None"
                row.diagnosis = messages[tensor]                                     # for a dict
    for tensor, row in rows.items():
        tally.add(graded.name, tensor, row)
    if graded.dtype == "float32":
        found = [dtype_message(t, student[t], np.float32) for t in rows
                 if isinstance(student[t], np.ndarray) and student[t].dtype.kind == "f"]
        found = [m for m in found if m]
        tally.add(graded.name, DTYPE, Row(f"{graded.name} · float32 kept", "-", NAN, NAN, not found,
                                          found[0] if found else ""))


def _unchanged(tally, graded, case, afters, g, g_after) -> None:
    """The inputs and the upstream gradient as the child had them after the calls, vs what was
    sent; ``afters``: the forward's arguments after it and after the backward (or None)."""
    after, later = afters
    sent = {**case.inputs, **{k: v for k, v in case.kwargs.items() if isinstance(v, np.ndarray)}}
    found = _mutations(sent, after)
    if later is not None and not any(found):
        found = _mutations(sent, later, by_backward=True)
    if g is not None:
        name = _upstream_name(graded)
        found.append(mutation_message(name, g, g_after, upstream=True) if isinstance(g_after, np.ndarray)
                     else _not_echoed(name))
    found = [m for m in found if m]
    tally.add(graded.name, UNCHANGED, Row(f"{graded.name} · inputs unchanged", "-", NAN, NAN, not found,
                                          found[0] if found else ""))


def _mutations(sent: dict, seen: dict, **how) -> list:
    """A message (or None) per sent argument: changed in place, or not echoed back at all."""
    return [mutation_message(k, before, seen[k], **how) if isinstance(seen.get(k), np.ndarray)
            else _not_echoed(k) for k, before in sent.items()]


def _not_echoed(argument) -> str:
    """An argument that did not come back from the call: it cannot be shown unchanged."""
    return f"`{argument}` did not come back from the call as an array: it cannot be shown unchanged"


def _upstream_name(graded) -> str:
    if graded.check.checker == "module":
        return "dy"
    try:
        return next(iter(inspect.signature(resolve(REFERENCE, graded.check.backward)).parameters))
    except (StopIteration, TypeError, ValueError):
        return "dout"


def error_text(e: StudentError, places=None) -> str:
    """The exception as a row shows it; a staged path written as the student's (homework/places.py)."""
    from .places import scrub
    if e.type == "NotImplementedError":
        return f"not implemented: {scrub(str(e), places)}"
    return f"exception: {e.type}: {scrub(str(e), places)}" + (f" (at {scrub(e.where, places)})" if e.where else "")


# ------------------------------------------------------------------ the numerical check
class _InputOnly:
    """A Module seen by check_module with its input only: a Module assignment's forward is given (its
    backward is the target), so the numerical derivative of each parameter would repeat the
    comparison of that gradient with the reference's, at a whole forward per coordinate (in the
    grader each one a round of questions to the parent, homework/needs.py)."""

    def __init__(self, module):
        self.module = module

    def forward(self, *inputs, **kwargs):
        return self.module.forward(*inputs, **kwargs)

    def backward(self, dout):
        return self.module.backward(dout)

    def zero_grad(self):
        self.module.zero_grad()

    def parameters(self):
        return iter(())

    def named_modules(self):
        return []


def _numerical(tally, graded, case, student, module, seed) -> None:
    check = graded.check
    try:
        if check.checker == "module":
            num = check_module(_InputOnly(module), case.inputs["x"].copy(), seed=seed, max_coords=16, tol=1e-6)
        else:
            num = check_pair(student.function(check.forward), student.function(check.backward),
                             {k: np.array(v, copy=True) for k, v in case.inputs.items()},
                             kwargs=case.kwargs, wrt=case.gradient_inputs(), seed=seed, max_coords=32)
    except ChildGone:
        raise
    except Exception as e:                   # noqa: BLE001 - the student's values broke the check: shown
        text = error_text(e) if isinstance(e, StudentError) else f"could not run: {type(e).__name__}: {e}"
        tally.add(graded.name, "numerical", Row(f"{graded.name} · numerical check", "-", NAN, NAN, False,
                                                text), scored=False, into=tally.numerical)
        return
    for r in num.rows:
        name = {"input[0]": "x", "input[1]": "memory"}.get(r.name, r.name)
        tally.add(graded.name, f"numerical {name}",
                  Row(f"{graded.name} · numerical d{name}", str(r.shape), r.max_abs_error, r.rel_error, r.ok),
                  scored=False, into=tally.numerical)


def _runs_numerical(graded) -> bool:
    """On the first float64 case of each pair or Module (the check is shown, not scored)."""
    if graded.dtype != "float64" or not graded.numerical or graded.check.checker == "function":
        return False
    return next(g for g in get(graded.assignment).cases if g.check == graded.check) is graded


# ------------------------------------------------------------------ one case, one assignment
def _drawn_shapes(graded, drawn) -> dict:
    """The drawn arrays' shapes by the names the docstrings use: inputs, the upstream gradient (by
    the backward's parameter name), the expected results."""
    shapes = {k: tuple(np.shape(v)) for k, v in drawn.case.inputs.items()}
    shapes.update({k: tuple(np.shape(v)) for k, v in drawn.expected.items() if v is not None})
    if drawn.upstream is not None:
        shapes[_upstream_name(graded)] = tuple(np.shape(drawn.upstream))
    return shapes


def grade_case(tally, graded, index, student, reference, seed, examples, places=None) -> None:
    """Every example of one graded case into ``tally``; the first exception ends the case."""
    for e in range(examples if reference.examples is None else min(examples, reference.examples)):
        drawn = reference.case(graded, index, e, seed)
        case, ref, g, state = drawn.case, drawn.expected, drawn.upstream, drawn.state
        tally.trivial[graded.name] = tally.trivial.get(graded.name, True) and trivially_reachable(drawn)
        module = None
        try:
            if graded.check.checker == "module":
                results, afters, g_after, error, module = _student_module(student, graded, case, g, state)
            else:
                results, afters, g_after, error = _student_pair(student, graded, case, g)
        except StudentError as err:
            results, error = None, err
        if results is not None:
            _judge(tally, graded, ref, g, results,
                   lambda student: reference.diagnose(graded, index, e, drawn, student), case)
            _unchanged(tally, graded, case, afters, g if error is None else None, g_after)
        if error is not None:
            undelivered = _unjudged(ref, results)
            for tensor in undelivered:                   # an exception is no pass: right on an earlier
                tally.outcomes[(graded.name, tensor)] = False     # example is not right on this one
            tally.errors.append(Failure(graded.name, error, undelivered, results is not None,
                                        _drawn_shapes(graded, drawn)))
            tally.add(graded.name, RAISED, Row(graded.name, "-", NAN, NAN, False, error_text(error, places)))
            _flag(tally, graded, error)
            return
        if e == 0 and _runs_numerical(graded):
            _numerical(tally, graded, case, student, module, seed)


def _flag(tally, graded, error) -> None:
    """A backward that raised because it called its own forward: flagged for the instructor."""
    if error.type == BLOCKED:
        flag = FORWARD_IN_BACKWARD.format(forward=graded.check.forward.split(":")[1])
        if flag not in tally.flags:
            tally.flags.append(flag)


def trivially_reachable(drawn) -> bool:
    """Every expected result of this example is all zeros, or a copy of an input or of the upstream
    gradient: code that computes nothing gets it right (the rubric counts it only beside real work)."""
    given = [v for v in (*drawn.case.inputs.values(), *drawn.case.kwargs.values(), drawn.upstream)
             if isinstance(v, np.ndarray)]
    found = [np.asarray(r) for r in drawn.expected.values() if r is not None]

    def trivial(r):
        return not np.any(r) or any(v.shape == r.shape and np.array_equal(v, r) for v in given)
    return bool(found) and all(trivial(r) for r in found)


def _unjudged(ref: dict, results) -> list:
    """The reference's tensors the student's call never delivered (it raised first)."""
    return [t for t, r in ref.items() if r is not None and (results is None or t not in results)]


def run(assignment_id: str, student, *, seed: int = 0, examples: int = 3, reference=None, places=None) -> Result:
    """The Result of one assignment: its rows, the rubric's marks, the score and the status.

    The sandbox's own failures (a timeout, a dead process: sandbox.ChildGone) propagate to
    the grader; an exception of the student's code costs the case it happened in. ``places``
    (homework/places.py): where the staged bodies are in the student's files, for the explanation.
    """
    assignment = get(assignment_id)
    if reference is None:
        from .reference import Computed          # the trusted side: never in a student's copy
        reference = Computed()
    tally = Tally()
    for index, graded in enumerate(assignment.cases):
        try:
            grade_case(tally, graded, index, student, reference, seed, examples, places)
        except ChildGone:
            raise
        except StudentError as e:             # raised outside the student's call (a Module's params)
            tally.errors.append(Failure(graded.name, e))
            tally.add(graded.name, RAISED, Row(graded.name, "-", NAN, NAN, False, error_text(e, places)))
    earned, marks = score(assignment_id, tally.outcomes, trivial=[c for c, t in tally.trivial.items() if t])
    return _result(assignment, tally, earned, marks, places)


def _result(assignment, tally, earned, marks, places=None) -> Result:
    """The Result: a right forward keeps its points when the backward raised or is not written yet."""
    errors = [f.error for f in tally.errors]
    modules = {g.name for g in assignment.cases if g.check.checker == "module"}
    _not_guessed(assignment, tally.rows)
    rows = _collapse_parameters(tally.rows, modules) + list(tally.numerical.values())
    if len(errors) == len(assignment.cases) and all(e.type == "NotImplementedError" for e in errors):
        return Result(assignment.id, assignment.points, earned, NOT_IMPLEMENTED, error_text(errors[0], places),
                      rows, marks, flags=tally.flags)
    status = OK if all(m.passed for m in marks) else EXCEPTION if errors else FAIL
    message = error_text(errors[0], places) + (f" (and {len(errors) - 1} more case(s) raised)" if len(errors) > 1
                                               else "") if errors else ""
    explanation = "" if status == OK else explain(assignment, tally.rows, tally.errors, places)
    return Result(assignment.id, assignment.points, earned, status, message, rows, marks,
                  explanation=explanation, flags=tally.flags)


def _not_guessed(assignment, rows: dict) -> None:
    """A pair's gradients are not diagnosed in a case whose forward (a target) is wrong: the
    backward ran on the student's own cache, so a guess at it would blame the wrong line."""
    pairs = {g.name for g in assignment.cases if g.check.checker == "pair"
             and any(str(t) == g.check.forward for t in assignment.targets)}
    wrong = {case for (case, tensor), row in rows.items() if tensor == "out" and not row.ok and case in pairs}
    for (case, tensor), row in rows.items():
        if case in wrong and tensor not in ("out", RAISED, DTYPE, UNCHANGED) and not row.ok:
            row.diagnosis = ""


def _collapse_parameters(rows: dict, module_cases: set) -> list:
    """A Module's right parameter gradients as one row per case; each wrong one stays a row."""
    out, groups = [], {}
    for (case, tensor), row in rows.items():
        if tensor == UNCHANGED and row.ok:
            continue                          # the rubric's line says it; a row only when broken
        if case in module_cases and tensor not in NOT_PARAMETERS and row.ok:
            if case not in groups:
                groups[case] = []
                out.append((case, groups[case]))
            groups[case].append(row)
        else:
            out.append(row)
    return [_params_row(*item) if isinstance(item, tuple) else item for item in out]


def _params_row(case, rows) -> Row:
    worst = max(rows, key=lambda r: -1.0 if math.isnan(r.rel_error) else r.rel_error)
    return Row(f"{case} · {PARAMS}", f"{len(rows)} arrays", max(r.max_abs_error for r in rows),
               worst.rel_error, True)
