"""The rubric: an assignment's points split over named checks, all or nothing each.

    main case      one check for the forward ("out"; not for a Module, whose forward is
                   given), one for each gradient (a Module's parameters: one check)
    further cases  one check each (an assignment's cases after its first): every tensor of
                   the case right
    integrity      half a check: no input and no upstream gradient modified, in any case;
                   earned only beside at least one passed value check (a stub that
                   returns zeros keeps its inputs but has computed nothing)
    trivial cases  a case whose every expected result is trivially reachable (all zeros,
                   a copy of an input or of the upstream gradient: every target ignored,
                   dropout in eval) earns its check only beside a passed check of a
                   case of the same function that is not trivial: returning zeros or the
                   input is no work

A check passes when every outcome it covers is True (over every drawn example); a
wrong tensor earns nothing for its check, and nothing else is lost for it. The
numerical gradient check is shown, not scored: the comparison with the reference
already decides each gradient (it counts where there is no reference, in a
student's own check).

Integration (the grader's parent): collect ``outcomes[(case name, tensor)] = ok``
for every compared tensor of every case (the tensor names of assignment.GradedCase,
"d<param>" for a Module's parameters), and ``outcomes[(case name, "unchanged")]``
for the before/after comparison of its inputs and upstream gradient, and
``outcomes[(case name, "dtype")]`` for a float32 case's dtypes; then
``score(assignment_id, outcomes, trivial=names)`` gives the points and the marks
(result.Mark), which homework/report.py prints; ``names``: the cases whose expected
results were trivially reachable on every example (homework/evaluate.py finds them).
"""
from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatchcase

from .registry import get
from .result import Mark

UNCHANGED = "unchanged"        # the outcome name of the before/after comparison
INTEGRITY_WEIGHT = 0.5         # half a check: a promise about the code, not a value


@dataclass(frozen=True)
class Item:
    name: str                  # as the report shows it
    points: float
    covers: tuple              # (case name or "*", tensor pattern) pairs


def items(assignment_id: str) -> list:
    """The named checks of one assignment, with their points (they add up to its points)."""
    assignment = get(assignment_id)
    cases = assignment.cases
    main = assignment.main
    named = []                                               # (name, weight, covers)
    for tensor in _main_tensors(main):
        label = "forward" if tensor == "out" and main.check.checker == "pair" else tensor
        named.append((f"{main.name} · {label}", 1.0, ((main.name, tensor),)))
    for case in cases[1:]:
        named.append((case.name, 1.0, ((case.name, "*"),)))
    if main.check.backward is not None or main.check.checker == "module":
        named.append(("inputs and upstream gradient left unchanged", INTEGRITY_WEIGHT, (("*", UNCHANGED),)))
    return _split(assignment.points, named)


def _main_tensors(case) -> list:
    """The main case's tensors, a Module's parameter gradients as one check (its forward is
    given, not assigned: no check of its own)."""
    skip = ("dmemory", "dbias") + (("out",) if case.check.checker == "module" else ())
    tensors = [t for t in case.tensors if "*" not in t and t not in skip]
    if any("*" in t for t in case.tensors):
        tensors.append("d(parameters)")
    return tensors


def _split(points: int, named: list) -> list:
    """Points in proportion to the weights, in hundredths, the rounding left on the first check."""
    total = sum(w for _, w, _ in named)
    cents = [round(100 * points * w / total) for _, w, _ in named]
    cents[0] += 100 * points - sum(cents)
    return [Item(name, c / 100, _covers(covers)) for (name, _, covers), c in zip(named, cents)]


def _covers(covers):
    return tuple((case, "d*" if tensor == "d(parameters)" else tensor) for case, tensor in covers)


def passed(item: Item, outcomes: dict) -> bool:
    """Every outcome the item covers is True, and there is at least one ("out" of a parameter
    check: d* never covers dx or dmemory, which have checks of their own)."""
    seen = []
    for (case, tensor), ok in outcomes.items():
        for c, pattern in item.covers:
            if (c == "*" or c == case) and _fits(tensor, pattern):
                seen.append(bool(ok))
    return bool(seen) and all(seen)


def _fits(tensor, pattern) -> bool:
    if (pattern == UNCHANGED) != (tensor == UNCHANGED):
        return False                      # the integrity check alone covers the before/after comparison
    if pattern == "d*" and tensor in ("dx", "dmemory"):
        return False
    return pattern == "*" or fnmatchcase(tensor, pattern)


def score(assignment_id: str, outcomes: dict, trivial=()) -> tuple[float, list]:
    """(points earned, a Mark per check) of one assignment; ``trivial``: the names of the cases whose
    right answer is trivially reachable (zeros, a copy of an input): their checks count only beside a
    passed check of a case of the same function that is not trivial."""
    checks = [(item, passed(item, outcomes)) for item in items(assignment_id)]
    checks = _gate_trivial(get(assignment_id), checks, set(trivial))
    any_value = any(ok for item, ok, _ in checks if not _is_integrity(item))
    marks = [Mark(item.name, item.points, ok and (any_value or not _is_integrity(item)), note)
             for item, ok, note in checks]
    return round(sum(m.earned for m in marks), 2), marks


TRIVIAL_NOTE = ("right, but a zero or a copy of the input is right here: this check counts beside a "
                "passed check of {function} on a case whose answer is not trivial")


def _gate_trivial(assignment, checks: list, trivial: set) -> list:
    """(item, passed, note): a passed check of trivial cases only stands when a check of the same
    function (the same call) on a case that is not trivial passed too."""
    call_of = {c.name: c.check for c in assignment.cases}

    def calls(item):
        return {call_of[c] for c, _ in item.covers if c in call_of}

    def is_trivial(item):
        named = [c for c, _ in item.covers if c in call_of]
        return bool(named) and all(c in trivial for c in named)
    earned = set()
    for item, ok in checks:
        if ok and not is_trivial(item) and not _is_integrity(item):
            earned |= calls(item)
    found = []
    for item, ok in checks:
        if ok and is_trivial(item) and not calls(item) & earned:
            function = " or ".join(sorted(c.forward.split(":")[1] for c in calls(item)))
            found.append((item, False, TRIVIAL_NOTE.format(function=function)))
        else:
            found.append((item, ok, ""))
    return found


def _is_integrity(item: Item) -> bool:
    return any(tensor == UNCHANGED for _, tensor in item.covers)


def render(assignment_id: str) -> str:
    """The rubric as the handout states it."""
    a = get(assignment_id)
    lines = [f"Rubric of `{a.id}` ({a.points} points). Each check is all or nothing: a wrong tensor",
             "earns nothing for its check and costs nothing elsewhere.", ""]
    lines += [f"- {item.points:g} points: {item.name}" for item in items(assignment_id)]
    lines += ["", "The numerical gradient check is shown in the report but not scored: the comparison "
              "with the reference decides each gradient."]
    if any(_is_integrity(item) for item in items(assignment_id)):
        lines += ["", "Inputs left unchanged count only beside at least one right value: code that "
                  "computes nothing changes nothing."]
    lines += ["", "A case whose right answer is zeros or a copy of the input (every target ignored, eval "
              "mode) counts only beside a right case of the same function whose answer is not: returning "
              "zeros or the input is no work. A right forward keeps its points when the backward raises or "
              "is not written yet; a call that raises loses only what it did not deliver."]
    return "\n".join(lines)
