"""cross_entropy: log-softmax and the cross-entropy of logits (label smoothing, ignore_index), both backwards."""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from ...functional.softmax import log_softmax_forward
from ..assignment import Assignment, Mistake, cases, pair
from ..graded import Case
from ..mistakes_match import nothing_kept_nan
from . import L5
from ._draw import bct, shape_bct
from ._variants import _g, _pick, _rows, _softmax, _x


# ------------------------------------------------------------------ the graded inputs
def draw(rng) -> Case:
    """logits (B, T, V), targets (B, T) with about 30% ignored (-100), at least one of each."""
    B, T, V = shape_bct(rng)
    T += 2                                                      # room for kept and ignored targets
    targets = rng.integers(0, V, (B, T))
    ignored = rng.random((B, T)) < 0.3
    ignored[0, 0], ignored[0, 1] = True, False                  # at least one of each
    targets[ignored] = -100
    n_kept = int((~ignored).sum())
    smoothing = [0.0, 0.1][int(rng.integers(0, 2))]
    return Case({"logits": 2 * rng.standard_normal((B, T, V)), "targets": targets},
                {"ignore_index": -100, "smoothing": smoothing}, wrt=("logits",),
                factors={"N_kept/N": (n_kept / ignored.size, "averaged over the ignored targets too?"),
                         "N/N_kept": (ignored.size / n_kept, "")},
                masked={"dlogits": np.broadcast_to(ignored[..., None], (B, T, V))})


def draw_smoothing(rng) -> Case:
    case = draw(rng)
    return replace(case, kwargs=dict(case.kwargs, smoothing=0.1))


def draw_plain(rng) -> Case:
    case = draw(rng)
    return replace(case, kwargs=dict(case.kwargs, smoothing=0.0))


def draw_all_ignored(rng) -> Case:
    case = draw(rng)
    targets = np.full_like(case.inputs["targets"], -100)
    return replace(case, inputs=dict(case.inputs, targets=targets), factors={})


# ------------------------------------------------------------------ the catalogue
def _log_softmax_variants(inp):
    x, dz = _x(inp), _g(inp)
    m = x.max(-1, keepdims=True)
    lse = np.log(np.exp(x - m).sum(-1, keepdims=True))
    p = _softmax(x)
    return {"no-lse": x - m, "no-max-back": x - lse,
            "no-sum": dz - p * dz, "const": dz, "p-alone": dz - p, "sign": dz + p * dz.sum(-1, keepdims=True)}


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
    logp = log_softmax_forward(z)[0]                          # (N, V) the reference's log-softmax
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


