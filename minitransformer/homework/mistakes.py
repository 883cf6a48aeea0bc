"""Tell the student what is wrong: a catalogue of common mistakes, recognised from the numbers.

Each ``Mistake`` is a named variant of the reference: what a known wrong line
computes on the very inputs the student's code ran on (a term of a backward left
out, a sign flipped, 1/√D missing, V - 1 classes for V, fancy-index ``+=`` for a
scatter-add, a Module path's gradient dropped ...). A wrong tensor that matches a
variant (relative error <= the tolerance) gets that mistake's message, which says
what to look at. A family is one mistake written several ways (a term of either
line of a rotation dropped, 2u' slipped in any of its factors): its variant is a
list of candidates, and any one of them explains the tensor. Each assignment's catalogue
lives in its own file (homework/assignments/<id>.py, ``Assignment.mistakes``:
homework/assignment.py's ``Mistake``); every entry has a test with a bug planted by hand
(tests/test_mistakes.py).

Parent side only: nothing here runs student code. The grader calls

    diagnose_all(assignment_id, inputs, student, reference, function=...)
        inputs     the forward's arguments by name (arrays and options) plus
                   "upstream", the gradient given to backward; a Module case also
                   "build" (a function returning the reference Module with the
                   case's weights) and "forward_inputs" (reference.trial_inputs makes it)
        student    tensor name -> the student's array (None when not returned)
        reference  tensor name -> the reference's array
        -> {tensor: message} for each wrong tensor (message "" when nothing is recognised)

and, for the promises that are not a value:

    dtype_message(tensor, student, expected_dtype)     float32 in, float32 out
    mutation_message(argument, before, after)          inputs and upstream unchanged
    nan_message(tensor, student, reference)            0, never NaN, where nothing is attended

A scalar is called a factor only when it means something (1/√D, 2, -1, (V-1)/V):
homework/diagnose.py names only those.
"""
from __future__ import annotations

import numpy as np

from .diagnose import GENERIC_FACTOR, compare, errors, scale_pattern, tolerance


def catalogue() -> tuple:
    """Every Mistake of every assignment, in the order they are tried: the assignments' own (their
    variants re-implement the reference: trusted), or in a student's copy their records
    (homework/registry.py: the variants' numbers are stored, the predicates ship in
    homework/mistakes_match.py)."""
    from .registry import assignments
    return tuple(m for a in assignments() for m in a.mistakes)


def entries(assignment_id: str, function: str | None = None) -> tuple:
    from .registry import get
    return tuple(m for m in get(assignment_id).mistakes if function is None or m.function == function)


def _tol(student) -> float:
    return tolerance(np.asarray(student).dtype)


def _matches(student, candidate, reference, tol) -> bool:
    """student ≈ candidate, and candidate is not the reference itself on these inputs."""
    if candidate is None or student is None:
        return False
    s, c, r = (np.asarray(a, dtype=np.float64) for a in (student, candidate, reference))
    if s.shape != c.shape or not np.all(np.isfinite(s)) or not np.all(np.isfinite(c)):
        return False
    if c.shape == r.shape and errors(c, r)[1] <= 10 * tol:
        return False                     # the variant does not differ here: it explains nothing
    return errors(s, c)[1] <= tol


def _variants(mistake, inputs, cache: dict):
    if mistake.name not in cache:
        try:
            cache[mistake.name] = _flat(mistake.variant(inputs) or {})
        except (KeyError, ValueError, TypeError, IndexError, ZeroDivisionError, FloatingPointError):
            cache[mistake.name] = {}     # not applicable to this case (no bias, no memory, ...)
    return cache[mistake.name]


def _flat(found) -> dict:
    """A family's candidates [{tensor: array}, ...] as one dict, candidate k > 0 keyed "tensor#k"
    (a student's copy stores the variants by these keys)."""
    if isinstance(found, dict):
        return found
    return {(t if k == 0 else f"{t}#{k}"): v for k, c in enumerate(found) for t, v in c.items()}


def _candidates(variants: dict) -> list:
    """The {tensor: array} of each candidate of a flat dict of variants, in order."""
    groups: dict = {}
    for key, value in variants.items():
        tensor, _, k = key.partition("#")
        groups.setdefault(int(k or 0), {})[tensor] = value
    return [groups[k] for k in sorted(groups)]


