"""gelu: y = x Φ(x) (exact, with erf) or its GPT-2 tanh approximation, and the derivative of each."""
from __future__ import annotations

from functools import partial

import numpy as np

from ...functional.erf import erfc
from ..assignment import Assignment, Mistake, cases, pair
from ..graded import Case
from . import L6
from ._draw import bct
from ._variants import _g, _x


# ------------------------------------------------------------------ the graded inputs
def draw_wide(rng) -> Case:
    """x (4, 8, 16) uniform on ±6, tanh form: the cubic term's share of the derivative shows at |x| > 2, where
    a small tensor of standard normals rarely goes."""
    return Case({"x": rng.uniform(-6.0, 6.0, (4, 8, 16))}, {"approximate": "tanh"})


# ------------------------------------------------------------------ the catalogue
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


MISTAKES = (
    Mistake("gelu", "gelu-other-approximation", ("out", "dx"),
            "this is the other GELU form: `approximate=\"none\"` is x Φ(x) with erf, `\"tanh\"` the "
            "GPT-2 tanh approximation; follow the argument",
            _gelu_other_form),
    Mistake("gelu", "gelu-phi-only", ("dx",),
            "dx = dy ⊙ Φ(x) misses the second term of the product rule: gelu'(x) = Φ(x) + x φ(x) "
            "(tanh form: σ(2u) + x σ(2u)(1 - σ(2u)) 2u')",
            _gelu_phi_only),
    Mistake("gelu", "gelu-no-upstream", ("dx",),
            "dx is gelu'(x) alone: multiply it by the upstream gradient dy (chain rule)", _gelu_grad_alone),
    Mistake("gelu", "gelu-x-phi-only", ("dx",),
            "dx = dy ⊙ x φ(x) misses the first term of the product rule: gelu'(x) = Φ(x) + x φ(x) "
            "(tanh form: σ(2u) + x σ(2u)(1 - σ(2u)) 2u')",
            _gelu_second_term_only),
    Mistake("gelu", "gelu-product-rule-minus", ("dx",),
            "the product rule's second term is subtracted: gelu'(x) = Φ(x) + x φ(x) "
            "(tanh form: σ(2u) + x σ(2u)(1 - σ(2u)) 2u'), a plus",
            _gelu_product_rule_minus),
    Mistake("gelu", "gelu-pdf-unnormalised", ("dx",),
            "φ(x) lacks its normalisation: the standard normal density is φ(x) = exp(-x²/2) / √(2π)",
            lambda inp: _gelu_exact_pdf(inp, normalised=False)),
    Mistake("gelu", "gelu-pdf-exponent", ("dx",),
            "φ(x) has exp(-x²): the standard normal density is φ(x) = exp(-x²/2) / √(2π), a half in the "
            "exponent",
            lambda inp: _gelu_exact_pdf(inp, half=1.0)),
    Mistake("gelu", "gelu-erf-no-sqrt2", ("out", "dx"),
            "Φ(x) is computed as (1 + erf(x))/2 or (1 + erf(√2 x))/2: the normal CDF is "
            "Φ(x) = (1 + erf(x/√2))/2, x divided by √2",
            _gelu_erf_no_sqrt2),
    Mistake("gelu", "gelu-cdf-sign", ("out", "dx"),
            "Φ(x) is computed as Φ(-x): Φ(x) = ½ erfc(-x/√2) = ½ (1 + erf(x/√2)), so erfc takes -x/√2 "
            "(½ erfc(x/√2) is 1 - Φ(x))",
            lambda inp: _gelu_exact_cdf(inp, sign=-1.0)),
    Mistake("gelu", "gelu-cdf-no-half", ("out", "dx"),
            "Φ(x) misses its ½: Φ(x) = ½ erfc(-x/√2) = ½ (1 + erf(x/√2)), between 0 and 1",
            lambda inp: _gelu_exact_cdf(inp, half=1.0)),
    Mistake("gelu", "gelu-pdf-for-cdf", ("out",),
            "out = x φ(x) uses the density: GELU weighs x by the normal CDF, y = x Φ(x), Φ(x) = ½ erfc(-x/√2)",
            _gelu_pdf_for_cdf),
    Mistake("gelu", "gelu-pdf-sign", ("dx",),
            "φ(x) has exp(+x²/2): the standard normal density is φ(x) = exp(-x²/2) / √(2π), a minus in the "
            "exponent",
            lambda inp: _gelu_exact_pdf(inp, half=-0.5)),
    Mistake("gelu", "gelu-dx-no-x", ("dx",),
            "the second term of gelu'(x) misses its x: gelu'(x) = Φ(x) + x φ(x) (tanh form: "
            "σ(2u) + x σ(2u)(1 - σ(2u)) 2u'), the product rule on y = x Φ(x)",
            _gelu_dx_no_x),
    Mistake("gelu", "gelu-derivative-other-form", ("dx",),
            "dx uses the derivative of the other GELU form: the forward's form is `approximate`'s, and so is "
            "its derivative (\"none\": Φ(x) + x φ(x); \"tanh\": σ(2u) + x σ(2u)(1 - σ(2u)) 2u')",
            _gelu_other_derivative),
    Mistake("gelu", "gelu-tanh-half", ("out", "dx"),
            "the factor of x is σ(u) or tanh u: the tanh form is ½ x (1 + tanh u) = x σ(2u), "
            "u = √(2/π)(x + 0.044715 x³), so σ takes 2u",
            _gelu_tanh_half),
    Mistake("gelu", "gelu-tanh-no-sqrt-2-over-pi", ("out", "dx"),
            "u misses √(2/π): u = √(2/π)(x + 0.044715 x³), and 2u' = 2√(2/π)(1 + 3·0.044715 x²)",
            _gelu_tanh_no_c),
    Mistake("gelu", "gelu-tanh-cubic", ("out", "dx"),
            "u's cubic term is wrong: u = √(2/π)(x + 0.044715 x³), a cube with the coefficient 0.044715",
            _gelu_tanh_cubic),
    Mistake("gelu", "gelu-tanh-du", ("dx",),
            "2u', the chain rule's factor, is wrong: the derivative of 2u = 2√(2/π)(x + 0.044715 x³) is "
            "2u' = 2√(2/π)(1 + 3·0.044715 x²), in gelu'(x) = σ(2u) + x σ(2u)(1 - σ(2u)) · 2u'",
            _gelu_tanh_du),
    Mistake("gelu", "gelu-tanh-sigmoid-derivative", ("dx",),
            "the sigmoid's derivative is wrong: σ'(z) = σ(z)(1 - σ(z)), so "
            "gelu'(x) = σ(2u) + x σ(2u)(1 - σ(2u)) 2u' (from ½ x (1 + tanh u): d tanh u / du = 1 - tanh² u)",
            _gelu_tanh_slope),
)


GELU = pair("functional.activations", "gelu")

ASSIGNMENT = Assignment(
    id="gelu", title="GELU, exact (erf) and tanh approximation", lecture=L6, points=5,
    targets=("functional.activations:gelu_forward", "functional.activations:gelu_backward",
             "functional.activations:_gelu_tanh_forward"),
    cases=cases(GELU, ("out", "dx"), ("gelu: exact (erf)", lambda rng: bct(rng, approximate="none")), float32="gelu")
    + cases(GELU, ("out", "dx"), ("gelu: tanh approximation", lambda rng: bct(rng, approximate="tanh")),
            ("gelu: tanh approximation, x (4, 8, 16) over ±6 (every part of the derivative shows)", draw_wide)),
    mistakes=MISTAKES,
)
