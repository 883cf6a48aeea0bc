"""The catalogue of common mistakes in the functional pairs (see homework/mistakes.py).

Each variant is the wrong line a student writes, computed in float64 on the case's
inputs (``inp``: the forward's arguments by name, ``upstream`` = the gradient
given to backward). Where the mistake is in the backward only, the forward is the
reference's.
"""
from __future__ import annotations

from functools import partial

import numpy as np

from ..functional.erf import erfc
from ..functional.rope import rope_backward, rope_forward
from .mistakes import Mistake
from .mistakes_match import dbias_not_reduced, dropout_in_eval, other_mask, repeat_kv_not_summed, sum_to


def _f64(a):
    return np.asarray(a, dtype=np.float64)


def _x(inp, name="x"):
    return _f64(inp[name])


def _g(inp):
    return _f64(inp["upstream"])


def _rows(a):
    return a.reshape(-1, a.shape[-1])


# ------------------------------------------------------------------ linear
def _linear_mean_grads(inp):
    x, W, dy = _x(inp), _x(inp, "W"), _g(inp)
    N = _rows(x).shape[0]
    return {"dW": _rows(x).T @ _rows(dy) / N, "db": _rows(dy).mean(axis=0)}


def _linear_first_row(inp):
    x, dy = _x(inp), _g(inp)
    if x.ndim < 3 or x.shape[0] < 2:
        return {}
    return {"dW": _rows(x[0]).T @ _rows(dy[0])}


LINEAR = (
    Mistake("linear", "linear", "linear-no-bias", ("out",),
            "out is x W without the bias: add b to every row (it broadcasts over the leading axes)",
            lambda inp: {"out": _x(inp) @ _x(inp, "W")} if inp.get("b") is not None else {}),
    Mistake("linear", "linear", "linear-grad-averaged", ("dW", "db"),
            "the gradient is averaged over the rows (divided by their number B·T): a parameter used by "
            "every row gets the SUM of the rows' gradients",
            _linear_mean_grads),
    Mistake("linear", "linear", "linear-first-batch-only", ("dW",),
            "dW uses only the first batch element: flatten x and dy to (B·T, d) rows before x.T @ dy",
            _linear_first_row),
)


# ------------------------------------------------------------------ elementwise: relu, gelu
def _relu_grad_alone(inp):
    return {"dx": (_x(inp) > 0).astype(np.float64)}


def _relu_times_output(inp):
    x = _x(inp)
    return {"dx": _g(inp) * np.maximum(x, 0)}


def _gelu_parts(x, approximate):
    """(gelu(x), its derivative, Φ-like factor s) of either form."""
    if approximate == "tanh":
        c = np.sqrt(2 / np.pi)
        u = c * (x + 0.044715 * x ** 3)
        s = 0.5 * (1 + np.tanh(u))
        y = x * s
        return y, s + x * (1 - np.tanh(u) ** 2) * 0.5 * c * (1 + 3 * 0.044715 * x ** 2), s
    Phi = 0.5 * erfc(-x / np.sqrt(2))
    phi = np.exp(-0.5 * x * x) / np.sqrt(2 * np.pi)
    return x * Phi, Phi + x * phi, Phi


def _gelu_other_form(inp):
    other = "none" if inp.get("approximate", "none") == "tanh" else "tanh"
    y, dydx, _ = _gelu_parts(_x(inp), other)
    return {"out": y, "dx": _g(inp) * dydx}


def _gelu_phi_only(inp):
    _, _, s = _gelu_parts(_x(inp), inp.get("approximate", "none"))
    return {"dx": _g(inp) * s}


def _gelu_grad_alone(inp):
    return {"dx": _gelu_parts(_x(inp), inp.get("approximate", "none"))[1]}


def _gelu_second_term_only(inp):
    _, dydx, s = _gelu_parts(_x(inp), inp.get("approximate", "none"))
    return {"dx": _g(inp) * (dydx - s)}


def _gelu_product_rule_minus(inp):
    _, dydx, s = _gelu_parts(_x(inp), inp.get("approximate", "none"))
    return {"dx": _g(inp) * (2 * s - dydx)}                   # Φ - x φ: the second term subtracted


def _gelu_exact_pdf(inp, *, normalised=True, half=0.5):
    """The exact form's dx with φ(x) = exp(-x²/2)/√(2π) written wrong, exp(-half·x²) (the forward is right)."""
    if inp.get("approximate", "none") != "none":
        return {}
    x = _x(inp)
    Phi = 0.5 * erfc(-x / np.sqrt(2))
    phi = np.exp(-half * x * x) / (np.sqrt(2 * np.pi) if normalised else 1.0)
    return {"dx": _g(inp) * (Phi + x * phi)}


def _gelu_erf_no_sqrt2(inp):
    """Φ(x) = ½ erfc(-x/√2) with its argument -x or -√2 x, in out and in dx = Φ + x φ."""
    if inp.get("approximate", "none") != "none":
        return {}
    x, dy = _x(inp), _g(inp)
    phi = np.exp(-0.5 * x * x) / np.sqrt(2 * np.pi)
    return [{"out": x * Phi, "dx": dy * (Phi + x * phi)} for Phi in (0.5 * erfc(-x), 0.5 * erfc(-np.sqrt(2) * x))]


def _gelu_exact_cdf(inp, *, sign=1.0, half=0.5):
    """The exact form with Φ(x) written wrong, Φ(sign·x)·half/½, in out and in dx = Φ + x φ."""
    if inp.get("approximate", "none") != "none":
        return {}
    x, dy = _x(inp), _g(inp)
    Phi = half * erfc(-sign * x / np.sqrt(2))
    phi = np.exp(-0.5 * x * x) / np.sqrt(2 * np.pi)
    c = half / 0.5
    return [{"out": x * Phi, "dx": dy * (Phi + x * phi)},                  # Φ written once, wrong
            {"out": x * Phi, "dx": dy * c * (Phi / c + sign * x * phi)}]   # y = x c Φ(sign x)'s own derivative


def _gelu_pdf_for_cdf(inp):
    if inp.get("approximate", "none") != "none":
        return {}
    x = _x(inp)
    return {"out": x * np.exp(-0.5 * x * x) / np.sqrt(2 * np.pi)}


def _gelu_dx_no_x(inp):
    """gelu'(x) with the x of its second term forgotten: Φ + φ (tanh form σ(2u) + σ(2u)(1 - σ(2u)) 2u')."""
    x = _x(inp)
    if inp.get("approximate", "none") == "tanh":
        s = _sigma(2 * _u(x))
        return {"dx": _g(inp) * (s + s * (1 - s) * _du2(x))}
    return {"dx": _g(inp) * (0.5 * erfc(-x / np.sqrt(2)) + np.exp(-0.5 * x * x) / np.sqrt(2 * np.pi))}


def _gelu_other_derivative(inp):
    other = "none" if inp.get("approximate", "none") == "tanh" else "tanh"
    return {"dx": _g(inp) * _gelu_parts(_x(inp), other)[1]}


# the tanh form, y = x σ(2u), dydx = σ(2u) + x σ'(2u) · 2u', piece by piece
_K, _C = 0.044715, np.sqrt(2 / np.pi)


def _sigma(z):
    return 0.5 * (1 + np.tanh(0.5 * z))


def _u(x):
    return _C * (x + _K * x ** 3)


def _du2(x):
    return 2 * _C * (1 + 3 * _K * x ** 2)                  # 2u'


