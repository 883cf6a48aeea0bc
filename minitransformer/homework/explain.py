"""One explanation per assignment, root cause first: what the student reads before the table.

The table has a row per case and tensor, each with its own diagnosis; a single bug
shows in several of them (a wrong forward breaks the gradients computed from its
cache; a line that raises takes every gradient after it). ``explain`` reconciles them:

    a raise        the student's line (their path and line number, never the staging
                   folder), the exception, a NumPy shape error told in the docstring's
                   symbols with the likely fix (``shapes``), and the gradients the
                   function never computed, as one failure
    the forward    wrong output: that diagnosis, and "fix it first": the backward ran on
                   the student's own cache, so its gradients are not guessed at
    the backward   the wrong tensors grouped by their diagnosis: one message for one cause
                   (every case and tensor it explains named), a second cause after it
    a promise      dtype kept, inputs unchanged: their message

Parent side (and a student's copy, for its local check): it reads rows, the exception the
child described and the student's own lines (homework/places.py); it computes nothing of
the reference.
"""
from __future__ import annotations

import ast
import inspect
import re

import numpy as np

from .graded import REFERENCE, resolve

MATMUL = re.compile(r"matmul: Input operand (\d) has a mismatch in its core dimension (\d).*\(size (\d+) is "
                    r"different from (\d+)\)")
BROADCAST = re.compile(r"operands could not be broadcast together with (?:remapped )?shapes ((?:\([\d,]*\) ?)+)")
NOT_ALIGNED = re.compile(r"shapes (\([\d, ]*\)) and (\([\d, ]*\)) not aligned")
DOC_SHAPE = re.compile(r"\b([A-Za-z_][\w]*)\s*\(((?:\.\.\.|[A-Za-z_][\w'·]*|\d+)(?:\s*,\s*(?:\.\.\.|[A-Za-z_][\w'·]*|\d+))*,?)\)")


# ------------------------------------------------------------------ the explanation
def explain(assignment, rows: dict, failures: list, places=None) -> str:
    """The one explanation of an assignment's result ("" when everything passed).

    ``rows``: (case name, tensor) -> diagnose.Row (the worst example of each);
    ``failures``: evaluate.Failure of each case that raised, in order."""
    crashed = [f for f in failures if f.error.type != "NotImplementedError"]
    if failures and not crashed and len(failures) == len(assignment.cases):
        return ""                                 # not implemented: the status says it
    wrong = [(case, tensor, row) for (case, tensor), row in rows.items()
             if not row.ok and not tensor.startswith("numerical")]
    values = [w for w in wrong if w[1] not in ("unchanged", "dtype", "raised")]
    order = {c.name: i for i, c in enumerate(assignment.cases)}
    if crashed and (not values or order.get(crashed[0].case, 0) <= min(order.get(w[0], 0) for w in values)):
        return crash(assignment, crashed[0], places, more=len(crashed) - 1)   # the earliest case's cause first
    if not wrong:
        return ""
    if not values:
        return next((row.diagnosis for _, t, row in wrong if t != "raised" and row.diagnosis), "")
    forward = [w for w in values if w[1] == "out" and _forward_is_target(assignment, w[0])]
    text = _forward_first(assignment, forward, values, places) if forward else _grouped(assignment, values, places)
    if crashed:
        text += f" Then: {crash(assignment, crashed[0], places, more=len(crashed) - 1)}"
    return text


def _case(assignment, case_name):
    """The assignment's graded case of that name, or None."""
    return next((c for c in assignment.cases if c.name == case_name), None)


def _forward_is_target(assignment, case_name) -> bool:
    case = _case(assignment, case_name)
    return case is not None and case.check.checker == "pair" and \
        any(str(t) == case.check.forward for t in assignment.targets)


def _function_of(assignment, case_name, tensor) -> str:
    case = _case(assignment, case_name)
    if case is None:
        return ""
    if case.check.checker == "module":
        return f"{case.check.forward}.backward"
    return case.check.forward if tensor == "out" or case.check.backward is None else case.check.backward