def recognise(assignment_id, tensor, inputs, student, reference, *, function=None, cache=None,
              others=None):
    """The first catalogue Mistake that explains the student's ``tensor``, or None.

    ``others``: {name: (student, reference)} of the other tensors of the same call. A
    mistake must agree with them too: "dropout unscaled in forward and backward" does not
    explain a dx when the student's forward output is right.
    """
    cache = {} if cache is None else cache
    tol = _tol(reference if student is None else student)
    for mistake in entries(assignment_id, function):
        if not any(fits(tensor, t) for t in mistake.tensors):
            continue
        if mistake.match is not None:
            try:
                if mistake.match(inputs, tensor, student, reference):
                    return mistake
            except (KeyError, ValueError, TypeError, IndexError):
                pass
            continue
        for variants in _candidates(_variants(mistake, inputs, cache)):
            if _matches(student, variants.get(tensor), reference, tol) and \
                    _consistent(variants, others or {}, tol):
                return mistake
    return None


def _consistent(variants: dict, others: dict, tol: float) -> bool:
    """Every other tensor the variant changes is changed the same way by the student."""
    for name, (s, r) in others.items():
        v = variants.get(name)
        if v is None or r is None or s is None or np.shape(v) != np.shape(r):
            continue
        if errors(np.asarray(v, np.float64), np.asarray(r, np.float64))[1] <= 10 * tol:
            continue                      # the variant leaves this tensor as it is
        if not _matches(s, v, r, max(tol, _tol(s))):
            return False
    return True


def _compare_tol(student, reference) -> float:
    """float64's tolerance, float32's when either side is float32 (its ~7 digits)."""
    return max(tolerance(np.asarray(a).dtype) for a in (student, reference) if a is not None)


def fits(tensor: str, pattern: str) -> bool:
    """Whether ``tensor`` is one a catalogue entry's pattern names ("dW_*", "d*.*")."""
    from fnmatch import fnmatchcase
    return fnmatchcase(tensor, pattern)


def diagnose(assignment_id, tensor, inputs, student, reference, *, function=None, tol=None) -> str | None:
    """The message for one wrong tensor (None when it is right)."""
    return diagnose_all(assignment_id, inputs, {tensor: student}, {tensor: reference},
                        function=function, tol=tol).get(tensor)


def diagnose_all(assignment_id, inputs, student: dict, reference: dict, *, function=None, tol=None,
                 factors=None, masked=None, variants=None) -> dict:
    """{tensor: message} for every tensor of ``reference`` the student got wrong: a catalogue
    message when a mistake fits, else the generic diagnosis of diagnose.compare ("" when none),
    which names the ``factors`` a case draws ({label: (value, hint)}) and its ``masked``
    entries ({tensor: bool array}). ``variants``: {mistake name: {tensor: array}} computed
    already (a student's copy has them stored, not computed)."""
    messages, cache = {}, dict(variants or {})
    for tensor, r in reference.items():
        if r is None:
            continue
        s = student.get(tensor)
        row = compare(tensor, s, r, tol=tol if tol is not None else _compare_tol(s, r), factors=factors,
                      masked=(masked or {}).get(tensor))
        if row.ok:
            continue
        nan = nan_message(tensor, s, r)
        # a wrong gradient must agree with the forward's output (and the other gradients); a
        # wrong output need not agree with gradients: a backward written apart may be right
        others = {k: (student.get(k), v) for k, v in reference.items() if k != tensor and tensor != "out"}
        swapped = _swapped(tensor, student, reference, inputs)
        mistake = None if swapped else recognise(assignment_id, tensor, inputs, s, r, function=function,
                                                  cache=cache, others=others)
        matched = bool(nan) and mistake is not None and mistake.match is not None
        if matched:
            nan = mistake.message                # a predicate that recognises where the NaN comes from
        generic = row.diagnosis.startswith(GENERIC_FACTOR)      # tried after another array's count
        messages[tensor] = (_overflow(tensor, inputs) if nan and not matched else "") or nan or swapped or \
            (mistake.message if mistake else "" if generic else row.diagnosis) or \
            _another_array(tensor, s, inputs, reference) or (row.diagnosis if generic else "") or \
            scale_pattern(s, r, _per_feature(inputs, r)) or _apart_from_shift(s, r, inputs)
    return messages


