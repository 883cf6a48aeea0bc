"""attention: softmax(Q Kᵀ / √D + bias) V with boolean masks and dropout on P, and (dq, dk, dv, dbias)."""
from __future__ import annotations

import numpy as np

from ..assignment import Assignment, Mistake, cases, pair
from ..graded import Case
from ...functional.attention import _sum_to_shape
from ..mistakes_match import dbias_not_reduced
from . import L1
from ._variants import _g, _softmax, _x


# ------------------------------------------------------------------ the graded inputs
def draw(rng, *, H=2, fully_masked=False, bias=False, dropout=False) -> Case:
    """q (B, H, T, D), k and v (B, H, S, D), D = 8 (√D is not mistaken for 2), a mask (B, 1, T, S)."""
    B, T, S, D = int(rng.integers(1, 3)), int(rng.integers(2, 5)), int(rng.integers(2, 6)), 8
    mask = rng.random((B, 1, T, S)) < 0.75
    mask[..., 0] = True
    if fully_masked:
        mask[0, 0, -1, :] = False                            # query T-1 sees nothing: out 0, never NaN
    inputs = {"q": rng.standard_normal((B, H, T, D)), "k": rng.standard_normal((B, H, S, D)),
              "v": rng.standard_normal((B, H, S, D)), "mask": mask}
    wrt, kwargs = ("q", "k", "v"), {}
    if bias:
        inputs["bias"] = rng.standard_normal((1, H, T, S))
        wrt += ("bias",)
    if dropout:
        p = float(rng.uniform(0.2, 0.5))
        kwargs = {"p_drop": p, "drop_mask": rng.random((B, H, T, S)) >= p}
    return Case(inputs, kwargs, wrt=wrt, factors={f"√D with D={D}": (D ** 0.5, "forgot 1/√D?"),
                                                  f"1/√D with D={D}": (D ** -0.5, "applied 1/√D twice?")})


# ------------------------------------------------------------------ the catalogue
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
    dS = P * (dP - (dP * P).sum(axis, keepdims=True))               # the softmax's backward along its axis
    cb = c if backward_scale else 1.0
    dq = dS @ k * cb
    dk = dS.swapaxes(-1, -2) @ q * cb
    result = {"out": out, "dq": dq, "dk": dk, "dv": dv}
    if inp.get("bias") is not None:
        bias_shape = np.shape(inp["bias"])
        result["dbias"] = _sum_to_shape(dS, bias_shape)
    return result


def _mask_after_softmax(inp):
    """P = softmax(scores) over EVERY key, then the hidden entries zeroed (not renormalised), and the
    backward of those two lines: out and its gradients."""
    mask = inp.get("mask")
    if mask is None:
        return {}
    q, k, v, dout = _x(inp, "q"), _x(inp, "k"), _x(inp, "v"), _g(inp)
    c = q.shape[-1] ** -0.5
    P = _softmax_of(inp, masked=False)
    keep = np.broadcast_to(np.asarray(mask), P.shape).astype(np.float64)
    drop = inp.get("drop_mask")
    kept = 1.0 if drop is None else np.asarray(drop) / (1 - float(inp.get("p_drop", 0.0)))   # dropout after
    Pm = P * keep * kept
    dP = (dout @ v.swapaxes(-1, -2)) * keep * kept
    dS = P * (dP - (dP * P).sum(-1, keepdims=True))
    result = {"out": Pm @ v, "dq": dS @ k * c, "dk": dS.swapaxes(-1, -2) @ q * c, "dv": Pm.swapaxes(-1, -2) @ dout}
    if inp.get("bias") is not None:
        result["dbias"] = _sum_to_shape(dS, np.shape(inp["bias"]))
    return result


def _dv_not_transposed(inp):
    """dv = P̃ @ dout where P̃ᵀ @ dout belongs (T = S, so the shapes fit and nothing raises)."""
    if np.shape(inp["q"])[-2] != np.shape(inp["k"])[-2]:
        return {}
    P = _softmax_of(inp)
    drop = inp.get("drop_mask")
    keep = 1.0 if drop is None else np.asarray(drop) / (1 - float(inp.get("p_drop", 0.0)))
    return {"dv": (P * keep) @ _g(inp)}


def _softmax_of(inp, masked=True):
    """P = softmax(Q Kᵀ / √D + bias) of the reference, the mask's hidden keys at -inf (``masked``) or not."""
    q, k = _x(inp, "q"), _x(inp, "k")
    scores = q @ k.swapaxes(-1, -2) * q.shape[-1] ** -0.5
    if inp.get("bias") is not None:
        scores = scores + _x(inp, "bias")
    if masked and inp.get("mask") is not None:
        scores = np.where(np.asarray(inp["mask"]), scores, -np.inf)
    return _softmax(scores)


