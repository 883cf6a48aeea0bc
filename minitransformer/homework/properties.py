"""Cases judged by a property, not by the reference's values: where a right answer is not unique.

A graded case (homework/assignment.py, ``GradedCase.judge``) names one of ``JUDGES``;
homework/evaluate.py then asks it, instead of comparing with the reference, whether
each tensor the student returned is right. Dropout's random path is one: a mask drawn
from the generator is right whatever entries it keeps, so long as it keeps each with
probability 1 - p_drop, scales what it keeps by 1/(1 - p_drop), and the backward uses
the same mask. The judges look at ratios and counts of the student's arrays and compute
nothing of the reference, so they ship in a student's copy (like
homework/mistakes_match.py's predicates).

Each is ``(inputs, student, upstream, tol) -> {tensor: (ok, message)}``.
"""
from __future__ import annotations

import math

import numpy as np

SIGMAS = 5.0               # the keep fraction's bound: a right mask is outside it about once in 1.7 million


def keep_bound(p_drop: float, n: int) -> float:
    """How far a right mask's keep fraction may be from 1 - p_drop: SIGMAS binomial standard deviations."""
    return SIGMAS * math.sqrt(p_drop * (1 - p_drop) / n)


def _ratio_ok(num, den, where, value, tol) -> bool:
    """num / den == value on ``where`` (within the relative tolerance)."""
    if not np.any(where):
        return True
    n, d = num[where].astype(np.float64), den[where].astype(np.float64)
    return bool(np.max(np.abs(n - value * d)) <= tol * max(np.max(np.abs(value * d)), np.finfo(float).tiny))


def dropout_random_path(inputs, student, upstream, tol) -> dict:
    """Dropout with a mask drawn from ``rng``: every entry of out is 0 or x / (1 - p_drop), a fraction
    1 - p_drop of them kept (within keep_bound), and dx is dy / (1 - p_drop) on the same entries, 0
    elsewhere."""
    x, p = np.asarray(inputs["x"]), float(inputs["p_drop"])
    out, dx = student.get("out"), student.get("dx")
    found, kept = {}, None
    if not isinstance(out, np.ndarray) or out.shape != x.shape:
        found["out"] = (False, f"out should be an array of x's shape {x.shape}, got {np.shape(out)}")
    else:
        kept = out != 0
        fraction, bound = float(kept.mean()), keep_bound(p, x.size)
        if not _ratio_ok(out, x, kept, 1 / (1 - p), tol):
            found["out"] = (False, "the kept entries of out are not x / (1 - p_drop): inverted dropout scales "
                                   "what it keeps by 1/(1 - p_drop)")
        elif abs(fraction - (1 - p)) > bound:
            found["out"] = (False, f"out keeps {fraction:.3f} of the {x.size} entries: each is kept with "
                                   f"probability 1 - p_drop = {1 - p:.3f} (a right mask lands within "
                                   f"±{bound:.3f} of it)")
        else:
            found["out"] = (True, "")
    if dx is not None:
        found["dx"] = _same_mask(dx, upstream, kept, p, tol)
    return found


def _same_mask(dx, dy, kept, p, tol) -> tuple:
    dy = np.asarray(dy)
    if not isinstance(dx, np.ndarray) or dx.shape != dy.shape:
        return False, f"dx should be an array of dy's shape {dy.shape}, got {np.shape(dx)}"
    if kept is None:
        return False, "dx cannot be judged without a right out (its mask)"
    if np.any(dx[~kept]) or not _ratio_ok(dx, dy, kept, 1 / (1 - p), tol):
        return False, ("dx is not dy ⊙ m / (1 - p_drop) with the forward's own mask m (the entries out "
                       "kept): the backward reuses the cached mask, it draws none")
    return True, ""


JUDGES = {f.__name__: f for f in (dropout_random_path,)}
