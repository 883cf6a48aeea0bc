"""The catalogue's mistakes that are not a value: predicates on the student's array.

An entry of the catalogue (homework/mistakes.py) recognises a mistake in one of two
ways: a variant computes what the wrong line gives (the reference with one thing
changed: trusted side, in the assignment's file of homework/assignments/), or a
predicate here looks at a property of the student's array: a gradient never
accumulated (all zero), accumulated twice, assigned instead of added, missing, another dropout mask, one slice
per query head, a bias gradient left at the scores' shape. The predicates compute
nothing of the reference, so they ship in a student's copy, whose local check then
names these mistakes too (its variants are stored numbers: homework/expected.py).

Each is ``(inputs, tensor, student, reference) -> bool``; ``MATCHES`` names them, the
name a copy stores.
"""
from __future__ import annotations

import numpy as np

from ..functional.attention import _sum_to_shape


def _f64(a):
    return np.asarray(a, dtype=np.float64)


def other_mask(inp, tensor, student, reference) -> bool:
    """Zeros where the given mask keeps an entry, or kept values where it drops: another mask."""
    if inp.get("mask") is None or not inp.get("training", True) or student is None:
        return False
    s, m = _f64(student), np.asarray(inp["mask"])
    if s.shape != m.shape:
        return False
    kept = s != 0
    scaled = _f64(inp["x"] if tensor == "out" else inp["upstream"]) / (1 - float(inp["p_drop"]))
    return bool(np.any(kept != m)) and np.allclose(s[kept], scaled[kept], rtol=1e-4, atol=0)


def keeps_p_drop(inp, tensor, student, reference) -> bool:
    """The random path keeping a fraction p_drop of the entries (the drop mask used as the keep mask)."""
    from .properties import keep_bound
    if inp.get("mask") is not None or not inp.get("training", True) or tensor != "out" or student is None:
        return False
    s, p = np.asarray(student), float(inp["p_drop"])
    if s.shape != np.shape(inp["x"]):
        return False
    fraction, bound = float((s != 0).mean()), keep_bound(p, s.size)
    return abs(fraction - p) <= bound < abs(fraction - (1 - p))


def dropout_in_eval(inp, tensor, student, reference) -> bool:
    """training=False, and entries dropped or scaled all the same."""
    return not inp.get("training", True) and student is not None and np.shape(student) == np.shape(reference) \
        and bool(np.any(np.asarray(student) == 0) or not np.allclose(student, reference))


def repeat_kv_not_summed(inp, tensor, student, reference) -> bool:
    """A (B, H, S, D) gradient where (B, G, S, D) is due, whose group sums are right."""
    s, r = np.asarray(student) if student is not None else None, np.asarray(reference)
    if s is None or s.ndim != 4 or r.ndim != 4 or s.shape[1] == r.shape[1] or s.shape[1] % r.shape[1]:
        return False
    B, H, S, D = s.shape
    G = r.shape[1]
    return s.shape[0] == r.shape[0] and s.shape[2:] == r.shape[2:] and \
        np.allclose(s.reshape(B, G, H // G, S, D).sum(2), r, rtol=1e-5, atol=1e-8)


def dbias_not_reduced(inp, tensor, student, reference) -> bool:
    """A bias gradient of the scores' shape whose sum over the broadcast axes is right."""
    s, r = np.asarray(student) if student is not None else None, np.asarray(reference)
    if s is None or s.shape == r.shape or s.ndim < r.ndim:
        return False
    try:
        return np.allclose(_sum_to_shape(s, r.shape), r, rtol=1e-5, atol=1e-8)
    except ValueError:
        return False


def _is_param(tensor) -> bool:
    return tensor not in ("out", "dx", "dmemory")


def never_accumulated(inp, tensor, student, reference) -> bool:
    """A parameter's gradient that stayed 0."""
    return _is_param(tensor) and student is not None and np.shape(student) == np.shape(reference) \
        and not np.any(student) and bool(np.any(reference))


def doubled(inp, tensor, student, reference) -> bool:
    """Twice the expected gradient."""
    if student is None or np.shape(student) != np.shape(reference) or not np.any(reference):
        return False
    s, r = _f64(student), _f64(reference)
    return bool(np.max(np.abs(s - 2 * r)) <= 1e-5 * np.max(np.abs(r)))


def assigned(inp, tensor, student, reference) -> bool:
    """One call's gradient where n > 1 calls on the same inputs add theirs: assigned, not added."""
    n = int(inp.get("backward_calls", 1))
    if n < 2 or not _is_param(tensor) or student is None or np.shape(student) != np.shape(reference) \
            or not np.any(reference):
        return False
    s, r = _f64(student), _f64(reference)
    return bool(np.max(np.abs(s - r / n)) <= 1e-5 * np.max(np.abs(r)))


def nothing_kept_nan(inp, tensor, student, reference) -> bool:
    """Every target ignored, and NaN/inf where 0 is due: the mean over N_kept = 0 targets, 0/0."""
    targets = inp.get("targets")
    if targets is None or student is None or np.asarray(student).dtype.kind != "f":
        return False
    s = np.asarray(student)
    return bool(np.all(np.asarray(targets) == inp.get("ignore_index", -100))) and not np.all(np.isfinite(s)) \
        and np.shape(s) == np.shape(reference) and bool(np.all(np.isfinite(reference)))


def missing(inp, tensor, student, reference) -> bool:
    """A gradient that was not returned at all."""
    return student is None and reference is not None


MATCHES = {f.__name__: f for f in (other_mask, keeps_p_drop, dropout_in_eval, repeat_kv_not_summed, dbias_not_reduced,
                                   never_accumulated, doubled, assigned, nothing_kept_nan, missing)}


def name_of(match) -> str | None:
    """The name a copy stores for an entry's predicate (None: the entry has a variant instead)."""
    if match is None:
        return None
    if MATCHES.get(getattr(match, "__name__", "")) is not match:
        raise ValueError(f"a catalogue predicate must be one of mistakes_match.MATCHES, got {match!r}")
    return match.__name__