def _at(assignment, case_name, tensor, places) -> str:
    """" (in f, path:line)" of the target computing ``tensor``: a pair's gradient names the backward and
    the forward whose cache it reads; a Module's, every method the assignment asks for."""
    spec = _function_of(assignment, case_name, tensor)
    if not spec:
        return ""
    case = _case(assignment, case_name)
    if case.check.checker == "module":
        specs = [str(t) for t in assignment.targets if "." in t.qualname] or [spec]
    elif spec == case.check.backward and _forward_is_target(assignment, case_name):
        specs = [spec, case.check.forward]
    else:
        specs = [spec]
    said = []
    for s in specs:
        spot = places.of(s) if places is not None else None
        said.append(f"{s.split(':')[1]}, {spot.path}:{spot.line}" if spot else s.split(":")[1])
    if case.check.checker == "pair" and len(specs) == 2:
        return f" (in {said[0]}; or in what {said[1]} caches)"
    return f" (in {' or '.join(said)})"


def _no_backward(assignment, case_name) -> bool:
    case = _case(assignment, case_name)
    return case is None or case.check.checker == "function"


def _tensors(items) -> str:
    """The tensors of ``items``, the first four named and the rest counted."""
    names = list(dict.fromkeys(t for _, t, _ in items))
    return ", ".join(names) if len(names) <= 4 else f"{', '.join(names[:3])} and {len(names) - 3} more gradients"


def _cases(items) -> str:
    names = list(dict.fromkeys(case for case, _, _ in items))
    return names[0] if len(names) == 1 else f"{len(names)} cases"


def _forward_first(assignment, forward, values, places) -> str:
    case, tensor, row = forward[0]
    said = row.diagnosis or "no known mistake fits; compare your forward with the docstring's equation"
    text = f"the forward is wrong{_at(assignment, case, 'out', places)}: out differs in {_cases(forward)}: {said}."
    backward = [w for w in values if w[1] != "out"]
    if backward:
        text += (" Fix it first: the backward ran on your forward's cache, so its gradients "
                 f"({_tensors(backward)}) are not judged apart from it.")
    return text


def _grouped(assignment, values, places) -> str:
    """Wrong tensors grouped by their diagnosis (a tensor's own: the first case's that has one, its
    cases in order): one message per cause, the largest group first."""
    by_tensor: dict = {}
    for case, tensor, row in values:
        by_tensor.setdefault(tensor, []).append((case, tensor, row))
    groups: dict = {}
    for tensor, items in by_tensor.items():
        said = next((row.diagnosis for _, _, row in items if row.diagnosis), "")
        groups.setdefault(said, []).extend(items)
    explained = sorted((g for d, g in groups.items() if d), key=len, reverse=True)
    unexplained = groups.get("", [])
    parts = []
    for g in explained[:2]:
        case, tensor, _ = g[0]
        said = next(row.diagnosis for _, _, row in g if row.diagnosis)
        parts.append(f"{_tensors(g)}{_at(assignment, case, tensor, places)}, wrong in {_cases(g)}: {said}")
    if len(explained) > 2:
        parts.append(f"and {len(explained) - 2} more (the table below)")
    if unexplained and not explained:
        case, tensor, row = unexplained[0]
        parts.append(f"{_tensors(unexplained)}{_at(assignment, case, tensor, places)}, wrong in {_cases(unexplained)} "
                     f"(relative error {row.rel_error:.2g}): no known mistake fits; compare each line with the "
                     "docstring's equations" + ("" if _no_backward(assignment, case) else
                                                " (the numerical check below says whether your backward "
                                                "matches your own forward)"))
    elif unexplained:
        parts.append(f"also wrong, unexplained: {_tensors(unexplained)}")
    return _sentences(parts)


def _sentences(parts) -> str:
    return " ".join(p if p.endswith((".", "?", "!")) else p + "." for p in parts)


