"""The student's page for one assignment (the export writes it into HOMEWORK.md).

    page(assignment_id, copy=None) -> markdown
    setup_line()                   the Python and the packages a copy needs, from this package's metadata

``copy`` (``Copy``) is the export the page belongs to: which assignments it set, which
functions it stubbed and with which assignment. A page then says what to implement (the
targets, and the functions stubbed with them because they compute the same: they cannot
ship working), its prerequisites in plain words (assigned in this copy, stubbed with
another assignment, or working as shipped), the cache fields and their meaning (read
from the reference's cache NamedTuples and their comments, continuation lines
included), what each graded case draws (read from the assignment's own drawers on the
public seed: the inputs' dtypes and shapes, the options; what varies between draws is
said to), the tolerance (diagnose.TOLERANCE), the assignment's own text (``handout``,
``also_checked``), the rubric (homework/rubric.py), how to check locally, how to hand in,
and how to train the model with your own code and what that proves. No performance notes:
the student reads the math.

The drawers are the trusted side's (homework/assignments/): the export writes the page,
and a student's copy, which holds no drawer, only reads it.
"""
from __future__ import annotations

import importlib
import inspect
import re
from dataclasses import dataclass, field

import numpy as np

from .diagnose import TOLERANCE
from .registry import get, needed
from .rubric import render

PYTHON, PACKAGES = ">=3.10", ("numpy>=1.24", "matplotlib>=3.7")      # when no metadata is installed
DRAWS = 4                            # public draws of a case looked at to tell fixed from varying


DERIVED = ("A backward is derived by hand: it computes its gradient from the cache with the formula you derived. A "
           "backward that calls its own forward (central differences of it, or the forward rerun to recover "
           "what the cache should hold) is not the assignment: the grader runs your backward with its forward "
           "unavailable, so such a backward raises and earns none of its gradients' points, and the result is "
           "flagged for your instructor. A backward may call other functions (a helper, another function of "
           "the package), never its own forward.")


def _package():
    return __name__.split(".")[0]


@dataclass
class Copy:
    """The export a page belongs to: the assignments it set and what it stubbed (Target -> the
    assignment stubbed with it, for the code computing an assignment all the same)."""
    assigned: tuple                                   # the ids the export set
    stubbed_with: dict = field(default_factory=dict)  # Target -> Assignment (export.stubbed_with)
    derivations: bool = True

    @classmethod
    def of(cls, assignments, derivations: bool = True) -> "Copy":
        from .export import stubbed_with
        return cls(tuple(a.id for a in assignments), stubbed_with(assignments), derivations)

    def stubbed_targets(self, assignment) -> dict:
        """The functions of ``assignment`` (not assigned itself) this copy stubs: Target -> the
        assignment they are stubbed with."""
        return {t: a for t, a in self.stubbed_with.items() if t in assignment.targets}


# ------------------------------------------------------------------ setup
def setup_line(short: bool = False) -> str:
    """Which Python, what to install: from this package's metadata (pyproject's requires-python and
    dependencies), the copy itself is never installed."""
    python, packages = PYTHON, PACKAGES
    try:
        from importlib.metadata import PackageNotFoundError, metadata
        meta = metadata(_package())
        python = meta.get("Requires-Python") or python
        packages = tuple(r.split(";")[0].replace(" ", "") for r in meta.get_all("Requires-Dist") or ()
                         if "extra ==" not in r) or packages
    except (ImportError, PackageNotFoundError):
        pass
    version = python.removeprefix(">=")
    install = " ".join(f'"{p}"' for p in packages)
    if short:
        return (f"Python {version} or newer, `python -m pip install {install}`; run every command in this folder "
                "(HOMEWORK.md's Setup).")
    return (f"Python {version} or newer with {' and '.join(p.split('>')[0].split('=')[0] for p in packages)}: "
            f"`python -m pip install {install}` (inside a virtual environment, `python -m venv .venv`, "
            "if your system's Python refuses). Nothing else to install: every command below runs in this "
            "folder (the one holding HOMEWORK.md), where `python -m minitransformer` imports this copy's "
            "package, your code, even where another minitransformer is installed; do not install this copy.")


