"""A trace beside a stored reference trace: where do the two first part?

    save(t, folder, targets)          # at export: the reference's numbers (a .npz and a .json, no code)
    reference = load(folder)          # in a homework copy; None when the copy has none
    result = compare(t, reference)    # the page's "compare" document (page.py), and result["first"]

The stored reference is numbers only: per step the routine's name, its scope and
phase, and every array argument and result in full (float64), under
"<step>/<arg|result>/<name>"; an argument that is an earlier result itself is
stored once, as that result, and named by it. It is traced from the reference code on the public
seed at export, so a student's copy holds no reference code (the grader's rule,
homework/expected.py): the same tiny model on the same input, traced there from the
student's code, is compared with it number by number.

Steps are matched in order while their routine and scope agree. A step differs
when one of its arrays does: relative error |yours - ref|_max / max(|yours|_max,
|ref|_max, tiny) above RTOL, the grader's float64 tolerance (homework/diagnose.py). The
first difference is named in words: a routine whose inputs agree and whose result
does not holds the bug; inputs that already differ when every earlier result
agreed were changed by the code between two routines (a Module's backward).
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from .page import value_data
from .values import Limits, summarize

NAME = "reference_trace"
RTOL = 1e-7                 # the grader's float64 tolerance (homework/diagnose.py TOLERANCE; a test ties them)
TINY = 1e-30


# ------------------------------------------------------------------ at export
def save(t, folder, targets) -> None:
    """The numbers of trace ``t`` (traced with Limits(keep=True)) into folder/reference_trace.{npz,json}."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    arrays, steps = {}, []
    for step in t.steps:
        entry = {"op": step.op, "scope": step.scope, "phase": step.phase, "arrays": []}
        for role, values in (("arg", step.args), ("result", step.results)):
            for v in _arrays(values):
                same = bool(v.source and v.source[2])             # an earlier result itself: stored there
                if not same:
                    arrays[f"{step.index}/{role}/{v.name}"] = v.array
                entry["arrays"].append([role, v.name, list(v.source) if same else None])
        steps.append(entry)
    np.savez_compressed(folder / f"{NAME}.npz", **arrays)
    document = {"meta": {k: t.meta[k] for k in ("family", "text", "dtype", "loss") if k in t.meta},
                "targets": sorted(str(x) for x in targets), "steps": steps}
    (folder / f"{NAME}.json").write_text(json.dumps(document) + "\n", encoding="utf-8")


def _arrays(values) -> list:
    """The array Values among ``values``, the parts of a *parts argument each on its own."""
    found = []
    for v in values:
        if v.kind == "parts":
            found += [f for f in v.fields if f.kind == "array"]
        elif v.kind == "array" and v.array is not None:
            found.append(v)
    return found


# ------------------------------------------------------------------ in a homework copy
class Reference:
    def __init__(self, folder: Path):
        document = json.loads((folder / f"{NAME}.json").read_text(encoding="utf-8"))
        self.meta, self.targets, self.steps = document["meta"], document["targets"], document["steps"]
        self.arrays = np.load(folder / f"{NAME}.npz", allow_pickle=False)


def load(folder) -> Reference | None:
    folder = Path(folder)
    return Reference(folder) if (folder / f"{NAME}.json").is_file() else None


def yours(step, targets) -> bool:
    """Whether ``step`` runs the student's code: its routine is a target, or a target method called it."""
    here = f"{step.routine.module}:{step.op}"
    methods = {f"{t.split(':')[0].replace('.', '/')}.py:{t.split(':')[1]}" for t in targets}
    return here in targets or any(c in methods for c in step.callers)


def compare(t, reference: Reference, limits: Limits = Limits()) -> dict:
    """The page's comparison of Trace ``t`` (recorded with keep=True) with ``reference``."""
    result = {"tolerance": RTOL, "steps": {}, "first": None, "complete": False,
              "yours": [s.index for s in t.steps if yours(s, reference.targets)]}
    for step in t.steps:
        entry = reference.steps[step.index] if step.index < len(reference.steps) else None
        if entry is None or (entry["op"], entry["scope"]) != (step.op, step.scope):
            result["steps"][step.index] = {"status": "unmatched"}
            _first(result, step, "unmatched", entry)
            break
        status, values = _step(step, entry, reference, limits)
        result["steps"][step.index] = {"status": status, "values": values}
        if status != "same":
            _first(result, step, status, entry, values)
            break
    else:
        result["complete"] = len(t.steps) == len(reference.steps) and not t.error
    if result["first"] is None:
        result["message"] = _all_same(t, reference, result)
    return result


