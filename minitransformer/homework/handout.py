"""The student's page for one assignment (the export writes it into HOMEWORK.md).

    page(assignment_id) -> markdown

What to implement, what it needs (the assignment's ``needs``: the grader swaps in the
reference for them, so a bug there costs nothing here; locally they must work), the
cache fields and their meaning (read from the reference's cache NamedTuples and their
comments), the tolerance (diagnose.TOLERANCE), what is graded and what is not, the
assignment's own text (``handout``, ``also_checked``), the rubric (homework/rubric.py), how
to check locally, what to hand in, and how to train the model with your own code. No
performance notes: the student reads the math.
"""
from __future__ import annotations

import importlib
import inspect
import re

from .diagnose import TOLERANCE
from .registry import get
from .rubric import render


DERIVED = ("A backward is derived by hand: it computes its gradient from the cache with the formula you derived. A "
           "backward that calls its own forward (central differences of it, or the forward rerun to recover "
           "what the cache should hold) is not the assignment: the grader runs your backward with its forward "
           "unavailable, so such a backward raises and earns none of its gradients' points, and the result is "
           "flagged for your instructor. A backward may call other functions (a helper, another function of "
           "the package), never its own forward.")


def _package():
    return __name__.split(".")[0]


def cache_fields(assignment_id: str) -> list:
    """[(CacheClass, field, comment)] of the NamedTuple caches defined in the assignment's modules."""
    rows, seen = [], set()
    for target in get(assignment_id).targets:
        module = importlib.import_module(f"{_package()}.{target.module}")
        stem = target.qualname.removesuffix("_forward").removesuffix("_backward").replace("_", "").lower()
        for name, cls in vars(module).items():
            if name in seen or not (inspect.isclass(cls) and name.endswith("Cache")
                                    and hasattr(cls, "_fields") and cls.__module__ == module.__name__):
                continue
            if "." not in target.qualname and name[:-len("Cache")].lower() != stem:
                continue                  # another pair's cache in the same file (RMSNorm beside LayerNorm)
            seen.add(name)
            comments = _field_comments(cls)
            rows += [(name, f, comments.get(f, "")) for f in cls._fields]
    return rows


def _field_comments(cls) -> dict:
    try:
        source = inspect.getsource(cls)
    except (OSError, TypeError):
        return {}
    found = {}
    for line in source.splitlines():
        m = re.match(r"\s+(\w+)\s*:\s*[^#=]+(?:=[^#]*)?#\s*(.*)", line)
        if m:
            found[m.group(1)] = m.group(2).strip()
    return found


def _files(assignment_id: str) -> list:
    return sorted({f"minitransformer/{t.module.replace('.', '/')}.py" for t in get(assignment_id).targets})


def page(assignment_id: str) -> str:
    a = get(assignment_id)
    cases = a.cases
    lines = [f"## `{a.id}`: {a.title} ({a.points} points)", "",
             f"Lecture: `{a.lecture}`.", "", "### What to implement", ""]
    lines += [f"- `{t.module}.{t.qualname}` in `minitransformer/{t.module.replace('.', '/')}.py`: its docstring "
              "states the equation, the shapes and the conventions; the graded cases below draw every one."
              for t in a.targets]
    needs = a.needs
    lines += ["", "### Prerequisites", "",
              ("Your code calls " + ", ".join(f"`{n}`" for n in needs) + ": the grader uses the reference for "
               "them (a bug there costs nothing here), but the local check and training run yours: do them "
               "first.")
              if needs else "None: this assignment stands alone."]
    fields = cache_fields(a.id)
    if fields:
        lines += ["", "### The cache", "", "The forward returns `(out, cache)`; the backward receives that cache. "
                  "Its fields (you may store what you like, but these are what the backward needs):", "",
                  "| cache | field | meaning |", "|---|---|---|"]
        lines += [f"| `{c}` | `{f}` | {m} |" for c, f, m in fields]
    lines += ["", "### Graded cases", ""]
    lines += [f"- {c.name}" + (" (float32: every result must stay float32)" if c.dtype == "float32" else "")
              for c in cases]
    lines += ["", "Also checked in every case: no input and no upstream gradient is modified (work on new "
              "arrays)." + a.also_checked,
              "", f"Tolerance: relative error {TOLERANCE['float64']:g} in float64 ({TOLERANCE['float32']:g} in float32), "
              "max |yours - reference| / max(|yours|, |reference|) per tensor. A correct float64 result is "
              "about 1e-12 off; a bug is off by 1e-2 or more."]
    if a.handout:
        lines += ["", a.handout]
    if any(c.check.backward is not None or c.check.checker == "module" for c in cases):
        lines += ["", DERIVED]
    lines += ["", "### Rubric", "", render(a.id)]
    lines += ["", "### Check it locally", "",
              "In this folder (the one holding HOMEWORK.md):", "",
              f"    python -m minitransformer homework check . {a.id}", "",
              f"(or `python starter_{a.id}.py`, also as a notebook) is your local check, not your grade: it checks "
              "your code as the grader does (the same cases, tolerance, diagnoses and rubric) on the public seed "
              "0's numbers stored in this copy, where your instructor's grader draws other inputs from a secret "
              "seed. It prints, per tensor, the error and a diagnosis that names the mistake when it recognises "
              "one, then the rubric. For a draft of your own in any file, the numerical gradient check:", "",
              "    python -m minitransformer gradcheck FILE.py:FORWARD:BACKWARD", "",
              "### What to hand in", "",
              "The file(s) you edited, " + ", ".join(f"`{f}`" for f in _files(a.id)) + ", with their paths "
              "inside the package as they are here: this whole folder, or those files in their folders (a zip "
              "keeps the paths; on Gradescope, upload the zip). A file handed in without its folder is known "
              "by its name alone, which works only while no two graded files share it: "
              "`functional/attention.py` and `layers/attention.py` are both `attention.py`, and such a hand-in "
              "is refused, not graded. Only the bodies of the functions above are graded; everything else is "
              "taken from the original.",
              "", "### Train with your own code", "",
              "    python -m minitransformer train --steps 300", "",
              "trains the small GPT with your functions: before step 1 it lists each function this copy "
              "stubbed and where the one that runs is (`yours, minitransformer/functional/norm.py:LINE`), and a "
              "function still a stub stops it in one line naming it. "
              "A falling loss proves nothing: a model still learns with a wrong gradient that points roughly "
              "downhill (with a LayerNorm dx missing a term, the loss fell almost as far as with the right one). "
              "Only the comparison with the reference and the numerical check say your gradient is right."]
    return "\n".join(lines)