# ------------------------------------------------------------------ the cache
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
    """field -> its comment, the comment lines that continue it joined (a comment is never cut)."""
    try:
        source = inspect.getsource(cls)
    except (OSError, TypeError):
        return {}
    found, last = {}, None
    for line in source.splitlines():
        m = re.match(r"\s+(\w+)\s*:\s*[^#=]+(?:=[^#]*)?#\s*(.*)", line)
        more = re.match(r"\s+#\s*(.*)", line)
        if m:
            last = m.group(1)
            found[last] = m.group(2).strip()
        elif more and last is not None:
            found[last] += " " + more.group(1).strip()
        else:
            last = None
    return found


# ------------------------------------------------------------------ what a graded case draws
def _drawn(graded, index: int) -> list:
    """The case's public draws (seed 0 first): what the student's copy stores one of."""
    from .reference import draw                     # the trusted side: the export runs it, no copy holds it
    return [draw(graded, seed, index, 0) for seed in range(DRAWS)]


def _shown(value) -> str:
    if isinstance(value, float):
        return f"{value:.3g}"
    if isinstance(value, type):
        return getattr(value, "__name__", str(value))
    if isinstance(value, dict) and "new" in value:                  # a Module's part, by its class
        kwargs = ", ".join(f"{k}={_shown(v)}" for k, v in value.get("kwargs", {}).items())
        return f"{value['new'].split(':')[-1]}({kwargs})"
    return repr(value)


def _items(case) -> dict:
    """name -> (kind, description) of one drawn case: arrays by dtype and shape, options by value."""
    from .graded import KnownFunction
    found = {}
    for name, v in list(case.inputs.items()) + list(case.kwargs.items()):
        if isinstance(v, np.ndarray):
            found[name] = ("array", f"{v.dtype.name} {tuple(v.shape)}")
        elif isinstance(v, KnownFunction):
            found[name] = ("fixed", "a function the grader lends for the call (its values only)")
        elif name == "ctor":
            args, kwargs = v
            shown = [_shown(a) for a in args] + [f"{k}={_shown(x)}" for k, x in kwargs.items()
                                                 if k not in ("rng", "dtype")]
            found[name] = ("option", f"({', '.join(shown)})")
        elif name == "spec":
            found[name] = ("option", ", ".join(f"{k}={_shown(x)}" for k, x in v.items()))
        else:
            found[name] = ("option", _shown(v))
    return found


def drawn_text(graded, index: int) -> str:
    """What the graded case draws, read off its drawer: each input's dtype and shape and each option,
    as the public seed 0 draws them, with what differs between draws said to."""
    draws = [_items(c) for c in _drawn(graded, index)]
    first, parts = draws[0], []
    module = graded.check.forward.split(":")[-1]
    for name, (kind, text) in first.items():
        same = all(d.get(name, (None, None))[1] == text for d in draws)
        label = {"ctor": f"the Module `{module}`", "spec": "its configuration"}.get(name, f"`{name}`")
        if kind == "option" and not same:
            text += " (drawn: " + ", ".join(dict.fromkeys(d[name][1] for d in draws if name in d)) + ", ...)"
        parts.append(f"the Module `{module}{text}`" if name == "ctor" else f"{label} `{text}`" if name == "spec"
                     else f"{label} {text}")
    gone = sorted({n for d in draws[1:] for n in d} - set(first))
    if gone:
        parts.append("in some draws also " + ", ".join(f"`{n}`" for n in gone))
    upstream = graded.check.checker == "module" or graded.check.backward is not None
    text = "; ".join(parts) or "no arguments"
    if upstream:
        text += "; a random upstream gradient (never all ones)"
    return text


# ------------------------------------------------------------------ the page
def _file(t) -> str:
    return f"minitransformer/{t.module.replace('.', '/')}.py"


def _files(a, copy: Copy) -> list:
    return sorted({_file(t) for t in _written(a, copy)})