def _step(step, entry, reference, limits) -> tuple:
    values, status = {}, "same"
    mine = {(role, v.name): v for role, vs in (("arg", step.args), ("result", step.results)) for v in _arrays(vs)}
    for role, name, source in entry["arrays"]:
        v = mine.get((role, name))
        if source is not None and v is not None and v.source and v.source[2] and list(v.source) == source:
            continue                               # the same earlier result on both sides: compared there
        key = f"{source[0]}/result/{source[1]}" if source is not None else f"{step.index}/{role}/{name}"
        ref = reference.arrays[key]
        if v is None:
            if role == "result" and step.error:
                continue
            values[f"{role}/{name}"] = {"differs": True, "maxdiff": float("inf"), "missing": True,
                                        "ref": value_data(summarize(name, ref, limits))}
            status = "differs"
            continue
        info = _difference(v.array, ref, name, limits)
        if source is not None and info["differs"] and v.source and list(v.source) != source:
            info["passed"] = [list(v.source[:2]), source[:2]]      # yours is (step, name), the reference's
        values[f"{role}/{name}"] = info
        status = "differs" if info["differs"] else status
    if step.error:
        status = "error"
    return status, values


def _difference(mine: np.ndarray, ref: np.ndarray, name: str, limits: Limits) -> dict:
    if mine.shape != ref.shape:
        return {"differs": True, "maxdiff": float("inf"), "shape": [list(mine.shape), list(ref.shape)],
                "ref": value_data(summarize(name, ref, limits))}
    with np.errstate(invalid="ignore", over="ignore"):
        gap = np.abs(mine - ref)
    gap = np.where(np.isnan(mine) & np.isnan(ref) | (mine == ref), 0.0, gap)      # -inf == -inf: no gap
    maxdiff = float(gap.max()) if gap.size else 0.0
    scale = max(_absmax(mine), _absmax(ref), TINY)
    differs = not np.isfinite(maxdiff) or maxdiff / scale > RTOL
    info = {"differs": bool(differs), "maxdiff": maxdiff if np.isfinite(maxdiff) else "inf"}
    if differs:
        info["ref"] = value_data(summarize(name, ref, limits))
        with np.errstate(invalid="ignore", over="ignore"):
            info["diff"] = value_data(summarize(name, np.where(gap == 0, 0.0, mine - ref), limits)).get("slices", [])
    return info


def _absmax(a: np.ndarray) -> float:
    finite = a[np.isfinite(a)]
    return float(np.abs(finite).max()) if finite.size else 0.0


# ------------------------------------------------------------------ the message
def _first(result, step, status, entry, values=None) -> None:
    result["first"] = step.index
    where = f"step {step.index + 1}, {step.op} in {step.scope or 'the model'}" + \
        (" (your code)" if step.index in result["yours"] else "")
    if status == "unmatched":
        expected = f"{entry['op']} in {entry['scope']}" if entry else "nothing more"
        result["message"] = (f"Your trace first departs from the reference at {where}: the reference calls "
                             f"{expected} here.")
    elif status == "error":
        result["message"] = f"Your trace stops at {where}: it raised {step.error}."
    else:
        result["message"] = f"Your trace first departs from the reference at {where}: " + _why(step, values)


def _why(step, values: dict) -> str:
    """Which of the step's values differ, and so where the difference comes from."""
    bad = [k for k, v in values.items() if v["differs"]]
    inputs = [k.split("/", 1)[1] for k in bad if k.startswith("arg/")]
    outputs = [k.split("/", 1)[1] for k in bad if k.startswith("result/")]
    size = max((values[k]["maxdiff"] for k in bad if values[k]["maxdiff"] != "inf"), default=float("inf"))
    if not inputs:
        return (f"its inputs match, its {', '.join(outputs)} differs by up to {size:.3g}; the difference "
                "starts in this routine.")
    one = len(inputs) == 1
    them = f"input {inputs[0]} already differs" if one else f"inputs {', '.join(inputs)} already differ"
    pronoun = "it" if one else "them"
    swaps = [f"{name} is {p[0][1]} of step {p[0][0] + 1} where the reference passes {p[1][1]} of step {p[1][0] + 1}"
             for name, p in ((k, values[f"arg/{k}"].get("passed")) for k in inputs) if p]
    return (f"its {them} (by up to {size:.3g}) although every earlier result matched, so the code that "
            f"prepared {pronoun} ({step.call[2] or step.call[0]}, before this call) changed {pronoun}"
            + (": " + "; ".join(swaps) if swaps else "") + ".")


def _all_same(t, reference, result) -> str:
    n = len(t.steps)
    if result["complete"]:
        return (f"All {n} steps match the reference, forward and backward (relative error at most "
                f"{RTOL:g}).")
    return f"The {n} steps so far match the reference ({len(reference.steps)} in all)."


def write_reference(package_dir, assignments) -> None:
    """At export, in the exporting (reference) package: the trace of the default tiny GPT step into
    the copy's package_dir/trace/, with the assignments' targets (their steps are marked "yours")."""
    from .run import traced_step
    t = traced_step("gpt", limits=Limits(keep=True))
    if t.error:
        raise RuntimeError(f"the reference trace failed: {t.error}")
    save(t, Path(package_dir) / "trace", [str(target) for a in assignments for target in a.targets])