# ------------------------------------------------------------------ a raise
def crash(assignment, failure, places=None, more: int = 0) -> str:
    """The student's line that raised, the exception told in the docstring's symbols, and what the
    call never delivered."""
    e = failure.error
    spot, shapes = _own_frame(e, places)
    callee = e.where.rsplit(" in ", 1)[-1] if " in " in e.where else ""
    if spot is not None:
        head = f"{spot}: `{spot.text}` raised {e.type}" if spot.text else f"{spot} raised {e.type}"
        if callee and callee not in (spot.function, "ask") and places.where(e.where) is None:   # ask: an answer
            head += f" (in the package's {callee}, which your line calls)"
    else:
        head = f"{callee or 'your code'} raised {e.type}"
    from .places import scrub
    parts = [f"{head}: {scrub(str(e), places).strip()}"]
    told = shape_error(str(e), spot.text if spot else "", shapes, _symbols(assignment, failure, shapes))
    if told:
        parts.append(told)
    grads = [t for t in failure.undelivered if t != "out"]
    if grads and failure.delivered:
        parts.append(f"So {', '.join(grads)} {'was' if len(grads) == 1 else 'were'} never computed: one failure, "
                     f"at this line (the case '{failure.case}')")
    if more:
        parts.append(f"The same or another raise in {more} more case(s)")
    return _sentences(parts)


def _own_frame(e, places) -> tuple:
    """(the student's spot, that frame's shapes): the deepest frame in a staged body of theirs, else
    the deepest frame outside NumPy (no spot)."""
    if places is not None:
        for where, shapes in reversed(getattr(e, "frames", []) or [(e.where, e.shapes)]):
            spot = places.where(where)
            if spot is not None:
                return spot, shapes
        spot = places.where(e.where)
        if spot is not None:
            return spot, e.shapes
    return None, e.shapes


def _symbols(assignment, failure, shapes=None) -> dict:
    """size -> the docstring's symbol for it, from the docstrings of the case's functions and the
    drawn shapes (inputs, upstream gradient, expected results)."""
    docs = ""
    case = _case(assignment, failure.case)
    if case is not None:
        for spec in (case.check.forward, case.check.backward):
            if spec:
                try:
                    docs += "\n" + (inspect.getdoc(resolve(REFERENCE, spec)) or "")
                except (ImportError, AttributeError, ValueError):
                    pass
    named = {}
    for name, dims in DOC_SHAPE.findall(docs):
        named.setdefault(name, [d.strip() for d in dims.split(",") if d.strip()])
    bound: dict = {}
    for name, shape in {**failure.drawn, **(failure.error.shapes if shapes is None else shapes)}.items():
        dims = named.get(name) or named.get(name.split(".")[-1])
        if dims is None:
            continue
        fixed = [d for d in dims if d != "..."]
        if len(fixed) > len(shape):
            continue
        for sym, size in zip(reversed(fixed), reversed(shape)):
            if not sym.isdigit():
                bound.setdefault(int(size), set()).add(sym)
        if "..." in dims and len(shape) > len(fixed):
            bound.setdefault(int(np.prod(shape[:len(shape) - len(fixed)])), set()).add("N")
    return {size: next(iter(syms)) for size, syms in bound.items() if len(syms) == 1}   # one symbol a size


def shape_error(message: str, line: str, shapes: dict, symbols: dict) -> str:
    """A NumPy shape error in the math: the operands of the student's line with their shapes in the
    docstring's symbols, and the likely fix; "" when it is not one or the line cannot be read."""
    known = dict(shapes)
    tree = _parse(line)
    if MATMUL.search(message) or NOT_ALIGNED.search(message):
        for node in _nodes(tree, ast.MatMult):
            a, b = _shape(node.left, known), _shape(node.right, known)
            if a and b and len(b) >= 2 and a[-1] != b[-2]:
                return _matmul(node, a, b, symbols)
        return ""
    m = BROADCAST.search(message)
    if m:
        given = [tuple(int(n) for n in s.strip("()").split(",") if n) for s in re.findall(r"\([\d,]*\)", m.group(1))]
        for node in _nodes(tree, (ast.Add, ast.Sub, ast.Mult, ast.Div)):
            a, b = _shape(node.left, known), _shape(node.right, known)
            if a is not None and b is not None and {a, b} <= set(given):
                return _broadcast(_text(node.left), a, _text(node.right), b, symbols)
        if len(given) == 2:
            return _broadcast("one operand", given[0], "the other", given[1], symbols)
    return ""