def _gelu_tanh(inp, *, u=None, du2=None, s=None, slope=None):
    """{out, dx} of the tanh form with any piece replaced (a function of x); {} for the exact form."""
    if inp.get("approximate", "none") != "tanh":
        return {}
    x = _x(inp)
    uu = _u(x) if u is None else u(x)
    ss = _sigma(2 * uu) if s is None else s(uu)
    sl = ss * (1 - ss) if slope is None else slope(ss)
    d = _du2(x) if du2 is None else du2(x)
    return {"out": x * ss, "dx": _g(inp) * (ss + x * sl * d)}


def _tanh_family(inp, *variants):
    return [v for v in (_gelu_tanh(inp, **kw) for kw in variants) if v]


def _u_prime(x):
    return 0.5 * _du2(x)


def _gelu_tanh_half(inp):
    """σ(u) or tanh u where ½ (1 + tanh u) = σ(2u) belongs; the derivative through 2u' or u'."""
    return _tanh_family(inp, dict(s=_sigma), dict(s=_sigma, du2=_u_prime),
                        dict(s=np.tanh, slope=lambda t: 1 - t * t, du2=_u_prime))


def _u_no_c(x):
    return x + _K * x ** 3


def _gelu_tanh_no_c(inp):
    """u = x + k x³, √(2/π) forgotten; 2u' right, or without √(2/π) too."""
    return _tanh_family(inp, dict(u=_u_no_c), dict(u=_u_no_c, du2=lambda x: _du2(x) / _C))


_CUBIC_SLIPS = (            # u's cubic term as written, and its derivative
    (lambda x: _K * x, lambda x: _K + 0 * x), (lambda x: _K * x * x, lambda x: 2 * _K * x),
    (lambda x: x ** 3, lambda x: 3 * x * x), (lambda x: _K + 0 * x, lambda x: 0 * x),
    (lambda x: -_K * x ** 3, lambda x: -3 * _K * x * x))


def _u_with(term, x):
    return _C * (x + term(x))


def _du2_with(dterm, x):
    return 2 * _C * (1 + dterm(x))


def _gelu_tanh_cubic(inp):
    """u's cubic term written k x, k x², x³, k or -k x³; 2u' right, or the derivative of that u."""
    return _tanh_family(inp, *(kw for term, dterm in _CUBIC_SLIPS for kw in
                               (dict(u=partial(_u_with, term)),
                                dict(u=partial(_u_with, term), du2=partial(_du2_with, dterm)))))


def _gelu_tanh_du(inp):
    """2u' = 2√(2/π)(1 + 3k x²) written wrong; y is right."""
    slips = (lambda x: 0.5 * _du2(x),                       # u' for 2u'
             lambda x: 2 * _C * (1 + _K * x ** 2),           # the 3 of 3k x² forgotten
             lambda x: 2 * _C * (1 + 3 * x ** 2),            # k forgotten
             lambda x: 2 * _C + 0 * x,                       # the cubic's derivative forgotten
             lambda x: 2 * (1 + 3 * _K * x ** 2),            # √(2/π) forgotten
             lambda x: 1 + 3 * _K * x ** 2,                  # 2√(2/π) forgotten
             lambda x: 2 * _C * (1 - 3 * _K * x ** 2),       # the cubic's derivative subtracted
             lambda x: 2 * _C * 3 * _K * x ** 2,             # the derivative of x (1) forgotten
             lambda x: 1 + 0 * x)                            # no chain factor at all
    return _tanh_family(inp, *(dict(du2=d) for d in slips))


def _gelu_tanh_slope(inp):
    """σ'(z) = σ(1 - σ) written σ, or (from ½ x (1 + tanh u)) 1 - tanh u for 1 - tanh² u."""
    return _tanh_family(inp, dict(slope=lambda s: s), dict(slope=lambda s: 0.5 * (1 - s)))


ELEMENTWISE = (
    Mistake("relu", "relu", "relu-no-upstream", ("dx",),
            "dx is relu'(x) alone: multiply it by the upstream gradient dy (chain rule)", _relu_grad_alone),
    Mistake("relu", "relu", "relu-times-output", ("dx",),
            "dx = dy ⊙ relu(x): the derivative of relu is the indicator [x > 0], not relu(x) itself",
            _relu_times_output),
    Mistake("gelu", "gelu", "gelu-other-approximation", ("out", "dx"),
            "this is the other GELU form: `approximate=\"none\"` is x Φ(x) with erf, `\"tanh\"` the "
            "GPT-2 tanh approximation; follow the argument",
            _gelu_other_form),
    Mistake("gelu", "gelu", "gelu-phi-only", ("dx",),
            "dx = dy ⊙ Φ(x) misses the second term of the product rule: gelu'(x) = Φ(x) + x φ(x) "
            "(tanh form: σ(2u) + x σ(2u)(1 - σ(2u)) 2u')",
            _gelu_phi_only),
    Mistake("gelu", "gelu", "gelu-no-upstream", ("dx",),
            "dx is gelu'(x) alone: multiply it by the upstream gradient dy (chain rule)", _gelu_grad_alone),
    Mistake("gelu", "gelu", "gelu-x-phi-only", ("dx",),
            "dx = dy ⊙ x φ(x) misses the first term of the product rule: gelu'(x) = Φ(x) + x φ(x) "
            "(tanh form: σ(2u) + x σ(2u)(1 - σ(2u)) 2u')",
            _gelu_second_term_only),
    Mistake("gelu", "gelu", "gelu-product-rule-minus", ("dx",),
            "the product rule's second term is subtracted: gelu'(x) = Φ(x) + x φ(x) "
            "(tanh form: σ(2u) + x σ(2u)(1 - σ(2u)) 2u'), a plus",
            _gelu_product_rule_minus),
    Mistake("gelu", "gelu", "gelu-pdf-unnormalised", ("dx",),
            "φ(x) lacks its normalisation: the standard normal density is φ(x) = exp(-x²/2) / √(2π)",
            lambda inp: _gelu_exact_pdf(inp, normalised=False)),
    Mistake("gelu", "gelu", "gelu-pdf-exponent", ("dx",),
            "φ(x) has exp(-x²): the standard normal density is φ(x) = exp(-x²/2) / √(2π), a half in the "
            "exponent",
            lambda inp: _gelu_exact_pdf(inp, half=1.0)),
    Mistake("gelu", "gelu", "gelu-erf-no-sqrt2", ("out", "dx"),
            "Φ(x) is computed as (1 + erf(x))/2 or (1 + erf(√2 x))/2: the normal CDF is "
            "Φ(x) = (1 + erf(x/√2))/2, x divided by √2",
            _gelu_erf_no_sqrt2),
    Mistake("gelu", "gelu", "gelu-cdf-sign", ("out", "dx"),
            "Φ(x) is computed as Φ(-x): Φ(x) = ½ erfc(-x/√2) = ½ (1 + erf(x/√2)), so erfc takes -x/√2 "
            "(½ erfc(x/√2) is 1 - Φ(x))",
            lambda inp: _gelu_exact_cdf(inp, sign=-1.0)),
    Mistake("gelu", "gelu", "gelu-cdf-no-half", ("out", "dx"),
            "Φ(x) misses its ½: Φ(x) = ½ erfc(-x/√2) = ½ (1 + erf(x/√2)), between 0 and 1",
            lambda inp: _gelu_exact_cdf(inp, half=1.0)),
    Mistake("gelu", "gelu", "gelu-pdf-for-cdf", ("out",),
            "out = x φ(x) uses the density: GELU weighs x by the normal CDF, y = x Φ(x), Φ(x) = ½ erfc(-x/√2)",
            _gelu_pdf_for_cdf),
    Mistake("gelu", "gelu", "gelu-pdf-sign", ("dx",),
            "φ(x) has exp(+x²/2): the standard normal density is φ(x) = exp(-x²/2) / √(2π), a minus in the "
            "exponent",
            lambda inp: _gelu_exact_pdf(inp, half=-0.5)),
    Mistake("gelu", "gelu", "gelu-dx-no-x", ("dx",),
            "the second term of gelu'(x) misses its x: gelu'(x) = Φ(x) + x φ(x) (tanh form: "
            "σ(2u) + x σ(2u)(1 - σ(2u)) 2u'), the product rule on y = x Φ(x)",
            _gelu_dx_no_x),
    Mistake("gelu", "gelu", "gelu-derivative-other-form", ("dx",),
            "dx uses the derivative of the other GELU form: the forward's form is `approximate`'s, and so is "
            "its derivative (\"none\": Φ(x) + x φ(x); \"tanh\": σ(2u) + x σ(2u)(1 - σ(2u)) 2u')",
            _gelu_other_derivative),
    Mistake("gelu", "gelu", "gelu-tanh-half", ("out", "dx"),
            "the factor of x is σ(u) or tanh u: the tanh form is ½ x (1 + tanh u) = x σ(2u), "
            "u = √(2/π)(x + 0.044715 x³), so σ takes 2u",
            _gelu_tanh_half),
    Mistake("gelu", "gelu", "gelu-tanh-no-sqrt-2-over-pi", ("out", "dx"),
            "u misses √(2/π): u = √(2/π)(x + 0.044715 x³), and 2u' = 2√(2/π)(1 + 3·0.044715 x²)",
            _gelu_tanh_no_c),
    Mistake("gelu", "gelu", "gelu-tanh-cubic", ("out", "dx"),
            "u's cubic term is wrong: u = √(2/π)(x + 0.044715 x³), a cube with the coefficient 0.044715",
            _gelu_tanh_cubic),
    Mistake("gelu", "gelu", "gelu-tanh-du", ("dx",),
            "2u', the chain rule's factor, is wrong: the derivative of 2u = 2√(2/π)(x + 0.044715 x³) is "
            "2u' = 2√(2/π)(1 + 3·0.044715 x²), in gelu'(x) = σ(2u) + x σ(2u)(1 - σ(2u)) · 2u'",
            _gelu_tanh_du),
    Mistake("gelu", "gelu", "gelu-tanh-sigmoid-derivative", ("dx",),
            "the sigmoid's derivative is wrong: σ'(z) = σ(z)(1 - σ(z)), so "
            "gelu'(x) = σ(2u) + x σ(2u)(1 - σ(2u)) 2u' (from ½ x (1 + tanh u): d tanh u / du = 1 - tanh² u)",
            _gelu_tanh_slope),
)


