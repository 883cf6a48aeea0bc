"""Compare a student's array with the reference's and say what is wrong, when a pattern fits.

``compare(name, student, reference, ...)`` returns a ``Row``: name, shape, max abs
error, relative error, OK / NOT OK, and a diagnosis. The diagnoses, tried in order:

    wrong kind            a mask that is not bool; numbers given as bool (every nonzero number
                          is True) or complex
    wrong shape           (expected vs given; with "summed over axis a" when summing fixes it)
    NaN / inf present
    transposed            student ≈ ref.T (2-D) or ref.swapaxes(-1, -2)
    off by a factor c     c = <s, r> / <r, r>; 2, 1/2, -1 (wrong sign), and the factors the
                          drawer names (1/√D with D = 8, N_kept/N, ...); any other c, in any
                          assignment: "every entry is c times the expected value" with the usual
                          slips; a scalar within 2% of 1 (0.999) is not called a factor
    summed over an axis   student constant along an axis where ref is not, and ≈ its sum/mean
    masked positions      correct except where the drawer marks masked / ignored entries

``scale_pattern(student, reference)``, tried last (homework/mistakes.py): a factor that is not
one scalar but constant along the last axis and different from row to row (a per-row scale:
1/σ, 1/rms, a row's sum), or the same in every row and different per feature (a per-feature
parameter).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from fractions import Fraction

import numpy as np

# The grader's one tolerance: the relative error a right tensor stays within, by dtype. A correct
# float64 result is ~1e-12 off the reference, a bug ~1e-2 or more; float32 keeps ~7 digits, and a
# sum of a few hundred terms loses one or two. Every comparison, diagnosis, report and handout
# reads it from here.
TOLERANCE = {"float64": 1e-7, "float32": 1e-4}
TOL = TOLERANCE["float64"]
GENERIC_FACTOR = "every entry is c = "       # the constant-factor rule's words: homework/mistakes.py tries it last


def tolerance(dtype) -> float:
    """The tolerance of a dtype ("float32", np.float32, an array's dtype): float32's for float32,
    float64's for anything else."""
    return TOLERANCE.get(np.dtype(dtype).name, TOLERANCE["float64"])


def tolerance_text() -> str:
    """The tolerance as the report and the handout state it."""
    return (f"relative error <= {TOLERANCE['float64']:g} in float64, <= {TOLERANCE['float32']:g} in float32, "
            "per tensor: max |yours - reference| / max(|yours|, |reference|)")


@dataclass
class Row:
    name: str
    shape: str
    max_abs_error: float
    rel_error: float
    ok: bool
    diagnosis: str = ""

    def to_dict(self) -> dict:
        return asdict(self)


def errors(s, r) -> tuple[float, float]:
    """(max abs error, relative error = max abs error / max(|s|, |r|)); bool and integer arrays as
    their numbers (True is 1), so a mask is measured too."""
    s, r = (a.astype(np.float64) if a.dtype.kind in "bui" else a for a in (np.asarray(s), np.asarray(r)))
    if s.size == 0:
        return 0.0, 0.0
    abs_err = float(np.max(np.abs(s - r)))
    scale = max(float(np.max(np.abs(s))), float(np.max(np.abs(r))), 1e-300)
    return abs_err, abs_err / scale


def _close(s, r, tol=TOL) -> bool:
    return s.shape == r.shape and errors(s, r)[1] <= tol


def compare(name, student, reference, *, factors=None, masked=None, tol=TOL) -> Row:
    """One row of the table; ``factors`` maps a label ("√D with D=8") to (value, hint),
    ``masked`` is a bool array of the reference's shape marking masked/ignored entries."""
    r = np.asarray(reference)
    if student is None:
        return Row(name, str(r.shape), float("nan"), float("nan"), False, "returned None")
    s = np.asarray(student)
    kind = _kind_message(s, r)
    if kind:
        return Row(name, str(s.shape), float("nan"), float("nan"), False, kind)
    if s.shape != r.shape:
        return Row(name, str(s.shape), float("nan"), float("nan"), False, _wrong_shape(s, r))
    if r.dtype == bool:
        bad = int(np.sum(s != r))
        return Row(name, str(r.shape), float(bad), float(bad) / max(r.size, 1), bad == 0,
                   "" if bad == 0 else f"{bad} of {r.size} entries differ")
    s, r = s.astype(np.float64), r.astype(np.float64)
    if not np.all(np.isfinite(s)):
        n_nan, n_inf = int(np.isnan(s).sum()), int(np.isinf(s).sum())
        return Row(name, str(r.shape), float("nan"), float("nan"), False,
                   f"NaN/inf present ({n_nan} NaN, {n_inf} inf)")
    abs_err, rel = errors(s, r)
    ok = rel <= tol
    return Row(name, str(r.shape), abs_err, rel, ok, "" if ok else _diagnose(s, r, factors or {}, masked))


def _kind_message(s, r) -> str:
    """A student's array of the wrong kind of number: a mask must be bool; numbers must not be bool
    (every nonzero number is True: a bool array would match any reference without zeros) nor complex."""
    if r.dtype == bool and s.dtype != bool:
        return f"a {s.dtype} array where a bool mask is expected (True where visible)"
    if r.dtype != bool and s.dtype.kind not in "iuf":
        return f"a {s.dtype} array where real numbers ({r.dtype}) are expected"
    return ""


def _wrong_shape(s, r) -> str:
    text = f"wrong shape: expected {r.shape}, got {s.shape}"
    swapped = r.swapaxes(-1, -2) if r.ndim >= 2 else r
    if s.ndim == r.ndim >= 2 and s.shape == swapped.shape and _close(s, swapped):
        return text + " (it is the transpose of the expected array)"
    lead = s.ndim - r.ndim
    if lead > 0 and s.shape[lead:] == r.shape and _close(s.sum(axis=tuple(range(lead))), r):
        return text + (f" (summing it over the leading axes {tuple(range(lead))} gives the expected one: "
                       "sum over every row)")
    return text


def _diagnose(s, r, factors, masked) -> str:
    if s.ndim >= 2 and _close(s, r.swapaxes(-1, -2)):
        return "transposed: it equals the reference with its last two axes swapped"
    found = _factor(s, r, factors)
    if found:
        return found
    axis = _summed_axis(s, r)
    if axis:
        return axis
    if masked is not None and np.any(masked):
        m = np.broadcast_to(np.asarray(masked, bool), r.shape)
        if not np.all(m) and _close(s[~m], r[~m]) and not _close(s[m], r[m]):
            return f"correct except at the {int(m.sum())} masked/ignored positions"
    return ""


def _factor(s, r, factors) -> str:
    """factors: label -> (value, hint), e.g. "√D with D=8" -> (2.83, "forgot 1/√D?")."""
    rr = float(np.sum(r * r))
    if rr == 0.0:
        return ""
    if r.size < 2:
        return ""                          # one number is c times any other: a factor says nothing
    c = float(np.sum(s * r)) / rr
    if not _close(s, c * r, 1e-6):
        return ""
    if abs(c + 1) < 1e-6:
        return "wrong sign (off by a factor -1)"
    known = dict(factors)                  # the drawer's named factors first: they explain more
    known.update({"2": (2.0, ""), "1/2": (0.5, "")})
    for label, (value, hint) in known.items():
        if value and abs(c / value - 1) < 1e-6:
            return f"off by a factor {c:.3g} (≈ {label}{': ' + hint if hint else ''})"
    return constant_factor(c)


def constant_factor(c: float) -> str:
    """Every entry c times the expected one, c far from 1 (a 0.999 is a rounding, not a slip: "")."""
    if not (abs(c - 1) > 0.02 and abs(c) > 1e-3):
        return ""                          # a scale that means nothing explains nothing
    ratio = Fraction(c).limit_denominator(12)
    exact = f" = {ratio}" if ratio.denominator > 1 and abs(float(ratio) / c - 1) < 1e-6 else ""
    return (f"{GENERIC_FACTOR}{c:.4g}{exact} times the expected value: one constant factor is off (the "
            "usual slips: a scale such as 1/(1 - p), 1/√D or 1/N left out, inverted or applied twice, a 2 "
            "from a square's derivative, a sign)")


def _summed_axis(s, r) -> str:
    for a in range(s.ndim):
        if s.shape[a] < 2 or np.ptp(s, axis=a).max() > 1e-9 * (np.abs(s).max() + 1e-300):
            continue   # the student's array varies along a: not a reduction over a
        for how, red in (("summed", r.sum(axis=a, keepdims=True)),
                         ("averaged", r.mean(axis=a, keepdims=True))):
            if _close(s, np.broadcast_to(red, r.shape)):
                return f"{how} over axis {a} (size {s.shape[a]}) where it should not be"
        return f"constant along axis {a} (size {s.shape[a]}): reduced over the wrong axis?"
    return ""


def scale_pattern(s, r, per_feature_names=()) -> str:
    """A factor per row (constant along the last axis) or per feature (the same in every row), when
    the student's array is the reference scaled so, and not by one scalar; else "". The words are the
    call's own: ``per_feature_names``, the call's arrays of one value per feature (a gamma, a bias),
    are named where there are some, and no other assignment's are borrowed."""
    s, r = np.asarray(s, np.float64), np.asarray(r, np.float64)
    if s.shape != r.shape or r.ndim < 2 or r.shape[-1] < 2 or r[..., 0].size < 2 or not np.all(np.isfinite(s)):
        return ""
    rows_s, rows_r = s.reshape(-1, r.shape[-1]), r.reshape(-1, r.shape[-1])
    per_row = _scaled(rows_s, rows_r, axis=1)
    if per_row is not None:
        return ("off by a factor that is constant along the last axis but differs from row to row: "
                "something computed once per row (a normaliser, a row's sum or count) is missing, extra, "
                "or reduced over the wrong axis")
    per_feature = _scaled(rows_s, rows_r, axis=0)
    if per_feature is not None:
        named = f" ({', '.join(f'`{n}`' for n in per_feature_names)})" if per_feature_names else ""
        return ("off by a factor per feature (last axis) that is the same in every row: something applied "
                f"per feature{named} is missing, extra or wrong")
    return ""


def _scaled(s, r, axis: int):
    """The factors c (one per row for axis=1, per column for axis=0) with s ≈ c·r, when they fit
    and are not all one value; else None."""
    rr = np.sum(r * r, axis=axis, keepdims=True)
    c = np.divide(np.sum(s * r, axis=axis, keepdims=True), rr, out=np.zeros_like(rr), where=rr > 0)
    used = c[rr > 0]
    if used.size < 2 or np.ptp(used) <= 1e-6 * np.max(np.abs(used)) or not _close(s, c * r, 1e-6):
        return None
    return c