def _matmul(node, a, b, symbols) -> str:
    left, right = _text(node.left), _text(node.right)
    said = (f"`{left} @ {right}` is {_sym(a, symbols)} @ {_sym(b, symbols)}: the inner sizes differ "
            f"({_one(a[-1], symbols)} against {_one(b[-2], symbols)})")
    if b[-1] == a[-1]:
        fix = f"{_untransposed(node.right) or _transposed(right, len(b))}"
        return f"{said}; did you mean `{left} @ {fix}` (the transpose)?"
    if len(a) >= 2 and a[-2] == b[-2]:
        fix = f"{_untransposed(node.left) or _transposed(left, len(a))}"
        return f"{said}; did you mean `{fix} @ {right}` (the transpose)?"
    if len(a) >= 2 and b[-1] == a[-2]:
        return f"{said}; did you mean `{right} @ {left}` (the other order)?"
    return said


def _broadcast(left, a, right, b, symbols) -> str:
    said = f"`{left}` is {_sym(a, symbols)} and `{right}` is {_sym(b, symbols)}: they do not broadcast"
    for x, y in ((a, b), (b, a)):
        if len(y) == len(x) - 1 and tuple(x[:-1]) == tuple(y):
            return (f"{said}; a reduction over the last axis dropped it: keep it with keepdims=True "
                    f"(shape {_sym(tuple(y) + (1,), symbols)})")
    return said


def _sym(shape, symbols) -> str:
    return "(" + ", ".join(_one(n, symbols) for n in shape) + ("," if len(shape) == 1 else "") + ")"


def _one(n, symbols) -> str:
    return symbols.get(int(n), str(int(n))) if int(n) != 1 else "1"


def _parse(line: str):
    text = (line or "").strip().rstrip("\\")
    for candidate in (text, text.removeprefix("return "), f"({text})"):
        try:
            return ast.parse(candidate)
        except SyntaxError:
            continue
    return None


def _nodes(tree, ops):
    if tree is None:
        return []
    return [n for n in ast.walk(tree) if isinstance(n, ast.BinOp) and isinstance(n.op, ops)]


def _text(node) -> str:
    return ast.unparse(node)


def _shape(node, shapes):
    """The shape of an operand from the frame's arrays: a name, a cache's field, .T, swapaxes(-1, -2)."""
    if isinstance(node, ast.Name):
        return shapes.get(node.id)
    if isinstance(node, ast.Attribute):
        if node.attr == "T":
            inner = _shape(node.value, shapes)
            return None if inner is None else tuple(reversed(inner))
        if isinstance(node.value, ast.Name):
            return shapes.get(f"{node.value.id}.{node.attr}")
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
            node.func.attr in ("swapaxes", "transpose") and len(node.args) in (0, 2):
        inner = _shape(node.func.value, shapes)
        if inner is None or len(inner) < 2:
            return None
        if node.func.attr == "transpose" and not node.args:
            return tuple(reversed(inner))
        return tuple(inner[:-2]) + (inner[-1], inner[-2])
    return None


def _untransposed(node) -> str:
    """The operand without its transpose, when it has one."""
    if isinstance(node, ast.Attribute) and node.attr == "T":
        return _text(node.value)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("swapaxes", "transpose"):
        return _text(node.func.value)
    return ""


def _transposed(text: str, ndim: int) -> str:
    simple = re.fullmatch(r"[\w.]+", text) is not None
    base = text if simple else f"({text})"
    return f"{base}.T" if ndim == 2 else f"{base}.swapaxes(-1, -2)"