def _apart_from_shift(s, r, inputs) -> str:
    """The scale patterns once an added per-feature array (a beta, a bias b) is taken off both sides:
    y = (something scaled wrongly) + beta."""
    for name in _per_feature(inputs, r):
        shift = np.asarray(inputs[name], np.float64)
        try:
            ss, rr = np.asarray(s, np.float64) - shift, np.asarray(r, np.float64) - shift
        except ValueError:
            continue
        said = scale_pattern(ss, rr) or compare("", ss, rr).diagnosis
        if said and "factor" in said:
            return f"once `{name}` (added last) is taken off: {said}"
    return ""


def _per_feature(inputs, r) -> list:
    """The call's arrays of one value per feature (1-D, the last axis's size): a gamma, a bias."""
    r = np.asarray(r)
    return [k for k, v in inputs.items() if k != "upstream" and isinstance(v, np.ndarray) and v.ndim == 1
            and r.ndim >= 2 and v.shape[0] == r.shape[-1] and v.dtype.kind == "f"]


def _overflow(tensor, inputs) -> str:
    """NaN/inf where the expected values are finite, on inputs large enough for exp to overflow
    (exp(x) is inf past x = 709.78, and inf/inf is NaN): the max shift is missing."""
    big = [float(np.max(np.abs(v[np.isfinite(v)]))) for k, v in _float_arrays(inputs).items()
           if k != "upstream" and np.any(np.isfinite(v))]
    if not big or max(big) < 700:
        return ""
    return (f"NaN/inf in {tensor} where the expected values are finite, on inputs as large as {max(big):.0f}: "
            "exp overflows past 709 (inf/inf is NaN); subtract the row max before exp: softmax(x) = "
            "softmax(x - max x), every exponent then <= 0")


# ------------------------------------------------------------------ a wrong tensor that is another array
def _order_message(tensor, other, grads) -> str:
    return (f"{tensor} holds what {other} should be: the gradients come back in the wrong order "
            f"(the order is {', '.join(grads)})")


def _returned(reference, inputs) -> list:
    """The gradients a call returns, in order: d<input> of the forward's inputs (a Module's
    parameter gradients are not returned, they are accumulated)."""
    return [k for k, v in reference.items() if v is not None and k.startswith("d") and k[1:] in inputs]


def _swapped(tensor, student, reference, inputs) -> str:
    """Two returned gradients that hold each other's values: returned in the wrong order."""
    grads = _returned(reference, inputs)
    s = student.get(tensor)
    if tensor not in grads or s is None or np.asarray(s).dtype.kind not in "iuf":
        return ""
    tol = max(1e-6, _tol(s))
    for other in grads:
        o = student.get(other)
        if other != tensor and o is not None and np.asarray(o).dtype.kind in "iuf" and \
                _same(s, reference[other], tol) and _same(o, reference[tensor], tol):
            return _order_message(tensor, other, grads)
    return ""


def _float_arrays(named: dict) -> dict:
    return {k: np.asarray(v, np.float64) for k, v in named.items()
            if isinstance(v, np.ndarray) and v.dtype.kind == "f" and v.size > 1}


def _another_array(tensor, student, inputs, reference) -> str:
    """When the student's wrong ``tensor`` is another array of the call: another result (the
    results in the wrong order), an input or the upstream gradient as given, or the expected
    array without (or with an extra) factor of an input (a gamma, the upstream gradient)."""
    if student is None or np.asarray(student).dtype.kind not in "iuf":
        return ""
    s, r = np.asarray(student, np.float64), np.asarray(reference[tensor], np.float64)
    tol = max(1e-6, _tol(student))
    grads = _returned(reference, inputs)
    if tensor in grads:
        for other in grads:
            if other != tensor and _same(s, reference[other], tol):
                return _order_message(tensor, other, grads)
    arrays = _float_arrays(inputs)
    for name, v in arrays.items():
        if _same(s, v, tol):
            if name == "upstream":
                return (f"{tensor} is the upstream gradient as it was given: the local derivative is not "
                        f"applied (chain rule: multiply by what the forward did to its input)")
            return f"{tensor} is the input `{name}` unchanged"
    count = _count_factor(s, r, arrays, tol)
    if count:
        return count
    for name, v in arrays.items():
        what = "the upstream gradient" if name == "upstream" else f"`{name}`"
        try:
            if _same(s * v, r, tol):
                return f"{tensor} misses a factor {what}: the expected {tensor} is yours times {what}"
            if _same(s, r * v, tol):
                return f"{tensor} has an extra factor {what}: yours is the expected {tensor} times {what}"
        except ValueError:
            continue                                  # does not broadcast
    return ""