def _implement(a, copy: Copy) -> list:
    lines = ["### What to implement", ""]
    lines += [f"- `{t.module}.{t.qualname}` in `{_file(t)}`: its docstring states the equation, the shapes and "
              "the conventions." for t in a.targets]
    with_it = [t for t, b in copy.stubbed_with.items() if b.id == a.id]
    if not with_it:
        return lines
    lines += ["", f"Also stubbed with `{a.id}`, because each computes {a.id}'s functions all the same (shipped "
              "working, it would hand out the answer); they are not graded here:", ""]
    called = _called(with_it)
    for owner, targets in called.items():
        users = [i for i in copy.assigned if owner in [n.id for n in needed(get(i))]]
        lines.append(f"- {', '.join(f'`{t.module}.{t.qualname}`' for t in targets)}: `{owner}`'s functions, which "
                     "the model calls (training)" + (f" and {_and(users)} build on" if users else "")
                     + ": write them too (the local check and training run yours).")
    rest = [t for t in with_it if not any(t in ts for ts in called.values())]
    if rest:
        lines.append(f"- {', '.join(f'`{t.module}.{t.qualname}`' for t in rest)}: nothing of this copy's "
                     "assignments or of training calls them; you need not write them.")
    return lines


def _called(targets) -> dict:
    """assignment id -> those of ``targets`` that are its targets: the course's functions, which the
    model and other assignments build on (an equivalent of nobody's is called by none of them)."""
    from .registry import assignments
    found: dict = {}
    for b in assignments():
        mine = [t for t in targets if t in b.targets]
        if mine:
            found[b.id] = mine
    return found


def _and(ids) -> str:
    named = [f"`{i}`" for i in ids]
    return " and ".join(filter(None, [", ".join(named[:-1]), named[-1]])) if named else ""


def _written(a, copy: Copy) -> list:
    """The targets a student of ``copy`` writes for ``a``: its own, and what is stubbed with it and called."""
    with_it = [t for t, b in copy.stubbed_with.items() if b.id == a.id]
    return list(a.targets) + [t for ts in _called(with_it).values() for t in ts]


def _prerequisites(a, copy: Copy) -> list:
    lines = ["### Prerequisites", ""]
    direct = set(a.needs)
    chain = needed(a)
    if not chain:
        return lines + ["None: this assignment stands alone."]
    said = []
    for b in chain:
        names = ", ".join(f"`{t.qualname}`" for t in b.targets)
        stubbed = copy.stubbed_targets(b)
        if b.id in copy.assigned:
            said.append(f"- `{b.id}` ({names}): assigned in this copy. Do it first: your local check and "
                        f"training run your {b.id}. The grader answers {a.id}'s calls to it with the reference, so "
                        f"a bug there costs {a.id} nothing.")
        elif stubbed:
            owner = next(iter(stubbed.values())).id
            said.append(f"- `{b.id}` ({', '.join(f'`{t.qualname}`' for t in stubbed)}): not assigned, but stubbed "
                        f"with `{owner}` (it computes {owner}'s functions all the same). Write it first: your local "
                        "check and training run yours; the grader uses the reference's.")
        elif b.id in direct:
            said.append(f"- `{b.id}` ({names}): ships working in this copy; nothing to write.")
    return lines + [f"Your code calls what {', '.join(f'`{n}`' for n in a.needs)} compute"
                    + (" (and what they call)" if len(chain) > len(direct) else "") + ":", ""] + said


def _cache(a) -> list:
    fields = cache_fields(a.id)
    if not fields:
        return []
    lines = ["", "### The cache", "", "The forward returns `(out, cache)`; the backward receives that cache. Its "
             "fields (you may store what you like, but these are what the backward needs):", "",
             "| cache | field | meaning |", "|---|---|---|"]
    return lines + [f"| `{c}` | `{f}` | {m.replace('|', '∣') or '(see the docstring)'} |" for c, f, m in fields]


def _cases(a) -> list:
    lines = ["", "### Graded cases", "", "Each case's inputs come from its drawer (what it draws is below: the "
             "inputs, their dtypes and shapes, the options). The shapes shown are the public seed 0's example, "
             "the one your local check uses; the grader draws 3 examples of each case from its secret seed, "
             "of other sizes. Nothing else is graded:", ""]
    for i, c in enumerate(a.cases):
        line = f"- {c.name}" + (" (float32: every result must stay float32)" if c.dtype == "float32" else "")
        if c.draw is not None:
            line += f": {drawn_text(c, i)}"
        lines.append(line)
    return lines + ["", "Also checked in every case: no input and no upstream gradient is modified (work on "
                    "new arrays)." + a.also_checked, "",
                    f"Tolerance: relative error {TOLERANCE['float64']:g} in float64 ({TOLERANCE['float32']:g} in "
                    "float32), max |yours - reference| / max(|yours|, |reference|) per tensor. A correct float64 "
                    "result is about 1e-12 off; a bug is off by 1e-2 or more."]


