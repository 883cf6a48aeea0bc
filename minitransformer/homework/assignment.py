"""What an assignment is. Each file of homework/assignments/ declares one ``Assignment``.

    Target        a function the student writes: "functional.norm:layernorm_backward"
    Check         how the engine calls a graded case: a functional pair, a forward-only
                  function, or a Module's forward and backward
    GradedCase    one named graded case: its call, its input drawer, the tensors compared
    Mistake       one entry of the catalogue: its message, and how it is recognised (a
                  variant: the wrong line computed on the case's inputs; or a predicate
                  of homework/mistakes_match.py on the student's array)
    Assignment    id, title, lecture, points, targets, needs, equivalents, graded cases
                  (the first is the main case), mistakes, the handout's own text

The drawers and the variants are code in the assignment's file, which is trusted: it
never ships in a student's copy (homework/export.py leaves out homework/assignments/
whole). A copy holds the rest as records instead (``record`` / ``from_record``: names,
tensors, messages, the predicates' names; no code), written into its mark
(homework/expected.py) and read by homework/registry.py. docs/grading.md, "Writing an
assignment", is the worked example.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

import numpy as np

from .graded import Case


@dataclass(frozen=True)
class Target:
    module: str      # dotted path inside the package, e.g. "functional.norm"
    qualname: str    # "layernorm_forward" or "MultiHeadAttention.backward"

    def __str__(self) -> str:
        return f"{self.module}:{self.qualname}"

    @classmethod
    def of(cls, spec) -> "Target":
        """A Target from "module:qualname" (or a Target itself)."""
        if isinstance(spec, Target):
            return spec
        module, qualname = spec.split(":")
        return cls(module, qualname)


@dataclass(frozen=True)
class Check:
    checker: str                 # "pair" | "function" | "module": how homework/evaluate.py calls it
    forward: str                 # "module:function" (pair, function) or "module:Class" (module)
    backward: str | None = None  # "module:function" for a pair


@dataclass(frozen=True)
class GradedCase:
    name: str                       # as the report and the rubric show it
    check: Check                    # which functions run
    draw: Callable | None           # rng -> Case (trusted); None in a student's copy
    tensors: tuple                  # what is compared: "out", "d<input>", "d<param>" patterns, "dmemory"
    dtype: str = "float64"          # "float32": no numerical check; every result must stay float32
    numerical: bool = True          # run the numerical gradient check (float64 pairs and Modules)
    assignment: str = ""            # set by its Assignment
    expect: Callable | None = None  # Case -> {"out": ...}: the expected results where the grader knows
                                    # them otherwise than by running the target's reference (trusted)
    judge: str | None = None        # a property that decides instead of the reference's values, where a
                                    # right answer is not unique (homework/properties.py JUDGES: shipped)


@dataclass(frozen=True)
class Mistake:
    function: str                # the function or Module it belongs to: "softmax", "MultiHeadAttention"
    name: str                    # a short id, unique: "softmax-no-y-in-sum"
    tensors: tuple               # the tensors it shows in ("dx", "dW_qkv", "d*" ...)
    message: str                 # what the student should look at
    variant: Callable | None = None   # inputs -> {tensor: what the mistake computes} (or a list of such
                                      # dicts, a family: one mistake written several ways); {} if it
                                      # does not apply to these inputs
    match: Callable | None = None     # (inputs, tensor, student, reference) -> bool, for non-value mistakes
    assignment: str = ""              # set by its Assignment


@dataclass(frozen=True)
class Assignment:
    id: str
    title: str
    lecture: str                 # the lecture file it belongs to
    points: int
    targets: tuple               # Targets (or "module:qualname" strings): the bodies the student writes
    cases: tuple                 # GradedCases, the main case first (homework/rubric.py)
    mistakes: tuple = ()         # Mistakes, in the order they are tried
    needs: tuple = ()            # the assignments its functions call: answered with the reference's
    equivalents: tuple = ()      # code outside the targets that computes the same: stubbed in a copy too
    handout: str = ""            # the page's own paragraph (homework/handout.py)
    also_checked: str = ""       # appended to the page's "Also checked in every case" sentence

    def __post_init__(self):
        set_ = lambda name, value: object.__setattr__(self, name, value)   # noqa: E731  (frozen)
        set_("targets", tuple(Target.of(t) for t in self.targets))
        set_("equivalents", tuple(Target.of(t) for t in self.equivalents))
        set_("needs", tuple(self.needs))
        set_("cases", tuple(replace(c, assignment=self.id) for c in self.cases))
        set_("mistakes", tuple(replace(m, assignment=self.id) for m in self.mistakes))
        _unique(self.id, "graded case", [c.name for c in self.cases])
        _unique(self.id, "mistake", [m.name for m in self.mistakes])
        if not self.cases:
            raise ValueError(f"assignment {self.id}: expected at least one graded case")

    @property
    def main(self) -> GradedCase:
        """The main case: the rubric gives its forward and each of its gradients a check of their own."""
        return self.cases[0]

    # ------------------------------------------------------------- the public part, as a record
    def record(self) -> dict:
        """Everything but code: what a student's copy holds of this assignment."""
        from .mistakes_match import name_of
        return {"id": self.id, "title": self.title, "lecture": self.lecture, "points": self.points,
                "targets": [str(t) for t in self.targets], "needs": list(self.needs),
                "equivalents": [str(t) for t in self.equivalents], "handout": self.handout,
                "also_checked": self.also_checked,
                "cases": [{"name": c.name, "check": [c.check.checker, c.check.forward, c.check.backward],
                           "tensors": list(c.tensors), "dtype": c.dtype, "numerical": c.numerical,
                           "judge": c.judge}
                          for c in self.cases],
                "mistakes": [{"function": m.function, "name": m.name, "tensors": list(m.tensors),
                              "message": m.message, "variant": m.variant is not None, "match": name_of(m.match)}
                             for m in self.mistakes]}

    @classmethod
    def from_record(cls, r: dict) -> "Assignment":
        """The assignment as a student's copy holds it: no drawer, each variant's numbers stored
        (``stored_variant``: homework/expected.py hands them over), each predicate by its name."""
        from .mistakes_match import MATCHES
        cases = tuple(GradedCase(c["name"], Check(*c["check"]), None, tuple(c["tensors"]), c["dtype"],
                                 c["numerical"], judge=c.get("judge")) for c in r["cases"])
        mistakes = tuple(Mistake(m["function"], m["name"], tuple(m["tensors"]), m["message"],
                                 variant=stored_variant if m["variant"] else None, match=MATCHES.get(m["match"]))
                         for m in r["mistakes"])
        return cls(r["id"], r["title"], r["lecture"], r["points"], tuple(r["targets"]), cases, mistakes,
                   tuple(r["needs"]), tuple(r["equivalents"]), r["handout"], r["also_checked"])