def _count_factor(s, r, arrays, tol) -> str:
    """s = n·r or r/n with n >= 3 a count of the inputs (an axis's size, the rows B·T, every
    entry): a sum where a mean belongs, or the other way round."""
    counts = {}
    for name, v in arrays.items():
        for a in range(v.ndim):
            counts.setdefault(v.shape[a], f"the size of axis {a} of `{name}`")
        if v.ndim >= 2:
            counts.setdefault(int(np.prod(v.shape[:-1])), f"the number of rows of `{name}` (every axis but the last)")
        counts.setdefault(v.size, f"the number of entries of `{name}`")
    for n, what in counts.items():
        if n >= 3 and _same(s, r * n, tol):
            return f"{n} times the expected value, {n} being {what}: a sum where a mean belongs?"
        if n >= 3 and _same(s, r / n, tol):
            return f"1/{n} of the expected value, {n} being {what}: a mean where a sum belongs, or divided twice?"
    return ""


def _same(a, b, tol) -> bool:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return a.shape == b.shape and bool(np.all(np.isfinite(a))) and errors(a, b)[1] <= tol


# ------------------------------------------------------------------ promises that are not a value
def dtype_message(tensor, student, expected_dtype) -> str | None:
    """None when ``student`` has ``expected_dtype`` (float32 in, float32 out)."""
    if student is None or not hasattr(student, "dtype"):
        return None
    got, expected = np.dtype(student.dtype), np.dtype(expected_dtype)
    if got == expected:
        return None
    if got == np.float64 and expected == np.float32:
        return (f"{tensor} is float64 for float32 inputs: something promoted it (a Python or NumPy "
                "float64 constant array, np.sqrt of a float64, np.zeros without dtype=); create arrays "
                "with the input's dtype (np.zeros_like, dtype=x.dtype) and keep scalars as Python floats")
    return f"{tensor} has dtype {got}, expected {expected} (the dtype of the inputs)"


def mutation_message(argument, before, after, *, upstream: bool = False, by_backward: bool = False) -> str | None:
    """None when ``after`` equals ``before`` bit for bit (compare a copy taken before the call);
    ``by_backward``: ``after`` is the forward's input after the backward, which reached it through
    the cache."""
    b, a = np.asarray(before), np.asarray(after)
    if b.shape == a.shape and np.array_equal(b, a, equal_nan=b.dtype.kind == "f"):
        return None
    changed = int(np.sum(b != a)) if b.shape == a.shape else b.size
    if by_backward:
        return (f"your backward changed the forward's input `{argument}` in place through the cache "
                f"({changed} of {b.size} entries): the cache holds the caller's array itself, so "
                f"`cached -= ...` or `cached[...] = ...` in the backward changes it; compute into a new array "
                f"(`xmu = cached - mu`)")
    what = "the upstream gradient" if upstream else "its input"
    return (f"your function changed {what} `{argument}` in place ({changed} of {b.size} entries): "
            f"an in-place operator on an argument (`{argument} -= ...`, `{argument} *= ...`, "
            f"`{argument}[...] = ...`) also changes the caller's array; compute into a new array instead "
            f"(`{argument} = {argument} - ...`)")


def nan_message(tensor, student, reference) -> str | None:
    """A message when the student has NaN/inf where the reference is finite, naming the rows
    with nothing to attend (a whole zero row in the reference) when that is where they are."""
    if student is None:
        return None
    s, r = np.asarray(student), np.asarray(reference)
    if s.shape != r.shape or s.dtype.kind != "f" or np.all(np.isfinite(s)):
        return None
    bad = ~np.isfinite(s) & np.isfinite(r)
    if not np.any(bad):
        return None
    if r.ndim >= 1:
        zero_rows = np.all(r == 0, axis=-1, keepdims=True) & np.any(bad, axis=-1, keepdims=True)
        if np.array_equal(np.any(bad, axis=-1, keepdims=True), zero_rows):
            return (f"NaN in {tensor} on the {int(zero_rows.sum())} row(s) where every entry is masked: "
                    "such a row has nothing to attend and must be 0, never NaN (exp(-inf - max) with a max "
                    "of -inf is NaN: use a safe max of 0 for those rows, and 0 where the sum is 0)")
    return f"NaN/inf in {tensor} at {int(bad.sum())} entries where the expected values are finite"