MISTAKES = (
    Mistake("log_softmax", "log_softmax-no-logsumexp", ("out",),
            "z = x - max(x) is only the shift: subtract log Σ exp(x - max) too",
            _pick(_log_softmax_variants, "no-lse", "out")),
    Mistake("log_softmax", "log_softmax-max-not-added-back", ("out",),
            "z = x - log Σ exp(x - max) forgets the max: log Σ exp(x) = max + log Σ exp(x - max)",
            _pick(_log_softmax_variants, "no-max-back", "out")),
    Mistake("log_softmax", "log_softmax-no-sum", ("dx",),
            "dx = dz - softmax ⊙ dz: the softmax must multiply the SUM of dz over the row, "
            "dx = dz - softmax(x) ⊙ Σ_j dz_j",
            _pick(_log_softmax_variants, "no-sum")),
    Mistake("log_softmax", "log_softmax-sum-dropped", ("dx",),
            "dx = dz - softmax(x) drops the sum: log Σ exp(x) feeds every z_j, so the softmax term is "
            "multiplied by Σ_j dz_j (the whole row's upstream gradient), dx = dz - softmax(x) ⊙ Σ_j dz_j",
            _pick(_log_softmax_variants, "p-alone")),
    Mistake("log_softmax", "log_softmax-lse-constant", ("dx",),
            "dx = dz treats log Σ exp(x) as a constant: it depends on x, and gives - softmax(x) ⊙ Σ_j dz_j",
            _pick(_log_softmax_variants, "const")),
    Mistake("log_softmax", "log_softmax-sign", ("dx",),
            "the softmax term has the wrong sign: dx = dz - softmax(x) ⊙ Σ_j dz_j",
            _pick(_log_softmax_variants, "sign")),
    Mistake("cross_entropy", "ce-all-ignored-zero-over-zero", ("out", "dlogits"),
            "every target is ignore_index, so N_kept = 0 and the mean over the kept targets is 0/0 = NaN: with "
            "nothing to average the loss is 0 and dlogits is 0; divide by max(N_kept, 1)",
            match=nothing_kept_nan),
    Mistake("cross_entropy", "ce-smoothing-over-V-1", ("out", "dlogits"),
            "label smoothing spread over the V - 1 other classes: the convention puts ε/V on EVERY class, "
            "the target included, q = (1 - ε) onehot(y) + ε/V",
            lambda inp: _cross_entropy(inp, classes="V-1") if _smoothed(inp) else {}),
    Mistake("cross_entropy", "ce-mean-over-all-targets", ("out", "dlogits"),
            "the mean divides by every target, ignored ones included: divide by N_kept, the number of "
            "targets that are not ignore_index",
            lambda inp: _cross_entropy(inp, denom="all") if _has_ignored(inp) else {}),
    Mistake("cross_entropy", "ce-sum-not-mean", ("out", "dlogits"),
            "this is the sum over the kept targets; the loss is their mean (divide by N_kept)",
            lambda inp: _cross_entropy(inp, denom="sum")),
    Mistake("cross_entropy", "ce-backward-not-divided", ("dlogits",),
            "dlogits is not divided by N_kept: the loss is the MEAN over the kept targets, so each row's "
            "gradient (softmax - q) is divided by N_kept, as the forward divides the sum",
            lambda inp: {"dlogits": _cross_entropy(inp, denom="sum")["dlogits"]}),
    Mistake("cross_entropy", "ce-smoothing-ignored", ("out", "dlogits"),
            "label smoothing is ignored: with smoothing ε the target distribution is "
            "(1 - ε) onehot(y) + ε/V",
            lambda inp: _cross_entropy(inp, smoothing=0.0) if _smoothed(inp) else {}),
    Mistake("cross_entropy", "ce-backward-smoothing-ignored", ("dlogits",),
            "the backward ignores label smoothing: dlogits = softmax - q with q = (1 - ε) onehot(y) + ε/V",
            lambda inp: _cross_entropy(inp, backward_smoothing=0.0) if _smoothed(inp) else {}),
    Mistake("cross_entropy", "ce-ignored-rows-get-gradient", ("dlogits",),
            "the ignored targets' rows get a gradient: their rows of dlogits must be 0 (they are not in the loss)",
            lambda inp: _cross_entropy(inp, keep_ignored=True) if _has_ignored(inp) else {}),
    Mistake("cross_entropy", "ce-no-upstream", ("dlogits",),
            "dlogits is not multiplied by the upstream dloss (chain rule: dlogits = dloss · (softmax - q) / N_kept)",
            lambda inp: _cross_entropy(inp, upstream=False)),
    Mistake("cross_entropy", "ce-smoothing-summed", ("out",),
            "the smoothing term SUMS -log p_c over the classes: it is their MEAN, ε · (1/V) Σ_c (-log p_c) "
            "(q puts ε/V on every class)",
            lambda inp: {"out": _cross_entropy(inp, classes="every", backward_classes="V")["out"]}
            if _smoothed(inp) else {}),
    Mistake("cross_entropy", "ce-backward-smoothing-not-spread", ("dlogits",),
            "the backward's q puts ε on every class: spread it, q = (1 - ε) onehot(y) + ε/V, so "
            "dlogits = softmax - q",
            lambda inp: _cross_entropy(inp, backward_classes="every") if _smoothed(inp) else {}),
)


ASSIGNMENT = Assignment(
    id="cross_entropy", title="Log-softmax and cross-entropy (label smoothing, ignore_index)", lecture=L5, points=10,
    targets=("functional.softmax:log_softmax_forward", "functional.softmax:log_softmax_backward",
             "functional.cross_entropy:cross_entropy_forward", "functional.cross_entropy:cross_entropy_backward"),
    equivalents=("functional.softmax:softmax_forward", "functional.softmax:softmax_backward",
                 "functional.softmax:softmax_backward_jacobian",               # log(softmax) = log_softmax
                 "plots.training:_implied_target"),                            # q = softmax - dL/dz: the backward read back
    cases=cases(pair("functional.softmax", "log_softmax"), ("out", "dx"),
                ("log_softmax: rows of x (B, T, V)", bct), float32="log_softmax")
    + cases(pair("functional.cross_entropy", "cross_entropy"), ("out", "dlogits"),
            ("cross_entropy: ignored targets, no smoothing", draw_plain),
            ("cross_entropy: label smoothing 0.1 and ignored targets", draw_smoothing),
            ("cross_entropy: every target ignored (loss 0, gradient 0)", draw_all_ignored), float32="cross_entropy"),
    mistakes=MISTAKES,
)