def _gradcheck_line(a) -> str:
    pairs = [c.check for c in a.cases if c.check.checker == "pair"]
    if not pairs:
        return ""
    forward, backward = pairs[0].forward, pairs[0].backward
    module = forward.split(":")[0]
    return (f"For the numerical gradient check alone (your forward against your backward):\n\n"
            f"    python -m minitransformer gradcheck minitransformer/{module.replace('.', '/')}.py:"
            f"{forward.split(':')[1]}:{backward.split(':')[1]}\n")


def page(assignment_id: str, copy: Copy | None = None) -> str:
    a = get(assignment_id)
    copy = copy or Copy.of([a])
    files = _files(a, copy)
    lines = [f"## `{a.id}`: {a.title} ({a.points} points)", "",
             f"Lecture: `{a.lecture}`.", "", f"Setup: {setup_line(short=True)}", "",
             "Derivations: " + ("handed out (the docstrings and the lecture show how the backward follows from the "
                                "forward)." if copy.derivations else "not handed out: the docstrings keep the "
                                "forward's equation, the shapes and the cache, not the backward's formula."), ""]
    lines += _implement(a, copy) + [""] + _prerequisites(a, copy) + _cache(a) + _cases(a)
    if a.handout:
        lines += ["", a.handout]
    if any(c.check.backward is not None or c.check.checker == "module" for c in a.cases):
        lines += ["", DERIVED]
    lines += ["", "### Rubric", "", render(a.id)]
    lines += ["", "### Check it locally", "",
              "In this folder (the one holding HOMEWORK.md):", "",
              f"    python -m minitransformer homework check . {a.id}", "",
              f"(or `python starter_{a.id}.py`, also as a notebook) is your local check, not your grade: it checks "
              "your code as the grader does (the same cases, tolerance, diagnoses and rubric) on the public seed "
              "0's numbers stored in this copy, where your instructor's grader draws other inputs from a secret "
              "seed. It prints, per tensor, the error and a diagnosis that names the mistake when it recognises "
              "one, then the rubric; its exit code is 0 when everything passes. "
              "`python -m minitransformer homework check .` checks every assignment of this copy.", ""]
    gradcheck = _gradcheck_line(a)
    if gradcheck:
        lines += [gradcheck]
    lines += ["### What to hand in", "",
              "Your changes are in " + ", ".join(f"`{f}`" for f in files) + ". Hand in either this whole copy, "
              "zipped from this folder with its paths:", "",
              "    python -m zipfile -c handin.zip minitransformer", "",
              "or only those files, each with its path inside the package (`minitransformer/...`, as above; a zip "
              "keeps the paths, and Gradescope unpacks an uploaded zip with them). A file handed in without its "
              "folder is known by its name alone, which works only while no two graded files share it: "
              "`functional/attention.py` and `layers/attention.py` are both `attention.py`, and such a hand-in is "
              "refused, not graded. Only the bodies of the assigned functions are graded: a helper or an import "
              "you add outside them is not seen; everything else is taken from the original.",
              "", "### Train with your own code", "",
              "    python -m minitransformer train --steps 300", "",
              "trains the small GPT on this copy's package, so with your functions: before step 1 it lists each "
              "function this copy stubbed and where the one that runs is (`yours, minitransformer/functional/"
              "norm.py:LINE`), and a function still a stub stops it in one line naming it. What that proves: your "
              "functions run inside a whole model without an error, in float32, on real shapes. What it does not: "
              "a falling loss proves nothing, since a model still learns with a wrong gradient that points roughly "
              "downhill (with a LayerNorm dx missing a term, the loss fell almost as far as with the right one). "
              "Only the comparison with the reference (the check above) and the numerical check say your "
              "gradient is right."]
    return "\n".join(lines)