# ------------------------------------------------------------------ softmax, log-softmax
def _softmax(x, axis=-1):
    m = np.max(x, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    e = np.exp(x - m)
    s = e.sum(axis=axis, keepdims=True)
    return np.divide(e, s, out=np.zeros_like(e), where=s > 0)


def _softmax_backwards(inp):
    x, dy = _x(inp), _g(inp)
    y = _softmax(x)
    return {"no-y": y * (dy - dy.sum(-1, keepdims=True)),
            "mean": y * (dy - (dy * y).mean(-1, keepdims=True)),
            "no-outer-y": dy - (dy * y).sum(-1, keepdims=True),
            "no-sum": y * dy,
            "sign": y * (dy + (dy * y).sum(-1, keepdims=True)),
            "diag": dy * y * (1 - y)}


def _pick(fn, key, tensor="dx"):
    return lambda inp: {tensor: fn(inp)[key]}


def _softmax_wrong_axis(inp):
    x = _x(inp)
    return {"out": _softmax(x, axis=-2)} if x.ndim >= 2 else {}


def _log_softmax_variants(inp):
    x, dz = _x(inp), _g(inp)
    m = x.max(-1, keepdims=True)
    lse = np.log(np.exp(x - m).sum(-1, keepdims=True))
    p = _softmax(x)
    return {"no-lse": x - m, "no-max-back": x - lse,
            "no-sum": dz - p * dz, "const": dz, "sign": dz + p * dz.sum(-1, keepdims=True)}


SOFTMAX = (
    Mistake("softmax", "softmax", "softmax-wrong-axis", ("out",),
            "the softmax normalises along the wrong axis: each slice along the last axis (axis=-1) must sum to 1",
            _softmax_wrong_axis),
    Mistake("softmax", "softmax", "softmax-no-y-in-sum", ("dx",),
            "the sum in dx = y ⊙ (dy - Σ_j dy_j y_j) is missing its y: you summed dy alone",
            _pick(_softmax_backwards, "no-y")),
    Mistake("softmax", "softmax", "softmax-sum-is-mean", ("dx",),
            "the sum term is a MEAN: dx = y ⊙ (dy - Σ_j dy_j y_j), the sum over the row (not divided by n)",
            _pick(_softmax_backwards, "mean")),
    Mistake("softmax", "softmax", "softmax-no-outer-y", ("dx",),
            "dx = dy - Σ_j dy_j y_j misses the factor y: dx = y ⊙ (dy - Σ_j dy_j y_j)",
            _pick(_softmax_backwards, "no-outer-y")),
    Mistake("softmax", "softmax", "softmax-no-sum-term", ("dx",),
            "dx = y ⊙ dy: the term - y ⊙ Σ_j dy_j y_j (from the normalisation) is missing",
            _pick(_softmax_backwards, "no-sum")),
    Mistake("softmax", "softmax", "softmax-sum-term-sign", ("dx",),
            "the sum term has the wrong sign: dx = y ⊙ (dy - Σ_j dy_j y_j), a minus",
            _pick(_softmax_backwards, "sign")),
    Mistake("softmax", "softmax", "softmax-diagonal-only", ("dx",),
            "dx = dy ⊙ y(1 - y) keeps only the diagonal of the Jacobian; the off-diagonal entries "
            "-y_i y_j add up to - y ⊙ Σ_j dy_j y_j",
            _pick(_softmax_backwards, "diag")),
    Mistake("cross_entropy", "log_softmax", "log_softmax-no-logsumexp", ("out",),
            "z = x - max(x) is only the shift: subtract log Σ exp(x - max) too",
            _pick(_log_softmax_variants, "no-lse", "out")),
    Mistake("cross_entropy", "log_softmax", "log_softmax-max-not-added-back", ("out",),
            "z = x - log Σ exp(x - max) forgets the max: log Σ exp(x) = max + log Σ exp(x - max)",
            _pick(_log_softmax_variants, "no-max-back", "out")),
    Mistake("cross_entropy", "log_softmax", "log_softmax-no-sum", ("dx",),
            "dx = dz - softmax ⊙ dz: the softmax must multiply the SUM of dz over the row, "
            "dx = dz - softmax(x) ⊙ Σ_j dz_j",
            _pick(_log_softmax_variants, "no-sum")),
    Mistake("cross_entropy", "log_softmax", "log_softmax-lse-constant", ("dx",),
            "dx = dz treats log Σ exp(x) as a constant: it depends on x, and gives - softmax(x) ⊙ Σ_j dz_j",
            _pick(_log_softmax_variants, "const")),
    Mistake("cross_entropy", "log_softmax", "log_softmax-sign", ("dx",),
            "the softmax term has the wrong sign: dx = dz - softmax(x) ⊙ Σ_j dz_j",
            _pick(_log_softmax_variants, "sign")),
)


# ------------------------------------------------------------------ cross-entropy
def _cross_entropy(inp, *, denom="kept", classes="V", smoothing=None, keep_ignored=False,
                   upstream=True, backward_smoothing=None, backward_classes=None):
    """(L, dlogits) of a cross-entropy with one convention changed."""
    z = _rows(_x(inp, "logits"))
    t = np.asarray(inp["targets"]).reshape(-1)
    eps = float(inp.get("smoothing", 0.0)) if smoothing is None else smoothing
    eps_b = eps if backward_smoothing is None else backward_smoothing
    keep = t != inp.get("ignore_index", -100)
    safe = np.where(keep, t, 0)
    N, V = z.shape
    logp = z - z.max(-1, keepdims=True)
    logp = logp - np.log(np.exp(logp).sum(-1, keepdims=True))
    onehot = np.eye(V)[safe]

    def q_of(e, spread=classes):
        if spread == "V-1":
            return (1 - e) * onehot + e / (V - 1) * (1 - onehot)
        if spread == "every":                      # ε on every class: a sum where the mean belongs
            return (1 - e) * onehot + e
        return (1 - e) * onehot + e / V
    n = {"kept": max(int(keep.sum()), 1), "all": N, "sum": 1}[denom]
    per = -(q_of(eps) * logp).sum(-1)
    L = (per * keep).sum() / n if keep.any() or denom != "kept" else 0.0
    g = float(np.asarray(inp["upstream"])) if upstream else 1.0
    rows = np.ones(N) if keep_ignored else keep.astype(np.float64)
    dz = (np.exp(logp) - q_of(eps_b, backward_classes or classes)) * (rows * g / n)[:, None]
    return {"out": np.asarray(L), "dlogits": dz.reshape(np.shape(inp["logits"]))}


def _has_ignored(inp):
    return np.any(np.asarray(inp["targets"]) == inp.get("ignore_index", -100))


def _smoothed(inp):
    return float(inp.get("smoothing", 0.0)) > 0


CROSS_ENTROPY = (
    Mistake("cross_entropy", "cross_entropy", "ce-smoothing-over-V-1", ("out", "dlogits"),
            "label smoothing spread over the V - 1 other classes: the convention puts ε/V on EVERY class, "
            "the target included, q = (1 - ε) onehot(y) + ε/V",
            lambda inp: _cross_entropy(inp, classes="V-1") if _smoothed(inp) else {}),
    Mistake("cross_entropy", "cross_entropy", "ce-mean-over-all-targets", ("out", "dlogits"),
            "the mean divides by every target, ignored ones included: divide by N_kept, the number of "
            "targets that are not ignore_index",
            lambda inp: _cross_entropy(inp, denom="all") if _has_ignored(inp) else {}),
    Mistake("cross_entropy", "cross_entropy", "ce-sum-not-mean", ("out", "dlogits"),
            "this is the sum over the kept targets; the loss is their mean (divide by N_kept)",
            lambda inp: _cross_entropy(inp, denom="sum")),
    Mistake("cross_entropy", "cross_entropy", "ce-smoothing-ignored", ("out", "dlogits"),
            "label smoothing is ignored: with smoothing ε the target distribution is "
            "(1 - ε) onehot(y) + ε/V",
            lambda inp: _cross_entropy(inp, smoothing=0.0) if _smoothed(inp) else {}),
    Mistake("cross_entropy", "cross_entropy", "ce-backward-smoothing-ignored", ("dlogits",),
            "the backward ignores label smoothing: dlogits = softmax - q with q = (1 - ε) onehot(y) + ε/V",
            lambda inp: _cross_entropy(inp, backward_smoothing=0.0) if _smoothed(inp) else {}),
    Mistake("cross_entropy", "cross_entropy", "ce-ignored-rows-get-gradient", ("dlogits",),
            "the ignored targets' rows get a gradient: their rows of dlogits must be 0 (they are not in the loss)",
            lambda inp: _cross_entropy(inp, keep_ignored=True) if _has_ignored(inp) else {}),
    Mistake("cross_entropy", "cross_entropy", "ce-no-upstream", ("dlogits",),
            "dlogits is not multiplied by the upstream dloss (chain rule: dlogits = dloss · (softmax - q) / N_kept)",
            lambda inp: _cross_entropy(inp, upstream=False)),
    Mistake("cross_entropy", "cross_entropy", "ce-smoothing-summed", ("out",),
            "the smoothing term SUMS -log p_c over the classes: it is their MEAN, ε · (1/V) Σ_c (-log p_c) "
            "(q puts ε/V on every class)",
            lambda inp: {"out": _cross_entropy(inp, classes="every", backward_classes="V")["out"]}
            if _smoothed(inp) else {}),
    Mistake("cross_entropy", "cross_entropy", "ce-backward-smoothing-not-spread", ("dlogits",),
            "the backward's q puts ε on every class: spread it, q = (1 - ε) onehot(y) + ε/V, so "
            "dlogits = softmax - q",
            lambda inp: _cross_entropy(inp, backward_classes="every") if _smoothed(inp) else {}),
)


# ------------------------------------------------------------------ LayerNorm, RMSNorm
def _layernorm(inp, *, ddof=0, eps_outside=False, root=np.sqrt):
    x, gamma = _x(inp), _x(inp, "gamma")
    beta = _x(inp, "beta") if "beta" in inp else 0.0
    eps = float(inp.get("eps", 1e-5))
    mu = x.mean(-1, keepdims=True)
    var = x.var(-1, keepdims=True, ddof=ddof)
    xhat = (x - mu) / (root(var) + eps) if eps_outside else (x - mu) / root(var + eps)
    return {"out": xhat * gamma + beta}


def _layernorm_backwards(inp):
    x, gamma, dy = _x(inp), _x(inp, "gamma"), _g(inp)
    eps = float(inp.get("eps", 1e-5))
    mu = x.mean(-1, keepdims=True)
    rstd = 1 / np.sqrt(x.var(-1, keepdims=True) + eps)
    xhat = (x - mu) * rstd
    dxhat = dy * gamma
    m1 = dxhat.mean(-1, keepdims=True)
    m2 = (dxhat * xhat).mean(-1, keepdims=True)
    return {"no-means": {"dx": dxhat * rstd},
            "no-mean": {"dx": rstd * (dxhat - xhat * m2)},
            "no-xhat-mean": {"dx": rstd * (dxhat - m1)},
            "no-gamma": {"dx": rstd * (dy - dy.mean(-1, keepdims=True) - xhat * (dy * xhat).mean(-1, keepdims=True))},
            "dgamma-no-xhat": {"dgamma": _rows(dy).sum(0)},
            "dgamma-x": {"dgamma": _rows(dy * x).sum(0)},
            "mean-params": {"dgamma": _rows(dy * xhat).mean(0), "dbeta": _rows(dy).mean(0)},
            "signs": [{"dx": rstd * (dxhat + a * m1 + b * xhat * m2)}          # a family: either sign,
                      for a, b in ((1, -1), (-1, 1), (1, 1))]}                 # or both, flipped


def _rmsnorm(inp, *, eps_outside=False, sum_squares=False, root=np.sqrt):
    x, gamma = _x(inp), _x(inp, "gamma")
    eps = float(inp.get("eps", 1e-6))
    ms = (x * x).sum(-1, keepdims=True) if sum_squares else (x * x).mean(-1, keepdims=True)
    rms = root(ms) + eps if eps_outside else root(ms + eps)
    return {"out": x / rms * gamma}


def _rmsnorm_backwards(inp):
    x, gamma, dy = _x(inp), _x(inp, "gamma"), _g(inp)
    eps = float(inp.get("eps", 1e-6))
    rstd = 1 / np.sqrt((x * x).mean(-1, keepdims=True) + eps)
    xhat = x * rstd
    dxhat = dy * gamma
    return {"const": {"dx": dxhat * rstd},
            "sign": {"dx": rstd * (dxhat + xhat * (dxhat * xhat).mean(-1, keepdims=True))},
            "no-gamma": {"dx": rstd * (dy - xhat * (dy * xhat).mean(-1, keepdims=True))},
            "dgamma-x": {"dgamma": _rows(dy * x).sum(0)},
            "dgamma-no-xhat": {"dgamma": _rows(dy).sum(0)},
            "centred": {"out": _layernorm(dict(inp, eps=eps))["out"] - 0.0}}


def _sub(fn, key):
    return lambda inp: fn(inp)[key]


NORMS = (
    Mistake("layernorm", "layernorm", "layernorm-unbiased-variance", ("out",),
            "the variance is the unbiased one (divided by C - 1): LayerNorm uses the biased variance, "
            "mean((x - μ)²) over the C features",
            lambda inp: _layernorm(inp, ddof=1)),
    Mistake("layernorm", "layernorm", "layernorm-eps-outside-sqrt", ("out",),
            "eps is added outside the square root: xhat = (x - μ) / √(σ² + eps)",
            lambda inp: _layernorm(inp, eps_outside=True)),
    Mistake("layernorm", "layernorm", "layernorm-no-sqrt", ("out",),
            "x - μ is divided by the variance: divide by the standard deviation, xhat = (x - μ) / √(σ² + eps)",
            lambda inp: _layernorm(inp, root=lambda v: v)),
    Mistake("layernorm", "layernorm", "layernorm-not-scaled", ("out",),
            "x is centred but not divided by its standard deviation: xhat = (x - μ) / √(σ² + eps)",
            lambda inp: {"out": (_x(inp) - _x(inp).mean(-1, keepdims=True)) * _x(inp, "gamma")
                         + (_x(inp, "beta") if "beta" in inp else 0.0)}),
    Mistake("layernorm", "layernorm", "layernorm-no-mean-terms", ("dx",),
            "dx = dxhat · rstd treats μ and σ as constants: both mean terms are missing, "
            "dx = rstd · (dxhat - mean(dxhat) - xhat ⊙ mean(dxhat ⊙ xhat))",
            _sub(_layernorm_backwards, "no-means")),
    Mistake("layernorm", "layernorm", "layernorm-no-mean-dxhat", ("dx",),
            "dx misses the term - mean(dxhat) (the gradient through μ): "
            "dx = rstd · (dxhat - mean(dxhat) - xhat ⊙ mean(dxhat ⊙ xhat))",
            _sub(_layernorm_backwards, "no-mean")),
    Mistake("layernorm", "layernorm", "layernorm-no-xhat-mean", ("dx",),
            "dx misses the term - xhat ⊙ mean(dxhat ⊙ xhat) (the gradient through σ²): "
            "dx = rstd · (dxhat - mean(dxhat) - xhat ⊙ mean(dxhat ⊙ xhat))",
            _sub(_layernorm_backwards, "no-xhat-mean")),
    Mistake("layernorm", "layernorm", "layernorm-mean-term-sign", ("dx",),
            "a mean term of dx has the wrong sign: both are subtracted, "
            "dx = rstd · (dxhat - mean(dxhat) - xhat ⊙ mean(dxhat ⊙ xhat))",
            _sub(_layernorm_backwards, "signs")),
    Mistake("layernorm", "layernorm", "layernorm-dx-no-gamma", ("dx",),
            "dx forgets gamma: the gradient reaching xhat is dxhat = dy ⊙ gamma",
            _sub(_layernorm_backwards, "no-gamma")),
    Mistake("layernorm", "layernorm", "layernorm-dgamma-no-xhat", ("dgamma",),
            "dgamma = Σ dy misses xhat: y = xhat ⊙ gamma + beta gives dgamma = Σ_rows dy ⊙ xhat",
            _sub(_layernorm_backwards, "dgamma-no-xhat")),
    Mistake("layernorm", "layernorm", "layernorm-dgamma-x", ("dgamma",),
            "dgamma uses x where xhat belongs: dgamma = Σ_rows dy ⊙ xhat (the normalised input)",
            _sub(_layernorm_backwards, "dgamma-x")),
    Mistake("layernorm", "layernorm", "layernorm-params-averaged", ("dgamma", "dbeta"),
            "dgamma/dbeta are averaged over the rows: parameters shared by every row get the SUM of the "
            "rows' gradients",
            _sub(_layernorm_backwards, "mean-params")),
    Mistake("rmsnorm", "rmsnorm", "rmsnorm-eps-outside-sqrt", ("out",),
            "eps is added outside the square root: rms = √(mean(x²) + eps)",
            lambda inp: _rmsnorm(inp, eps_outside=True)),
    Mistake("rmsnorm", "rmsnorm", "rmsnorm-sum-of-squares", ("out",),
            "the root is of the SUM of squares: RMSNorm divides by √(MEAN(x²) + eps), the mean over C",
            lambda inp: _rmsnorm(inp, sum_squares=True)),
    Mistake("rmsnorm", "rmsnorm", "rmsnorm-no-sqrt", ("out",),
            "x is divided by the mean square: divide by its square root, rms = √(mean(x²) + eps)",
            lambda inp: _rmsnorm(inp, root=lambda v: v)),
    Mistake("rmsnorm", "rmsnorm", "rmsnorm-centred", ("out",),
            "x is centred (its mean subtracted): that is LayerNorm; RMSNorm divides x itself by √(mean(x²) + eps)",
            _sub(_rmsnorm_backwards, "centred")),
    Mistake("rmsnorm", "rmsnorm", "rmsnorm-rms-constant", ("dx",),
            "dx = dy ⊙ gamma · rstd treats the rms as a constant: it depends on x too, "
            "dx = rstd · (dxhat - xhat ⊙ mean(dxhat ⊙ xhat))",
            _sub(_rmsnorm_backwards, "const")),
    Mistake("rmsnorm", "rmsnorm", "rmsnorm-mean-term-sign", ("dx",),
            "the term xhat ⊙ mean(dxhat ⊙ xhat) is added: it is subtracted, "
            "dx = rstd · (dxhat - xhat ⊙ mean(dxhat ⊙ xhat))",
            _sub(_rmsnorm_backwards, "sign")),
    Mistake("rmsnorm", "rmsnorm", "rmsnorm-dx-no-gamma", ("dx",),
            "dx forgets gamma: the gradient reaching xhat is dxhat = dy ⊙ gamma",
            _sub(_rmsnorm_backwards, "no-gamma")),
    Mistake("rmsnorm", "rmsnorm", "rmsnorm-dgamma-no-xhat", ("dgamma",),
            "dgamma = Σ dy misses xhat: y = xhat ⊙ gamma gives dgamma = Σ_rows dy ⊙ xhat",
            _sub(_rmsnorm_backwards, "dgamma-no-xhat")),
    Mistake("rmsnorm", "rmsnorm", "rmsnorm-dgamma-x", ("dgamma",),
            "dgamma uses x where xhat belongs: dgamma = Σ_rows dy ⊙ xhat, xhat = x · rstd",
            _sub(_rmsnorm_backwards, "dgamma-x")),
)


# ------------------------------------------------------------------ embedding, dropout (one tuple)
def _embedding_fancy(inp):
    ids, dout = np.asarray(inp["ids"]).reshape(-1), _rows(_g(inp))
    W = _x(inp, "W")
    dW = np.zeros_like(W)
    dW[ids] += dout                  # the buggy line itself: repeated ids keep only their last row
    return {"dW": dW}


def _dropout(inp, *, scale=None, mask=None, backward_scale=None, backward_mask=True):
    x, dy = _x(inp), _g(inp)
    p = float(inp["p_drop"])
    m = (np.asarray(inp["mask"]) if mask is None else mask).astype(np.float64)
    s = 1 / (1 - p) if scale is None else scale
    sb = s if backward_scale is None else backward_scale
    return {"out": x * m * s, "dx": dy * (m if backward_mask else 1.0) * sb}


def _mask_given(inp):
    return inp.get("mask") is not None and inp.get("training", True)


DROPOUT = (
    Mistake("embedding", "embedding", "embedding-fancy-index-add", ("dW",),
            "a repeated id keeps only ONE of its rows: `dW[ids] += dout` with repeated ids writes each "
            "row once (fancy indexing does not accumulate); use np.add.at(dW, ids, dout)",
            _embedding_fancy),
    Mistake("dropout", "dropout", "dropout-no-scaling", ("out", "dx"),
            "the kept entries are not scaled: inverted dropout multiplies them by 1/(1 - p_drop)",
            lambda inp: _dropout(inp, scale=1.0) if _mask_given(inp) else {}),
    Mistake("dropout", "dropout", "dropout-scaled-by-keep-probability", ("out", "dx"),
            "the kept entries are multiplied by (1 - p_drop); inverted dropout DIVIDES by it",
            lambda inp: _dropout(inp, scale=1 - float(inp["p_drop"])) if _mask_given(inp) else {}),
    Mistake("dropout", "dropout", "dropout-mask-inverted", ("out", "dx"),
            "the mask is inverted: True in `mask` means KEEP the entry (p_drop is the probability of dropping)",
            lambda inp: _dropout(inp, mask=~np.asarray(inp["mask"])) if _mask_given(inp) else {}),
    Mistake("dropout", "dropout", "dropout-backward-unmasked", ("dx",),
            "dx is not masked: the dropped entries had no effect on y, so their gradient is 0 (dx = dy ⊙ m / (1 - p_drop))",
            lambda inp: _dropout(inp, backward_mask=False) if _mask_given(inp) else {}),
    Mistake("dropout", "dropout", "dropout-backward-unscaled", ("dx",),
            "dx is not scaled: the forward multiplied the kept entries by 1/(1 - p_drop), so does the backward",
            lambda inp: _dropout(inp, backward_scale=1.0) if _mask_given(inp) else {}),
    Mistake("dropout", "dropout", "dropout-no-upstream", ("dx",),
            "dx = m / (1 - p_drop) alone: multiply by the upstream gradient dy (chain rule)",
            lambda inp: {"dx": _dropout(dict(inp, upstream=np.ones_like(_g(inp))))["dx"]}
            if _mask_given(inp) else {}),
    Mistake("dropout", "dropout", "dropout-own-mask", ("out", "dx"),
            "the entries kept are not those of `mask`: when a mask is given, use it instead of drawing one",
            match=other_mask),
    Mistake("dropout", "dropout", "dropout-in-eval", ("out", "dx"),
            "training=False must be the identity (y = x, dx = dy): no entry is dropped or scaled in eval",
            match=dropout_in_eval),
)


# ------------------------------------------------------------------ attention
def _attention(inp, *, scale_power=1.0, use_mask=True, invert_mask=False, use_bias=True,
               dropout="right", axis=-1, backward_scale=True):
    """(out, dq, dk, dv[, dbias]) of attention with one thing changed, written out in float64."""
    q, k, v, dout = _x(inp, "q"), _x(inp, "k"), _x(inp, "v"), _g(inp)
    D = q.shape[-1]
    c = D ** (-0.5 * scale_power)
    scores = q @ k.swapaxes(-1, -2) * c
    if use_bias and inp.get("bias") is not None:
        scores = scores + _x(inp, "bias")
    mask = inp.get("mask")
    if use_mask and mask is not None:
        scores = np.where(~np.asarray(mask) if invert_mask else np.asarray(mask), scores, -np.inf)
    P = _softmax(scores, axis=axis)
    p_drop, drop = float(inp.get("p_drop", 0.0)), inp.get("drop_mask")
    keep = 1.0 if drop is None or dropout == "ignored" else np.asarray(drop) / (
        1.0 if dropout == "unscaled" else 1 - p_drop)
    keep_b = 1.0 if dropout == "backward-ignored" else keep
    out = (P * keep) @ v
    dv = (P * keep_b).swapaxes(-1, -2) @ dout
    dP = (dout @ v.swapaxes(-1, -2)) * keep_b
    dS = P * (dP - (dP * P).sum(-1, keepdims=True)) if axis == -1 else \
        P * (dP - (dP * P).sum(-2, keepdims=True))
    cb = c if backward_scale else 1.0
    dq = dS @ k * cb
    dk = dS.swapaxes(-1, -2) @ q * cb
    result = {"out": out, "dq": dq, "dk": dk, "dv": dv}
    if inp.get("bias") is not None:
        bias_shape = np.shape(inp["bias"])
        result["dbias"] = sum_to(dS, bias_shape)
    return result


def _dropout_given(inp):
    return inp.get("drop_mask") is not None and float(inp.get("p_drop", 0.0)) > 0


_QKV = ("out", "dq", "dk", "dv", "dbias")

ATTENTION = (
    Mistake("attention", "attention", "attention-no-scale", _QKV,
            "the scores are not scaled: scores = Q Kᵀ / √D (the 1/√D keeps them from saturating the softmax)",
            lambda inp: _attention(inp, scale_power=0.0)),
    Mistake("attention", "attention", "attention-scale-1-over-D", _QKV,
            "the scores are divided by D; the scale is 1/√D",
            lambda inp: _attention(inp, scale_power=2.0)),
    Mistake("attention", "attention", "attention-backward-no-scale", ("dq", "dk"),
            "dq and dk miss the forward's 1/√D (they are √D too large): dq = dscores K / √D, dk = dscoresᵀ Q / √D",
            lambda inp: _attention(inp, backward_scale=False)),
    Mistake("attention", "attention", "attention-mask-ignored", _QKV,
            "the mask is ignored: set the scores of hidden keys (mask False) to -inf before the softmax",
            lambda inp: _attention(inp, use_mask=False) if inp.get("mask") is not None else {}),
    Mistake("attention", "attention", "attention-mask-inverted", _QKV,
            "the mask is inverted: True means the query MAY attend the key; hide the keys where it is False",
            lambda inp: _attention(inp, invert_mask=True) if inp.get("mask") is not None else {}),
    Mistake("attention", "attention", "attention-bias-ignored", _QKV,
            "the bias is ignored: it is added to the scores before the mask and the softmax",
            lambda inp: _attention(inp, use_bias=False) if inp.get("bias") is not None else {}),
    Mistake("attention", "attention", "attention-softmax-over-queries", _QKV,
            "the softmax runs over the queries (axis -2); each query's weights over its keys (axis -1) sum to 1",
            lambda inp: _attention(inp, axis=-2)),
    Mistake("attention", "attention", "attention-dropout-ignored", _QKV,
            "the dropout mask is ignored: with p_drop > 0 in training, P̃ = P ⊙ drop_mask / (1 - p_drop) "
            "multiplies V",
            lambda inp: _attention(inp, dropout="ignored") if _dropout_given(inp) else {}),
    Mistake("attention", "attention", "attention-dropout-unscaled", _QKV,
            "the kept probabilities are not scaled: P̃ = P ⊙ drop_mask / (1 - p_drop)",
            lambda inp: _attention(inp, dropout="unscaled") if _dropout_given(inp) else {}),
    Mistake("attention", "attention", "attention-dropout-backward-ignored", ("dq", "dk", "dv"),
            "the backward ignores the dropout: dv = P̃ᵀ dout and dP = (dout Vᵀ) ⊙ drop_mask / (1 - p_drop)",
            lambda inp: _attention(inp, dropout="backward-ignored") if _dropout_given(inp) else {}),
    Mistake("attention", "attention", "attention-dbias-not-reduced", ("dbias",),
            "dbias has the scores' shape: sum it over the axes where the bias was broadcast, back to the bias's shape",
            match=dbias_not_reduced),
)


# ------------------------------------------------------------------ repeat_kv (the mha assignment)
def _repeat_kv_tiled(inp):
    """The kv heads tiled (0, 1, 0, 1, ...) instead of repeated (0, 0, 1, 1, ...): forward and backward."""
    x, dout, r = _x(inp), _g(inp), int(inp["r"])
    B, G, S, D = x.shape
    return {"out": np.tile(x, (1, r, 1, 1)), "dx": dout.reshape(B, r, G, S, D).sum(axis=1)}


def _repeat_kv_first_copy(inp):
    """dx takes the gradient of one copy of each kv head (the first of its group), not their sum."""
    dout, r = _g(inp), int(inp["r"])
    return {"dx": dout[:, ::r]}


REPEAT_KV = (
    Mistake("mha", "repeat_kv", "repeat-kv-not-summed", ("dx",),
            "one gradient slice per QUERY head (B, H, S, D): the r = H/G query heads that share a kv head "
            "add their gradients into it, dx (B, G, S, D) = the sum over each group of r copies",
            match=repeat_kv_not_summed),
    Mistake("mha", "repeat_kv", "repeat-kv-tiled", ("out", "dx"),
            "the kv heads are tiled (0, 1, 0, 1, ...) instead of repeated (0, 0, 1, 1, ...): query head h "
            "reads kv head h // r, so the r copies of a kv head sit side by side (np.repeat along the heads "
            "axis, not np.tile), and its gradient sums those r neighbours",
            _repeat_kv_tiled),
    Mistake("mha", "repeat_kv", "repeat-kv-one-copy", ("dx",),
            "dx keeps the gradient of one copy of each kv head: all r copies fed the loss, so dx sums the r "
            "gradients of each group",
            _repeat_kv_first_copy),
)


# ------------------------------------------------------------------ RoPE
def _rope_args(inp, **change):
    args = {"offset": inp.get("offset", 0), "base": inp.get("base", 10000.0),
            "layout": inp.get("layout", "interleaved"), "scale": inp.get("scale", 1.0)}
    args.update(change)
    return args


def _rope_pair(inp, **change):
    x, dy = _x(inp), _g(inp)
    args = _rope_args(inp, **change)
    y, cache = rope_forward(x, **args)
    return {"out": y, "dx": rope_backward(dy, cache)}


def _rope_other_layout(inp):
    return _rope_pair(inp, layout="half" if _rope_args(inp)["layout"] == "interleaved" else "interleaved")


def _rope_direction(inp):
    """Rotated by -mθ in the forward, +mθ in the backward: the two directions swapped."""
    x, dy = _x(inp), _g(inp)
    _, cache = rope_forward(x, **_rope_args(inp))
    return {"out": rope_backward(x, cache), "dx": rope_forward(dy, **_rope_args(inp))[0]}


def _rope_backward_forward(inp):
    return {"dx": rope_forward(_g(inp), **_rope_args(inp))[0]}


# the rotation written out: (y_a, y_b) = (c0 a cos + c1 b sin, c2 a sin + c3 b cos), a = x_a, b = x_b
_FORWARD, _BACKWARD = (1, -1, 1, 1), (1, 1, -1, 1)        # R(mθ) and Rᵀ = R(-mθ)


def _rope_tables(inp, *, theta=None, positions=None):
    """cos, sin (T, D/2) of m·θ_j; theta (j, D, base) -> θ_j and positions (t, offset, scale) -> m
    replace the reference's base^(-2j/D) and (offset + t) / scale."""
    args, x = _rope_args(inp), _x(inp)
    T, D = x.shape[2], x.shape[3]
    t, j = np.arange(T, dtype=np.float64), np.arange(D // 2, dtype=np.float64)
    m = (args["offset"] + t) / args["scale"] if positions is None else positions(t, args["offset"], args["scale"])
    th = args["base"] ** (-2 * j / D) if theta is None else theta(j, D, args["base"])
    angle = m[:, None] * th[None, :]                        # (T, D/2)
    return np.cos(angle), np.sin(angle)


def _rotate(a, cos, sin, layout, c):
    half = a.shape[-1] // 2
    pa, pb = (a[..., 0::2], a[..., 1::2]) if layout == "interleaved" else (a[..., :half], a[..., half:])
    out = np.empty_like(a)
    oa, ob = (out[..., 0::2], out[..., 1::2]) if layout == "interleaved" else (out[..., :half], out[..., half:])
    oa[...] = c[0] * pa * cos + c[1] * pb * sin
    ob[...] = c[2] * pa * sin + c[3] * pb * cos
    return out


def _rope_with(inp, cos, sin, forward=_FORWARD, backward=_BACKWARD, backward_tables=None):
    """{out, dx} of a rotation with these tables and these signs (the backward's tables: the forward's)."""
    layout = _rope_args(inp)["layout"]
    bcos, bsin = backward_tables or (cos, sin)
    return {"out": _rotate(_x(inp), cos, sin, layout, forward), "dx": _rotate(_g(inp), bcos, bsin, layout, backward)}


def _one_line_slips(c):
    """The signs c with one line of the rotation written wrong (a term dropped or its sign flipped, or
    both terms changed), the other line right: 7 for each line."""
    return [c[:line] + (p, q) + c[line + 2:] for line in (0, 2) for p in (-1, 0, 1) for q in (-1, 0, 1)
            if (p, q) != (0, 0) and c[:line] + (p, q) + c[line + 2:] != c]


def _rope_term(inp):
    cos, sin = _rope_tables(inp)
    return [{"out": _rope_with(inp, cos, sin, forward=c)["out"]} for c in _one_line_slips(_FORWARD)]


def _rope_backward_term(inp):
    cos, sin = _rope_tables(inp)
    return [{"dx": _rope_with(inp, cos, sin, backward=c)["dx"]} for c in _one_line_slips(_BACKWARD)]


def _rope_cos_sin_swapped(inp):
    cos, sin = _rope_tables(inp)
    return [_rope_with(inp, sin, cos),                                       # the tables swapped
            {"dx": _rope_with(inp, cos, sin, backward_tables=(sin, cos))["dx"]}]  # the backward reads them swapped


def _rope_theta(inp):
    """θ_j's exponent slipped: base^(-j/D), base^(-2j/(D/2)), base^(-2j), base^(-(2j+1)/D), θ_j = 1."""
    slips = (lambda j, D, b: b ** (-j / D), lambda j, D, b: b ** (-4 * j / D), lambda j, D, b: b ** (-2 * j),
             lambda j, D, b: b ** (-(2 * j + 1) / D), lambda j, D, b: np.ones_like(j))
    return [_rope_with(inp, *_rope_tables(inp, theta=th)) for th in slips]


def _rope_frequency_inverted(inp):
    return _rope_with(inp, *_rope_tables(inp, theta=lambda j, D, b: b ** (2 * j / D)))


def _rope_scale_multiplied(inp):
    if _rope_args(inp)["scale"] == 1.0:
        return {}
    return _rope_with(inp, *_rope_tables(inp, positions=lambda t, offset, scale: (offset + t) * scale))


ROPE = (
    Mistake("rope", "rope", "rope-direction", ("out", "dx"),
            "the rotation runs the wrong way: y_a = x_a cos(mθ) - x_b sin(mθ), y_b = x_a sin(mθ) + x_b cos(mθ) "
            "(and the backward rotates by -mθ)",
            _rope_direction),
    Mistake("rope", "rope", "rope-backward-forward-rotation", ("dx",),
            "dx rotates dy FORWARD by mθ: the inverse of a rotation is its transpose, the rotation by -mθ",
            _rope_backward_forward),
    Mistake("rope", "rope", "rope-layout-ignored", ("out", "dx"),
            "the layout is ignored: \"interleaved\" pairs (2j, 2j+1), \"half\" pairs (j, j + D/2)",
            _rope_other_layout),
    Mistake("rope", "rope", "rope-scale-ignored", ("out", "dx"),
            "`scale` is ignored: position interpolation rotates position t by the angle (t / scale)·θ_j",
            lambda inp: _rope_pair(inp, scale=1.0) if _rope_args(inp)["scale"] != 1.0 else {}),
    Mistake("rope", "rope", "rope-offset-ignored", ("out", "dx"),
            "`offset` is ignored: x[:, :, t] sits at position offset + t",
            lambda inp: _rope_pair(inp, offset=0) if _rope_args(inp)["offset"] else {}),
    Mistake("rope", "rope", "rope-theta-exponent", ("out", "dx"),
            "the frequencies' exponent is wrong (base^(-j/D), base^(-2j/(D/2)), base^(-2j), base^(-(2j+1)/D) "
            "or θ_j = 1): "
            "RoFormer's are θ_j = base^(-2j/D), j = 0 .. D/2 - 1, from 1 down to about 1/base",
            _rope_theta),
    Mistake("rope", "rope", "rope-frequency-inverted", ("out", "dx"),
            "the frequencies are base^(+2j/D): θ_j = base^(-2j/D), falling with j from 1 to about 1/base "
            "(the last pairs turn slowest)",
            _rope_frequency_inverted),
    Mistake("rope", "rope", "rope-scale-multiplied", ("out", "dx"),
            "the positions are multiplied by `scale`: position interpolation DIVIDES them, m = (offset + t) / scale "
            "(a longer context squeezed into the trained range of angles)",
            _rope_scale_multiplied),
    Mistake("rope", "rope", "rope-cos-sin-swapped", ("out", "dx"),
            "cos and sin are swapped (in the tables, or where the backward reads them from the cache): "
            "y_a = x_a cos(mθ) - x_b sin(mθ), y_b = x_a sin(mθ) + x_b cos(mθ)",
            _rope_cos_sin_swapped),
    Mistake("rope", "rope", "rope-rotation-term", ("out",),
            "one line of the rotation has a term dropped or a sign wrong: y_a = x_a cos(mθ) - x_b sin(mθ), "
            "y_b = x_a sin(mθ) + x_b cos(mθ), every pair (a, b) of the layout",
            _rope_term),
    Mistake("rope", "rope", "rope-backward-rotation-term", ("dx",),
            "one line of the backward's rotation has a term dropped or a sign wrong: "
            "dx_a = dy_a cos(mθ) + dy_b sin(mθ), dx_b = -dy_a sin(mθ) + dy_b cos(mθ) (Rᵀ, the rotation by -mθ)",
            _rope_backward_term),
)


# ------------------------------------------------------------------ forward-only: masks, tables
def _causal(inp, shift=0, left=False, upper=False):
    T = inp["T"]
    S = T if inp.get("S") is None else inp["S"]
    i = np.arange(T)[:, None] + (0 if left else S - T)
    j = np.arange(S)[None, :]
    return {"out": (j >= i + shift) if upper else (j <= i + shift)}


def _sinusoidal(inp, *, swap=False, exponent_i=False, halves=False, inverted=False):
    L, d = inp["max_len"], inp["d"]
    pos = np.arange(L)[:, None]
    i2 = np.arange(0, d, 2)
    angle = pos / 10000.0 ** ((i2 / 2 if exponent_i else i2) / d * (-1 if inverted else 1))
    sin, cos = (np.cos, np.sin) if swap else (np.sin, np.cos)
    PE = np.empty((L, d))
    if halves:
        h = (d + 1) // 2
        PE[:, :h], PE[:, h:] = sin(angle), cos(angle[:, : d // 2])
    else:
        PE[:, 0::2], PE[:, 1::2] = sin(angle), cos(angle[:, : d // 2])
    return {"out": PE}


FORWARD_ONLY = (
    Mistake("causal_mask", "causal_mask", "causal-left-aligned", ("out",),
            "with S > T keys, the T queries are the LAST T positions: query i sits at i + S - T",
            lambda inp: _causal(inp, left=True) if inp.get("S") not in (None, inp["T"]) else {}),
    Mistake("causal_mask", "causal_mask", "causal-diagonal-hidden", ("out",),
            "off by one: a query may attend its own position (j <= i); this mask hides the diagonal",
            lambda inp: _causal(inp, shift=-1)),
    Mistake("causal_mask", "causal_mask", "causal-one-future-key", ("out",),
            "off by one: the query also sees the next key; it may attend keys j <= i only",
            lambda inp: _causal(inp, shift=1)),
    Mistake("causal_mask", "causal_mask", "causal-upper-triangle", ("out",),
            "this is the upper triangle (the future); True = may attend, so keep j <= i (lower triangle)",
            lambda inp: _causal(inp, upper=True)),
    Mistake("sinusoidal", "sinusoidal_table", "sinusoidal-sin-cos-swapped", ("out",),
            "sin and cos are swapped: PE[pos, 2i] = sin(...), PE[pos, 2i+1] = cos(...)",
            lambda inp: _sinusoidal(inp, swap=True)),
    Mistake("sinusoidal", "sinusoidal_table", "sinusoidal-exponent", ("out",),
            "the exponent uses i/d: the angle is pos / 10000^(2i/d), 2i the even column",
            lambda inp: _sinusoidal(inp, exponent_i=True)),
    Mistake("sinusoidal", "sinusoidal_table", "sinusoidal-halves", ("out",),
            "sin fills the first half and cos the second: the convention interleaves them, "
            "sin in the even columns 2i, cos in the odd ones 2i+1",
            lambda inp: _sinusoidal(inp, halves=True)),
    Mistake("sinusoidal", "sinusoidal_table", "sinusoidal-frequency-inverted", ("out",),
            "the angle is pos · 10000^(2i/d): it is pos / 10000^(2i/d) (the frequencies fall with i, "
            "from 1 down to 1/10000)",
            lambda inp: _sinusoidal(inp, inverted=True)),
)

FUNCTIONAL = (LINEAR + ELEMENTWISE + SOFTMAX + CROSS_ENTROPY + NORMS + DROPOUT + ATTENTION + REPEAT_KV + ROPE
              + FORWARD_ONLY)