def stored_variant(inputs) -> dict:
    """A variant in a student's copy: its numbers are stored for the public example, not computed;
    on other inputs it explains nothing."""
    return {}


def _unique(assignment: str, what: str, names: list) -> None:
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValueError(f"assignment {assignment}: {what} names must be unique, got {', '.join(twice)} twice")


# ------------------------------------------------------------------ writing an assignment's cases
def pair(module: str, stem: str) -> Check:
    """A functional pair: ``pair("functional.norm", "layernorm")`` calls layernorm_forward, then
    layernorm_backward on its cache."""
    return Check("pair", f"{module}:{stem}_forward", f"{module}:{stem}_backward")


def function(spec: str) -> Check:
    """A forward-only function ("functional.masks:causal_mask"): its result is "out"."""
    return Check("function", spec)


def module(spec: str) -> Check:
    """A Module ("layers.attention:MultiHeadAttention"): built from the case's ``ctor``, forward,
    then the backward that is the target."""
    return Check("module", spec)


def cases(check: Check, tensors: tuple, *named, float32: str | None = None, expect: Callable | None = None,
          judge: str | None = None) -> tuple:
    """GradedCases of one call: ``named`` = (name, draw) pairs; ``float32`` = a label: one more case,
    the first one's draw in float32 ("<label>: float32 in, float32 out"), no numerical check;
    ``expect``: the expected results of a drawn case, where not the reference's (GradedCase.expect);
    ``judge``: the name of a property of homework/properties.py that decides instead (GradedCase.judge)."""
    if judge is not None:
        from .properties import JUDGES
        if judge not in JUDGES:
            raise ValueError(f"judge: expected one of {', '.join(JUDGES)}, got {judge!r}")
    found = [GradedCase(name, check, draw, tuple(tensors), expect=expect, judge=judge) for name, draw in named]
    if float32 is not None:
        found.append(GradedCase(f"{float32}: float32 in, float32 out", check, in_float32(named[0][1]),
                                tuple(tensors), dtype="float32", numerical=False, expect=expect))
    return tuple(found)


def in_float32(draw: Callable) -> Callable:
    """The same draw with every floating-point array in float32 (a Module's weights through its
    constructor's dtype)."""
    def drawn(rng):
        case = draw(rng)
        inputs = {k: v.astype(np.float32) if v.dtype.kind == "f" else v for k, v in case.inputs.items()}
        kwargs = dict(case.kwargs)
        if "ctor" in kwargs:
            args, ctor = kwargs["ctor"]
            kwargs["ctor"] = (args, dict(ctor, dtype=np.float32))
        if kwargs.get("dtype") is np.float64:
            kwargs["dtype"] = np.float32
        return replace(case, inputs=inputs, kwargs=kwargs, masked=dict(case.masked))
    return drawn


__all__ = ["Assignment", "Case", "Check", "GradedCase", "Mistake", "Target", "cases", "function", "in_float32",
           "module", "pair", "stored_variant"]