def _dropout_given(inp):
    return inp.get("drop_mask") is not None and float(inp.get("p_drop", 0.0)) > 0


_QKV = ("out", "dq", "dk", "dv", "dbias")

MISTAKES = (
    Mistake("attention", "attention-no-scale", _QKV,
            "the scores are not scaled: scores = Q Kᵀ / √D (the 1/√D keeps them from saturating the softmax)",
            lambda inp: _attention(inp, scale_power=0.0)),
    Mistake("attention", "attention-scale-1-over-D", _QKV,
            "the scores are divided by D; the scale is 1/√D",
            lambda inp: _attention(inp, scale_power=2.0)),
    Mistake("attention", "attention-backward-no-scale", ("dq", "dk"),
            "dq and dk miss the forward's 1/√D (they are √D too large): dq = dscores K / √D, dk = dscoresᵀ Q / √D",
            lambda inp: _attention(inp, backward_scale=False)),
    Mistake("attention", "attention-mask-ignored", _QKV,
            "the mask is ignored: set the scores of hidden keys (mask False) to -inf before the softmax",
            lambda inp: _attention(inp, use_mask=False) if inp.get("mask") is not None else {}),
    Mistake("attention", "attention-mask-inverted", _QKV,
            "the mask is inverted: True means the query MAY attend the key; hide the keys where it is False",
            lambda inp: _attention(inp, invert_mask=True) if inp.get("mask") is not None else {}),
    Mistake("attention", "attention-bias-ignored", _QKV,
            "the bias is ignored: it is added to the scores before the mask and the softmax",
            lambda inp: _attention(inp, use_bias=False) if inp.get("bias") is not None else {}),
    Mistake("attention", "attention-softmax-over-queries", _QKV,
            "the softmax runs over the queries (axis -2); each query's weights over its keys (axis -1) sum to 1",
            lambda inp: _attention(inp, axis=-2)),
    Mistake("attention", "attention-dropout-ignored", _QKV,
            "the dropout mask is ignored: with p_drop > 0 in training, P̃ = P ⊙ drop_mask / (1 - p_drop) "
            "multiplies V",
            lambda inp: _attention(inp, dropout="ignored") if _dropout_given(inp) else {}),
    Mistake("attention", "attention-dropout-unscaled", _QKV,
            "the kept probabilities are not scaled: P̃ = P ⊙ drop_mask / (1 - p_drop)",
            lambda inp: _attention(inp, dropout="unscaled") if _dropout_given(inp) else {}),
    Mistake("attention", "attention-dropout-backward-ignored", ("dq", "dk", "dv"),
            "the backward ignores the dropout: dv = P̃ᵀ dout and dP = (dout Vᵀ) ⊙ drop_mask / (1 - p_drop)",
            lambda inp: _attention(inp, dropout="backward-ignored") if _dropout_given(inp) else {}),
    Mistake("attention", "attention-mask-after-softmax", _QKV,
            "the mask is applied AFTER the softmax (hidden probabilities zeroed, the rows no longer sum to 1): "
            "mask the scores before the softmax, -inf where the mask is False, so each row renormalises over "
            "the keys it may attend",
            _mask_after_softmax),
    Mistake("attention", "attention-dv-not-transposed", ("dv",),
            "dv = P @ dout misses the transpose: out = P̃ v gives dv = P̃ᵀ dout (P.swapaxes(-1, -2) @ dout), "
            "(B, H, S, T) @ (B, H, T, Dv)",
            _dv_not_transposed),
    Mistake("attention", "attention-dbias-not-reduced", ("dbias",),
            "dbias has the scores' shape: sum it over the axes where the bias was broadcast, back to the bias's shape",
            match=dbias_not_reduced),
)


ASSIGNMENT = Assignment(
    id="attention", title="Scaled dot-product attention with masks", lecture=L1, points=15,
    targets=("functional.attention:attention_forward", "functional.attention:attention_backward"),
    needs=("softmax", "dropout"),
    equivalents=("functional.shaw:shaw_attention_forward",                     # zero relative tables
                 "functional.shaw:shaw_attention_backward"),
    cases=cases(pair("functional.attention", "attention"), ("out", "dq", "dk", "dv", "dbias"),
                ("attention: masked keys", draw),
                ("attention: a query with every key masked (0, never NaN)", lambda rng: draw(rng, fully_masked=True)),
                ("attention: four heads (H=4)", lambda rng: draw(rng, H=4)),
                ("attention: additive bias (dbias)", lambda rng: draw(rng, bias=True)),
                ("attention: dropout on P with a given drop_mask", lambda rng: draw(rng, dropout=True)),
                float32="attention"),
    mistakes=MISTAKES,
    handout="The docstring's last paragraph (the speed wing's twin) explains the reference; it is not graded.",
    also_checked=" A row with nothing to attend gives 0, never NaN.",
)
