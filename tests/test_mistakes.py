"""Every catalogue mistake is recognised in a bug planted by hand, as a student would write it.

Each planted bug runs on the graded cases' drawn inputs (two seeds); the tensor it
breaks must be wrong in at least one of them and, wherever it is wrong, carry the
catalogue message of that mistake. The correct code gets no diagnosis at all. The
expected messages are the catalogue's own (by name), the arrays are computed by the
planted code: nothing here is computed by the catalogue's variants.
"""
from __future__ import annotations

import numpy as np
import pytest

from minitransformer.functional import attention as A, cross_entropy as CE, norm as N, rope as RO, softmax as SM
from minitransformer.functional.activations import gelu_forward, relu_forward
from minitransformer.functional.erf import erfc
from minitransformer.functional.heads import merge_heads, split_heads
from minitransformer.functional.linear import linear_backward, linear_forward
from minitransformer.functional.repeat_kv import repeat_kv_backward
from minitransformer.homework.graded import build_module, resolve, run_module, run_pair
from minitransformer.homework.reference import reference_results, trial_inputs
from minitransformer.homework.registry import case_table, find_case as by_name
from minitransformer.homework.mistakes import (catalogue, diagnose, diagnose_all, dtype_message,
                                               mutation_message, nan_message)
from minitransformer.layers.residual import Residual

SEEDS = (0, 1)
CASES = case_table()


def _function(graded):
    return graded.check.forward.split(":")[1].removesuffix("_forward")


def _diagnoses(case_name, forward=None, backward=None, module_patch=None, seeds=SEEDS):
    """[(student results, {tensor: message})] of planted code on the named case's draws."""
    graded = by_name(case_name)
    out = []
    for seed in seeds:
        case = graded.draw(np.random.default_rng([3, seed]))
        ref, g = reference_results(graded, case, seed=seed)
        if graded.check.checker == "module":
            module = build_module(resolve("minitransformer", graded.check.forward), case)
            module_patch(module)
            student, _ = run_module(module, case, g=g)
        elif graded.check.backward is None:
            student = {"out": forward(**{k: np.array(v, copy=True) for k, v in case.inputs.items()}, **case.kwargs)}
        else:
            student, _ = run_pair(case, forward or resolve("minitransformer", graded.check.forward),
                                  backward or resolve("minitransformer", graded.check.backward), g=g)
        messages = diagnose_all(graded.assignment, trial_inputs(graded, case, g), student, ref,
                                function=_function(graded))
        out.append((student, messages))
    return out


def _message(name):
    return next(m.message for m in catalogue() if m.name == name)


# ------------------------------------------------------------------ planted bugs, by hand
def linear_no_bias(x, W, b=None):
    return x @ W, linear_forward(x, W, b)[1]


def linear_averaged(dy, cache):
    x2, dy2 = cache.x.reshape(-1, cache.x.shape[-1]), dy.reshape(-1, dy.shape[-1])
    n = x2.shape[0]
    return dy @ cache.W.T, x2.T @ dy2 / n, dy2.sum(0) / n


def linear_first_row(dy, cache):
    dx, _, db = linear_backward(dy, cache)
    return dx, cache.x[0].T @ dy[0], db


def relu_no_upstream(dy, cache):
    return cache.positive * 1.0


def relu_keep_x(x):
    return np.maximum(x, 0), x


def relu_times_output(dy, x):
    return dy * np.maximum(x, 0)


def gelu_always_tanh(x, approximate="none"):
    return gelu_forward(x, "tanh")


def _gelu_always_tanh_backward(dy, cache):
    return dy * cache.dydx


def gelu_keep_x(x, approximate="none"):
    y, _ = gelu_forward(x, approximate)
    return y, x


def gelu_backward_phi_only(dy, x):
    return dy * 0.5 * erfc(-x / np.sqrt(2))


def gelu_no_upstream(dy, cache):
    return cache.dydx


def gelu_exact(kind):
    """A student's exact GELU with one line wrong; the cache is x."""
    def forward(x, approximate="none"):
        Phi = 0.5 * erfc(-x if kind == "erf-no-sqrt2" else -x / np.sqrt(2))
        return x * Phi, x

    def backward(dy, x):
        Phi = 0.5 * erfc(-x / np.sqrt(2))
        phi = np.exp(-x ** 2 / 2) / np.sqrt(2 * np.pi)
        if kind == "pdf-unnormalised":
            phi = np.exp(-x ** 2 / 2)
        if kind == "pdf-exponent":
            phi = np.exp(-x ** 2) / np.sqrt(2 * np.pi)
        if kind == "pdf-sign":
            phi = np.exp(x ** 2 / 2) / np.sqrt(2 * np.pi)
        if kind == "no-x":
            return dy * (Phi + phi)
        if kind == "minus":                                       # Φ - x φ
            return dy * (Phi - x * phi)
        return dy * (x * phi if kind == "x-phi-only" else Phi + x * phi)
    return forward, backward


def gelu_student(kind):
    """A student's GELU of both forms with one line wrong (or none); the cache is dy/dx."""
    k, c = 0.044715, np.sqrt(2 / np.pi)

    def forward(x, approximate="none"):
        Phi = 0.5 * erfc(-x / np.sqrt(2))
        phi = np.exp(-x ** 2 / 2) / np.sqrt(2 * np.pi)
        if approximate == "none":
            if kind == "cdf-sign":
                Phi = 0.5 * erfc(x / np.sqrt(2))
            if kind == "cdf-no-half":
                Phi = erfc(-x / np.sqrt(2))
            y = x * (phi if kind == "pdf-for-cdf" else Phi)
            return y, Phi + x * phi
        cube = {"cubic-k-x2": k * x ** 2, "cubic-no-k": x ** 3}.get(kind, k * x ** 3)
        u = (1.0 if kind == "no-sqrt-2-over-pi" else c) * (x + cube)
        du = c * (1 + {"du-no-3": k, "du-no-cubic": 0.0}.get(kind, 3 * k) * x ** 2)   # u'
        t = np.tanh(u)
        if kind == "sigmoid-u":                    # x σ(u), differentiated as such
            s = 1 / (1 + np.exp(-u))
            return x * s, s + x * s * (1 - s) * du
        y = 0.5 * x * (1 + t)
        dydx = 0.5 * (1 + t) + 0.5 * x * (1 - (t if kind == "tanh-derivative" else t * t)) * du
        if kind == "exact-derivative":
            dydx = Phi + x * phi
        return y, dydx

    def backward(dy, dydx):
        return dy * dydx
    return forward, backward


def softmax_cols(x, axis=-1):
    e = np.exp(x - x.max(axis=-2, keepdims=True))
    y = e / e.sum(axis=-2, keepdims=True)
    return y, SM.SoftmaxCache(y, -2)


def softmax_bwd(kind):
    def backward(dy, cache):
        y = cache.y
        if kind == "no-y":
            return y * (dy - dy.sum(-1, keepdims=True))
        if kind == "mean":
            return y * (dy - (dy * y).mean(-1, keepdims=True))
        if kind == "no-outer-y":
            return dy - (dy * y).sum(-1, keepdims=True)
        if kind == "no-sum":
            return y * dy
        if kind == "sign":
            return y * (dy + np.sum(dy * y, axis=-1, keepdims=True))
        return dy * y * (1 - y)
    return backward


def log_softmax_fwd(kind):
    def forward(x, axis=-1):
        m = x.max(-1, keepdims=True)
        z = x - m if kind == "shift-only" else x - np.log(np.exp(x - m).sum(-1, keepdims=True))
        return z, SM.LogSoftmaxCache(z, -1)
    return forward


def log_softmax_bwd(kind):
    def backward(dz, cache):
        x_soft = np.exp(SM.log_softmax_forward(cache.z)[0])   # softmax of z = softmax of x
        if kind == "no-sum":
            return dz - x_soft * dz
        if kind == "const":
            return dz.copy()
        if kind == "p-alone":
            return dz - x_soft                                      # the Σ dz factor dropped with the sum
        return dz + x_soft * dz.sum(-1, keepdims=True)
    return backward


def student_cross_entropy(mean_over="kept", spread=None, use_smoothing=True):
    """A student's cross-entropy with one choice made wrong; the cache is the reference's."""
    def forward(logits, targets, ignore_index=-100, smoothing=0.0):
        V = logits.shape[-1]
        z = logits.reshape(-1, V)
        t = targets.reshape(-1)
        logp = z - z.max(1, keepdims=True)
        logp -= np.log(np.exp(logp).sum(1, keepdims=True))
        kept = t != ignore_index
        nll = -np.take_along_axis(logp, np.where(kept, t, 0)[:, None], 1)[:, 0]
        eps = smoothing if use_smoothing else 0.0
        if spread == "V-1":
            others = -logp.sum(1) - nll
            loss_n = (1 - eps) * nll + eps * others / (V - 1)
        elif spread == "summed":
            loss_n = (1 - eps) * nll + eps * (-logp.sum(1))
        else:
            loss_n = (1 - eps) * nll + eps * (-logp.mean(1))
        denom = {"kept": max(kept.sum(), 1), "all": t.size, "sum": 1}[mean_over]
        _, cache = CE.cross_entropy_forward(logits, targets, ignore_index, eps)
        return np.asarray((loss_n * kept).sum() / denom), cache._replace(n_kept=int(denom) if mean_over != "kept"
                                                                          else cache.n_kept)
    def backward(dloss, cache):
        V = cache.logp.shape[1]
        p = np.exp(cache.logp)
        onehot = np.eye(V)[cache.targets]
        eps = cache.smoothing
        q = (1 - eps) * onehot + (eps / (V - 1) * (1 - onehot) if spread == "V-1" else eps / V)
        d = (p - q) * cache.keep[:, None] * dloss / max(cache.n_kept, 1)
        return d.reshape(cache.logits_shape)
    return forward, backward


def ce_backward(kind):
    def backward(dloss, cache):
        V = cache.logp.shape[1]
        p = np.exp(cache.logp)
        onehot = np.eye(V)[cache.targets]
        eps = 0.0 if kind == "no-smoothing" else cache.smoothing
        d = p - ((1 - eps) * onehot + (eps if kind == "not-spread" else eps / V))
        if kind != "all-rows":
            d = d * cache.keep[:, None]
        if kind != "no-upstream":
            d = d * float(dloss)
        n = 1 if kind == "not-divided" else max(cache.n_kept, 1)      # the mean's 1/N_kept left out
        return (d / n).reshape(cache.logits_shape)
    return backward


def layernorm_fwd(kind):
    def forward(x, gamma, beta, eps=1e-5):
        mu = x.mean(-1, keepdims=True)
        if kind == "unbiased":
            var = ((x - mu) ** 2).sum(-1, keepdims=True) / (x.shape[-1] - 1)
            xhat = (x - mu) / np.sqrt(var + eps)
        elif kind == "no-sqrt":
            xhat = (x - mu) / (((x - mu) ** 2).mean(-1, keepdims=True) + eps)
        elif kind == "not-scaled":
            xhat = x - mu
        else:
            xhat = (x - mu) / (np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True)) + eps)
        return xhat * gamma + beta, (x, xhat, gamma)
    return forward


def layernorm_bwd(kind):
    def backward(dy, cache):
        xhat, rstd, gamma = cache
        dxhat = dy if kind == "no-gamma" else dy * gamma
        dx = dxhat
        if kind not in ("no-means", "no-mean"):
            dx = dx - dxhat.mean(-1, keepdims=True)
        if kind not in ("no-means", "no-xhat-mean"):
            dx = dx - xhat * (dxhat * xhat).mean(-1, keepdims=True)
        if kind == "plus-mean":                                   # "- mean(dxhat)" written with a +
            dx = dx + 2 * dxhat.mean(-1, keepdims=True)
        dx = dx * rstd
        rows = dy.reshape(-1, dy.shape[-1])
        dgamma = (rows * xhat.reshape(rows.shape)).sum(0)
        dbeta = rows.sum(0)
        if kind == "dgamma-no-xhat":
            dgamma = rows.sum(0)
        if kind == "averaged":
            dgamma, dbeta = dgamma / rows.shape[0], dbeta / rows.shape[0]
        return dx, dgamma, dbeta
    return backward


def layernorm_keep_x(x, gamma, beta, eps=1e-5):
    y, cache = N.layernorm_forward(x, gamma, beta, eps)
    return y, (x, cache)


def layernorm_dgamma_x(dy, cache):
    x, ref_cache = cache
    dx, _, dbeta = N.layernorm_backward(dy, ref_cache)
    return dx, (dy * x).reshape(-1, x.shape[-1]).sum(0), dbeta


def rmsnorm_fwd(kind):
    def forward(x, gamma, eps=1e-6):
        cache = N.rmsnorm_forward(x, gamma, eps)[1]          # the backward is not what is planted
        if kind == "eps-outside":
            rms = np.sqrt((x ** 2).mean(-1, keepdims=True)) + eps
        elif kind == "sum":
            rms = np.sqrt((x ** 2).sum(-1, keepdims=True) + eps)
        elif kind == "no-sqrt":
            rms = (x ** 2).mean(-1, keepdims=True) + eps
        else:
            xc = x - x.mean(-1, keepdims=True)
            rms = np.sqrt((xc ** 2).mean(-1, keepdims=True) + eps)
            x = xc
        return x / rms * gamma, cache
    return forward


def rmsnorm_bwd(kind):
    def backward(dy, cache):
        xhat, rstd, gamma = cache
        dxhat = dy if kind == "no-gamma" else dy * gamma
        sign = 1 if kind == "plus" else -1                        # the σ term written with a +
        dx = dxhat * rstd if kind == "const" else rstd * (dxhat + sign * xhat * (dxhat * xhat).mean(-1, keepdims=True))
        if kind == "sum":                                          # a sum over the C features, no 1/C
            dx = rstd * (dxhat - xhat * (dxhat * xhat).sum(-1, keepdims=True))
        rows = dy.reshape(-1, dy.shape[-1])
        x = xhat / rstd
        used = x if kind == "dgamma-x" else xhat
        if kind == "dgamma-no-xhat":
            return dx, rows.sum(0)
        return dx, (rows * used.reshape(rows.shape)).sum(0)
    return backward


def embedding_fancy(dout, cache):
    dW = np.zeros((cache.vocab_size, dout.shape[-1]))
    dW[cache.ids.reshape(-1)] += dout.reshape(-1, dout.shape[-1])
    return dW


def embedding_sorted_unsorted_dout(dout, cache):
    """The sorted scatter with np.add.reduceat over dout's rows as given, not dout[order]."""
    ids = cache.ids.reshape(-1)
    rows = dout.reshape(-1, dout.shape[-1])
    order = np.argsort(ids)
    sorted_ids = ids[order]
    starts = np.flatnonzero(np.r_[True, sorted_ids[1:] != sorted_ids[:-1]])
    dW = np.zeros((cache.vocab_size, rows.shape[1]))
    dW[sorted_ids[starts]] = np.add.reduceat(rows, starts, axis=0)
    return dW


def attention_mask_after_softmax():
    """The softmax over every key, then the hidden probabilities zeroed (rows not renormalised)."""
    def forward(q, k, v, mask=None, bias=None, *, p_drop=0.0, drop_mask=None):
        c = 1 / np.sqrt(q.shape[-1])
        s = q @ k.swapaxes(-1, -2) * c + (0 if bias is None else bias)
        e = np.exp(s - s.max(-1, keepdims=True))
        P = e / e.sum(-1, keepdims=True)
        keep = np.ones_like(P) if mask is None else np.broadcast_to(mask, P.shape).astype(float)
        return (P * keep) @ v, (q, k, v, P, keep, c)
    def backward(dout, cache):
        q, k, v, P, keep, c = cache
        dP = dout @ v.swapaxes(-1, -2) * keep
        dS = P * (dP - (dP * P).sum(-1, keepdims=True))
        return dS @ k * c, dS.swapaxes(-1, -2) @ q * c, (P * keep).swapaxes(-1, -2) @ dout
    return forward, backward


def dropout_pair(kind):
    def forward(x, p_drop, rng=None, training=True, mask=None):
        if kind == "eval-drops" or mask is None:
            mask = np.random.default_rng(123).random(x.shape) >= p_drop
        if kind == "own-mask":
            mask = np.random.default_rng(7).random(x.shape) >= p_drop
        keep = ~mask if kind == "inverted" else mask
        scale = {"no-scale": 1.0, "times-keep": 1 - p_drop, "one-over-p": 1 / p_drop}.get(kind, 1 / (1 - p_drop))
        return x * keep * scale, (keep, scale)
    def backward(dy, cache):
        keep, scale = cache
        return dy * keep * scale
    return forward, backward


def dropout_bwd(kind):
    def backward(dy, cache):
        if kind == "unmasked":
            return dy * cache.scale
        if kind == "unscaled":
            return dy * cache.mask
        if kind == "one-over-p":
            return dy * cache.mask / (1 - 1 / cache.scale)           # divided by p_drop
        return cache.mask * cache.scale
    return backward


def student_attention(scale="sqrt", use_mask=True, invert=False, use_bias=True, axis=-1, dropout="right",
                      backward_scale=True, reduce_bias=True):
    """A student's attention, one choice made wrong."""
    def forward(q, k, v, mask=None, bias=None, *, p_drop=0.0, drop_mask=None):
        D = q.shape[-1]
        K, Vv = k, v
        c = {"sqrt": 1 / np.sqrt(D), "none": 1.0, "D": 1 / D}[scale]
        s = q @ K.swapaxes(-1, -2) * c
        if bias is not None and use_bias:
            s = s + bias
        if mask is not None and use_mask:
            s = np.where(mask != invert, s, -np.inf)
        m = s.max(axis, keepdims=True)
        e = np.exp(s - np.where(np.isfinite(m), m, 0))
        tot = e.sum(axis, keepdims=True)
        P = np.divide(e, tot, out=np.zeros_like(e), where=tot > 0)
        M = 1.0
        if drop_mask is not None and dropout != "ignored":
            M = drop_mask / (1.0 if dropout == "unscaled" else 1 - p_drop)
        MB = 1.0 if dropout == "backward-ignored" else M
        return (P * M) @ Vv, (q, K, Vv, P, MB, c, None if bias is None else bias.shape)
    def backward(dout, cache):
        q, K, Vv, P, MB, c, bias_shape = cache
        dV = (P * MB).swapaxes(-1, -2) @ dout
        dP = dout @ Vv.swapaxes(-1, -2) * MB
        dS = P * (dP - (dP * P).sum(axis, keepdims=True))
        cb = c if backward_scale else 1.0
        dq, dK = dS @ K * cb, dS.swapaxes(-1, -2) @ q * cb
        grads = (dq, dK, dV)
        if bias_shape is not None:
            grads += (dS.sum(0, keepdims=True) if reduce_bias else dS,)
        return grads
    return forward, backward


def student_repeat_kv(kind):
    """A student's repeat_kv: "not-summed" (dx keeps every copy), "tiled" (np.tile for np.repeat, both
    ways), "one-copy" (dx of the first copy of each group)."""
    def forward(x, r):
        out = np.tile(x, (1, r, 1, 1)) if kind == "tiled" else np.repeat(x, r, axis=1)
        return out, (x.shape, r)
    def backward(dout, cache):
        (B, G, S, D), r = cache
        if kind == "not-summed":
            return dout.copy()
        if kind == "tiled":
            return dout.reshape(B, r, G, S, D).sum(1)
        return dout[:, ::r].copy()
    return forward, backward


def student_rope(direction=1, layout_fixed=None, use_scale=True, use_offset=True, exponent=2, back=-1):
    def rotate(a, cos, sin, layout, sign):
        half = a.shape[-1] // 2
        pa, pb = (a[..., 0::2], a[..., 1::2]) if layout == "interleaved" else (a[..., :half], a[..., half:])
        out = np.empty_like(a)
        oa, ob = (out[..., 0::2], out[..., 1::2]) if layout == "interleaved" else (out[..., :half], out[..., half:])
        oa[...] = pa * cos - sign * pb * sin
        ob[...] = sign * pa * sin + pb * cos
        return out
    def forward(x, offset=0, base=10000.0, layout="interleaved", scale=1.0):
        T, D = x.shape[2], x.shape[3]
        pos = (np.arange(T) + (offset if use_offset else 0)) / (scale if use_scale else 1.0)
        theta = base ** (-exponent * np.arange(D // 2) / D)
        ang = pos[:, None] * theta
        lay = layout_fixed or layout
        return rotate(x, np.cos(ang), np.sin(ang), lay, direction), (np.cos(ang), np.sin(ang), lay)
    def backward(dy, cache):
        cos, sin, lay = cache
        return rotate(dy, cos, sin, lay, back * direction)
    return forward, backward


def student_rope_tables(theta=None, multiply_scale=False, swap=False, swap_in_backward=False):
    """A student's RoPE whose angle tables (or the backward's reading of them) are wrong."""
    def forward(x, offset=0, base=10000.0, layout="interleaved", scale=1.0):
        T, D = x.shape[2], x.shape[3]
        m = (offset + np.arange(T)) * scale if multiply_scale else (offset + np.arange(T)) / scale
        j = np.arange(D // 2)
        ang = np.outer(m, base ** (-2 * j / D) if theta is None else theta(j, D, base))
        cos, sin = (np.sin(ang), np.cos(ang)) if swap else (np.cos(ang), np.sin(ang))
        y = np.empty_like(x)
        a, b, ya, yb = _halves(x, layout) + _halves(y, layout)
        ya[...], yb[...] = a * cos - b * sin, a * sin + b * cos
        return y, (cos, sin, layout)

    def backward(dy, cache):
        cos, sin, layout = cache
        if swap_in_backward:
            sin, cos = cache[:2]                 # unpacked in the wrong order
        dx = np.empty_like(dy)
        a, b, da, db = _halves(dy, layout) + _halves(dx, layout)
        da[...], db[...] = a * cos + b * sin, -a * sin + b * cos
        return dx
    return forward, backward


def _halves(a, layout):
    half = a.shape[-1] // 2
    return (a[..., 0::2], a[..., 1::2]) if layout == "interleaved" else (a[..., :half], a[..., half:])


def student_rope_line(where, line, term, slip):
    """A student's RoPE with one term of one line (``line`` 0: a, 1: b; ``term`` 0: the a term, 1: the b
    term) of the forward or backward rotation dropped (slip 0) or its sign flipped (slip -1)."""
    def lines(a, b, cos, sin, signs):
        c = list(signs)
        if where_now[0] == where:
            c[2 * line + term] *= slip
        return c[0] * a * cos + c[1] * b * sin, c[2] * a * sin + c[3] * b * cos
    where_now = [None]

    def forward(x, offset=0, base=10000.0, layout="interleaved", scale=1.0):
        T, D = x.shape[2], x.shape[3]
        ang = np.outer((offset + np.arange(T)) / scale, base ** (-np.arange(0, D, 2) / D))
        y = np.empty_like(x)
        a, b, ya, yb = _halves(x, layout) + _halves(y, layout)
        where_now[0] = "forward"
        ya[...], yb[...] = lines(a, b, np.cos(ang), np.sin(ang), (1, -1, 1, 1))
        return y, (np.cos(ang), np.sin(ang), layout)

    def backward(dy, cache):
        cos, sin, layout = cache
        dx = np.empty_like(dy)
        a, b, da, db = _halves(dy, layout) + _halves(dx, layout)
        where_now[0] = "backward"
        da[...], db[...] = lines(a, b, cos, sin, (1, 1, -1, 1))
        return dx
    return forward, backward


def causal(shift=0, left=False, upper=False):
    def causal_mask(T, S=None):
        S = T if S is None else S
        i = np.arange(T)[:, None] + (0 if left else S - T)
        j = np.arange(S)[None, :]
        return j >= i - shift if upper else j <= i + shift
    return causal_mask


def sinusoidal(kind):
    def sinusoidal_table(max_len, d, dtype=np.float64):
        PE = np.zeros((max_len, d))
        for pos in range(max_len):
            for c in range(d):
                i = c // 2
                angle = pos / 10000 ** ((i if kind == "exponent" else 2 * i) / d)
                if kind == "inverted":
                    angle = pos * 10000 ** (2 * i / d)
                if kind == "halves":
                    h = (d + 1) // 2
                    angle = pos / 10000 ** (2 * (c if c < h else c - h) / d)
                    PE[pos, c] = np.sin(angle) if c < h else np.cos(angle)
                    continue
                even = c % 2 == 0
                if kind == "swap":
                    even = not even
                PE[pos, c] = np.sin(angle) if even else np.cos(angle)
        return PE
    return sinusoidal_table


def numerical_gradient(kind=None):
    """A student's central differences (CS231n's loop, x perturbed in place and put back), one thing wrong."""
    def numerical_gradient(f, x, df, h=1e-6, coords=None):
        dx = np.zeros_like(x)
        it = np.nditer(x, flags=["multi_index"], op_flags=["readwrite"])
        while not it.finished:
            ix = it.multi_index
            flat = int(np.ravel_multi_index(ix, x.shape))
            if coords is None or kind == "every" or flat in set(np.asarray(coords).tolist()):
                old = x[ix]
                x[ix] = old + h
                pos = np.array(f(x), copy=True)
                x[ix] = old - h
                neg = np.array(f(x), copy=True)
                x[ix] = old
                if kind == "forward":
                    neg = np.array(f(x), copy=True)
                weight = 1.0 if kind == "no-upstream" else df
                step = h if kind in ("forward", "not-halved") else 2 * h
                dx[ix] = np.sum((pos - neg) * weight) / step
            it.iternext()
        return dx
    return numerical_gradient


def relative_error(kind=None):
    """A student's relative error, its denominator written one way or another."""
    def relative_error(a, n):
        diff = np.max(np.abs(a - n))
        if kind == "one-scale":
            return diff / np.max(np.abs(a))                      # relative to the analytic side alone
        if kind == "sum":
            return diff / (np.max(np.abs(a)) + np.max(np.abs(n)))
        if kind == "per-entry":
            return np.max(np.abs(a - n) / np.maximum(np.abs(a), np.abs(n)))
        return diff / max(np.max(np.abs(a)), np.max(np.abs(n)), 1e-300)
    return relative_error


# ------------------------------------------------------------------ module bugs: a student's backward
def mha_backward(kind):
    def backward(self, dy):
        proj, proj_kv, rope, attn, out, _, repeat = self._pop_cache()
        do, dW_o, db_o = linear_backward(dy, out)
        self.grads["W_o"] += dW_o
        if kind == "doubled":
            self.grads["W_o"] += dW_o
        if kind != "no-W_o":
            self.grads["b_o"] += db_o
        if kind == "no-W_o":
            self.grads["W_o"] -= dW_o
            self.grads["b_o"] += db_o
        dq, dk, dv = A.attention_backward(split_heads(do, self.head_dim), attn)
        if repeat is not None:
            dk, dv = repeat_kv_backward(dk, repeat), repeat_kv_backward(dv, repeat)
        if self.cross:
            dx, dW_q, db_q = linear_backward(merge_heads(dq), proj)
            self.grads["W_q"] += dW_q
            self.grads["b_q"] += db_q
            dmem, dW_kv, db_kv = linear_backward(merge_heads(dv, dk) if kind == "v-k" else merge_heads(dk, dv),
                                                 proj_kv)
            if kind != "no-kv":
                self.grads["W_kv"] += dW_kv
                self.grads["b_kv"] += db_kv
            return dx if kind == "no-dmemory" else (dx, dmem)
        if rope is not None and kind == "rope-forward":
            dq = RO.rope_forward(dq, 0, self.positions.base, self.positions.layout, self.positions.scale)[0]
            dk = RO.rope_forward(dk, 0, self.positions.base, self.positions.layout, self.positions.scale)[0]
        elif rope is not None and kind != "no-rope":
            dq, dk = RO.rope_backward(dq, rope), RO.rope_backward(dk, rope)
        if kind == "q-only":
            dk, dv = 0 * dk, 0 * dv
        if kind == "no-k":
            dk = np.zeros_like(dk)                                   # the key path left out
        merged = merge_heads(dk, dq, dv) if kind == "k-q-v" else merge_heads(dq, dk, dv)
        if kind == "reshape-merge":                                  # no transpose before the reshape
            merged = np.concatenate([dq, dk, dv], axis=1).reshape(dq.shape[0], dq.shape[2], -1)
        dx, dW, db = linear_backward(merged, proj)
        self.grads["W_qkv"] += dW
        self.grads["b_qkv"] += db
        return dx
    return lambda module: setattr(module, "backward", backward.__get__(module))


class ResidualNoIdentity(Residual):
    def backward(self, dy):
        if self.norm_position == "pre":
            grads = self.sublayer.backward(self.dropout.backward(dy))
            dh, extra = (grads[0], grads[1:]) if isinstance(grads, tuple) else (grads, ())
            dx = self.norm.backward(dh)
        else:
            ds = self.norm.backward(dy)
            grads = self.sublayer.backward(self.dropout.backward(ds))
            dx, extra = (grads[0], grads[1:]) if isinstance(grads, tuple) else (grads, ())
        return (dx, *extra) if extra else dx


class ResidualBranchDropped(Residual):
    def backward(self, dy):
        if self.norm_position == "pre":
            grads = self.sublayer.backward(self.dropout.backward(dy))
            dh, extra = (grads[0], grads[1:]) if isinstance(grads, tuple) else (grads, ())
            dx = self.norm.backward(dh)
            dx = dy                                    # the student's `dx = dy` where `dx += dy` belongs
        else:
            ds = self.norm.backward(dy)
            grads = self.sublayer.backward(self.dropout.backward(ds))
            dx, extra = (grads[0], grads[1:]) if isinstance(grads, tuple) else (grads, ())
            dx = ds
        return (dx, *extra) if extra else dx


class ResidualNoNorm(Residual):
    def backward(self, dy):
        grads = self.sublayer.backward(self.dropout.backward(dy))
        dh, extra = (grads[0], grads[1:]) if isinstance(grads, tuple) else (grads, ())
        return (dh + dy, *extra) if extra else dh + dy


class ResidualPostAddsDy(Residual):
    def backward(self, dy):
        ds = self.norm.backward(dy)
        grads = self.sublayer.backward(self.dropout.backward(ds))
        dx, extra = (grads[0], grads[1:]) if isinstance(grads, tuple) else (grads, ())
        return (dx + dy, *extra) if extra else dx + dy


class ResidualNoDropout(Residual):
    def backward(self, dy):
        grads = self.sublayer.backward(dy)
        dh, extra = (grads[0], grads[1:]) if isinstance(grads, tuple) else (grads, ())
        dx = self.norm.backward(dh) + dy
        return (dx, *extra) if extra else dx


def residuals(cls):
    def patch(block):
        for _, m in block.named_modules():
            if isinstance(m, Residual):
                m.__class__ = cls
    return patch


def block_backward(kind):
    def backward(self, dy):
        if kind == "forward-order":
            dx = self.attn.backward(dy)
            if self.cross:
                dx, dmem = self.cross_attn.backward(dx)
                return self.ffn.backward(dx), dmem
            return self.ffn.backward(dx)
        dx = self.ffn.backward(dy)
        if kind == "ffn-only":
            return dx
        dmem = None
        if self.cross and kind != "skip-cross":
            dx, dmem = self.cross_attn.backward(dx)
        dx = self.attn.backward(dx)
        return dx if dmem is None or kind == "no-dmemory" else (dx, dmem)
    return lambda module: setattr(module, "backward", backward.__get__(module))


# mistake name -> (case, tensor it breaks, forward, backward, module patch)
PLANTED = {
    "linear-no-bias": ("linear: x (B, T, d_in), d_in != d_out", "out", linear_no_bias, None),
    "linear-grad-averaged": ("linear: x (B, T, d_in), d_in != d_out", "dW", None, linear_averaged),
    "linear-first-batch-only": ("linear: x (B, T, d_in), d_in != d_out", "dW", None, linear_first_row),
    "relu-no-upstream": ("relu: x (B, T, C)", "dx", None, relu_no_upstream),
    "relu-times-output": ("relu: x (B, T, C)", "dx", relu_keep_x, relu_times_output),
    "gelu-other-approximation": ("gelu: exact (erf)", "out", gelu_always_tanh, _gelu_always_tanh_backward),
    "gelu-phi-only": ("gelu: exact (erf)", "dx", gelu_keep_x, gelu_backward_phi_only),
    "gelu-no-upstream": ("gelu: tanh approximation", "dx", None, gelu_no_upstream),
    "gelu-x-phi-only": ("gelu: exact (erf)", "dx", *gelu_exact("x-phi-only")),
    "gelu-product-rule-minus": ("gelu: exact (erf)", "dx", *gelu_exact("minus")),
    "gelu-pdf-unnormalised": ("gelu: exact (erf)", "dx", *gelu_exact("pdf-unnormalised")),
    "gelu-pdf-exponent": ("gelu: exact (erf)", "dx", *gelu_exact("pdf-exponent")),
    "gelu-erf-no-sqrt2": ("gelu: exact (erf)", "out", *gelu_exact("erf-no-sqrt2")),
    "gelu-cdf-sign": ("gelu: exact (erf)", "out", *gelu_student("cdf-sign")),
    "gelu-cdf-no-half": ("gelu: exact (erf)", "out", *gelu_student("cdf-no-half")),
    "gelu-pdf-for-cdf": ("gelu: exact (erf)", "out", *gelu_student("pdf-for-cdf")),
    "gelu-pdf-sign": ("gelu: exact (erf)", "dx", *gelu_exact("pdf-sign")),
    "gelu-dx-no-x": ("gelu: exact (erf)", "dx", *gelu_exact("no-x")),
    "gelu-derivative-other-form": ("gelu: tanh approximation", "dx", *gelu_student("exact-derivative")),
    "gelu-tanh-half": ("gelu: tanh approximation", "out", *gelu_student("sigmoid-u")),
    "gelu-tanh-no-sqrt-2-over-pi": ("gelu: tanh approximation", "out", *gelu_student("no-sqrt-2-over-pi")),
    "gelu-tanh-cubic": ("gelu: tanh approximation", "out", *gelu_student("cubic-k-x2")),
    "gelu-tanh-du": ("gelu: tanh approximation", "dx", *gelu_student("du-no-3")),
    "gelu-tanh-sigmoid-derivative": ("gelu: tanh approximation", "dx", *gelu_student("tanh-derivative")),
    "softmax-wrong-axis": ("softmax: rows of x (B, T, n)", "out", softmax_cols, None),
    "softmax-no-y-in-sum": ("softmax: rows of x (B, T, n)", "dx", None, softmax_bwd("no-y")),
    "softmax-no-sum-term": ("softmax: rows of x (B, T, n)", "dx", None, softmax_bwd("no-sum")),
    "softmax-sum-is-mean": ("softmax: rows of x (B, T, n)", "dx", None, softmax_bwd("mean")),
    "softmax-no-outer-y": ("softmax: rows of x (B, T, n)", "dx", None, softmax_bwd("no-outer-y")),
    "softmax-sum-term-sign": ("softmax: rows of x (B, T, n)", "dx", None, softmax_bwd("sign")),
    "softmax-diagonal-only": ("softmax: rows of x (B, T, n)", "dx", None, softmax_bwd("diag")),
    "log_softmax-no-logsumexp": ("log_softmax: rows of x (B, T, V)", "out", log_softmax_fwd("shift-only"), None),
    "log_softmax-max-not-added-back": ("log_softmax: rows of x (B, T, V)", "out", log_softmax_fwd("no-max"), None),
    "log_softmax-no-sum": ("log_softmax: rows of x (B, T, V)", "dx", None, log_softmax_bwd("no-sum")),
    "log_softmax-lse-constant": ("log_softmax: rows of x (B, T, V)", "dx", None, log_softmax_bwd("const")),
    "log_softmax-sign": ("log_softmax: rows of x (B, T, V)", "dx", None, log_softmax_bwd("sign")),
    "ce-smoothing-over-V-1": ("cross_entropy: label smoothing 0.1 and ignored targets", "out",
                              *student_cross_entropy(spread="V-1")),
    "ce-mean-over-all-targets": ("cross_entropy: ignored targets, no smoothing", "out",
                                 *student_cross_entropy(mean_over="all")),
    "ce-backward-not-divided": ("cross_entropy: ignored targets, no smoothing", "dlogits", None,
                                ce_backward("not-divided")),
    "ce-sum-not-mean": ("cross_entropy: ignored targets, no smoothing", "out", *student_cross_entropy(mean_over="sum")),
    "ce-smoothing-ignored": ("cross_entropy: label smoothing 0.1 and ignored targets", "out",
                             *student_cross_entropy(use_smoothing=False)),
    "ce-backward-smoothing-ignored": ("cross_entropy: label smoothing 0.1 and ignored targets", "dlogits",
                                      None, ce_backward("no-smoothing")),
    "ce-ignored-rows-get-gradient": ("cross_entropy: ignored targets, no smoothing", "dlogits", None,
                                     ce_backward("all-rows")),
    "ce-no-upstream": ("cross_entropy: ignored targets, no smoothing", "dlogits", None, ce_backward("no-upstream")),
    "ce-smoothing-summed": ("cross_entropy: label smoothing 0.1 and ignored targets", "out",
                            *student_cross_entropy(spread="summed")),
    "ce-backward-smoothing-not-spread": ("cross_entropy: label smoothing 0.1 and ignored targets", "dlogits",
                                         None, ce_backward("not-spread")),
    "layernorm-unbiased-variance": ("layernorm: x (B, T, C)", "out", layernorm_fwd("unbiased"), None),
    "layernorm-eps-outside-sqrt": ("layernorm: rows of variance near eps", "out", layernorm_fwd("eps-outside"), None),
    "layernorm-no-sqrt": ("layernorm: x (B, T, C)", "out", layernorm_fwd("no-sqrt"), None),
    "layernorm-not-scaled": ("layernorm: x (B, T, C)", "out", layernorm_fwd("not-scaled"), None),
    "layernorm-no-mean-terms": ("layernorm: x (B, T, C)", "dx", None, layernorm_bwd("no-means")),
    "layernorm-no-mean-dxhat": ("layernorm: x (B, T, C)", "dx", None, layernorm_bwd("no-mean")),
    "layernorm-no-xhat-mean": ("layernorm: x (B, T, C)", "dx", None, layernorm_bwd("no-xhat-mean")),
    "layernorm-mean-term-sign": ("layernorm: x (B, T, C)", "dx", None, layernorm_bwd("plus-mean")),
    "layernorm-dx-no-gamma": ("layernorm: x (B, T, C)", "dx", None, layernorm_bwd("no-gamma")),
    "layernorm-dgamma-no-xhat": ("layernorm: x (B, T, C)", "dgamma", None, layernorm_bwd("dgamma-no-xhat")),
    "layernorm-dgamma-x": ("layernorm: x (B, T, C)", "dgamma", layernorm_keep_x, layernorm_dgamma_x),
    "layernorm-params-averaged": ("layernorm: x (B, T, C)", "dbeta", None, layernorm_bwd("averaged")),
    "rmsnorm-eps-outside-sqrt": ("rmsnorm: rows of mean square near eps", "out", rmsnorm_fwd("eps-outside"), None),
    "rmsnorm-sum-of-squares": ("rmsnorm: x (B, T, C)", "out", rmsnorm_fwd("sum"), None),
    "rmsnorm-centred": ("rmsnorm: x (B, T, C)", "out", rmsnorm_fwd("centred"), None),
    "rmsnorm-no-sqrt": ("rmsnorm: x (B, T, C)", "out", rmsnorm_fwd("no-sqrt"), None),
    "rmsnorm-dgamma-no-xhat": ("rmsnorm: x (B, T, C)", "dgamma", None, rmsnorm_bwd("dgamma-no-xhat")),
    "rmsnorm-rms-constant": ("rmsnorm: x (B, T, C)", "dx", None, rmsnorm_bwd("const")),
    "rmsnorm-mean-term-sign": ("rmsnorm: x (B, T, C)", "dx", None, rmsnorm_bwd("plus")),
    "rmsnorm-dx-no-gamma": ("rmsnorm: x (B, T, C)", "dx", None, rmsnorm_bwd("no-gamma")),
    "rmsnorm-dgamma-x": ("rmsnorm: x (B, T, C)", "dgamma", None, rmsnorm_bwd("dgamma-x")),
    "embedding-fancy-index-add": ("embedding: repeated ids (their gradients add up)", "dW", None, embedding_fancy),
    "log_softmax-sum-dropped": ("log_softmax: rows of x (B, T, V)", "dx", None, log_softmax_bwd("p-alone")),
    "rmsnorm-sum-not-mean": ("rmsnorm: x (B, T, C)", "dx", None, rmsnorm_bwd("sum")),
    "embedding-sorted-scatter-unsorted-dout": ("embedding: a vocabulary above 128 (the sorted scatter)", "dW", None,
                                               embedding_sorted_unsorted_dout),
    "dropout-scaled-by-one-over-p": ("dropout: training with a given keep-mask", "out", *dropout_pair("one-over-p")),
    "dropout-backward-one-over-p": ("dropout: training with a given keep-mask", "dx", None, dropout_bwd("one-over-p")),
    "attention-mask-after-softmax": ("attention: masked keys", "out", *attention_mask_after_softmax()),
    "dropout-no-scaling": ("dropout: training with a given keep-mask", "out", *dropout_pair("no-scale")),
    "dropout-scaled-by-keep-probability": ("dropout: training with a given keep-mask", "out",
                                           *dropout_pair("times-keep")),
    "dropout-mask-inverted": ("dropout: training with a given keep-mask", "out", *dropout_pair("inverted")),
    "dropout-backward-unmasked": ("dropout: training with a given keep-mask", "dx", None, dropout_bwd("unmasked")),
    "dropout-backward-unscaled": ("dropout: training with a given keep-mask", "dx", None, dropout_bwd("unscaled")),
    "dropout-no-upstream": ("dropout: training with a given keep-mask", "dx", None, dropout_bwd("no-upstream")),
    "dropout-own-mask": ("dropout: training with a given keep-mask", "out", *dropout_pair("own-mask")),
    "dropout-in-eval": ("dropout: eval mode (training=False) is the identity", "out", *dropout_pair("eval-drops")),
    "attention-no-scale": ("attention: masked keys", "out", *student_attention(scale="none")),
    "attention-scale-1-over-D": ("attention: masked keys", "out", *student_attention(scale="D")),
    "attention-backward-no-scale": ("attention: masked keys", "dq", *student_attention(backward_scale=False)),
    "attention-mask-ignored": ("attention: masked keys", "out", *student_attention(use_mask=False)),
    "attention-mask-inverted": ("attention: masked keys", "out", *student_attention(invert=True)),
    "attention-bias-ignored": ("attention: additive bias (dbias)", "out", *student_attention(use_bias=False)),
    "attention-softmax-over-queries": ("attention: masked keys", "out", *student_attention(axis=-2)),
    "attention-dropout-ignored": ("attention: dropout on P with a given drop_mask", "out",
                                  *student_attention(dropout="ignored")),
    "attention-dropout-unscaled": ("attention: dropout on P with a given drop_mask", "out",
                                   *student_attention(dropout="unscaled")),
    "attention-dropout-backward-ignored": ("attention: dropout on P with a given drop_mask", "dv",
                                           *student_attention(dropout="backward-ignored")),
    "repeat-kv-not-summed": ("repeat_kv: G=2 kv heads for H=4 query heads", "dx",
                             *student_repeat_kv("not-summed")),
    "repeat-kv-tiled": ("repeat_kv: G=2 kv heads for H=4 query heads", "out", *student_repeat_kv("tiled")),
    "repeat-kv-one-copy": ("repeat_kv: multi-query, G=1 kv head for H=3 query heads", "dx",
                           *student_repeat_kv("one-copy")),
    "attention-dbias-not-reduced": ("attention: additive bias (dbias)", "dbias", *student_attention(reduce_bias=False)),
    "rope-direction": ("rope: interleaved pairs, offset > 0", "out", *student_rope(direction=-1)),
    "rope-backward-forward-rotation": ("rope: interleaved pairs, offset > 0", "dx", *student_rope(back=1)),
    "rope-layout-ignored": ("rope: half-split layout", "out", *student_rope(layout_fixed="interleaved")),
    "rope-scale-ignored": ("rope: scale 2 (position interpolation)", "out", *student_rope(use_scale=False)),
    "rope-offset-ignored": ("rope: interleaved pairs, offset > 0", "out", *student_rope(use_offset=False)),
    "rope-theta-exponent": ("rope: interleaved pairs, offset > 0", "out", *student_rope(exponent=1)),
    "rope-frequency-inverted": ("rope: half-split layout", "out",
                                *student_rope_tables(theta=lambda j, D, base: base ** (2 * j / D))),
    "rope-scale-multiplied": ("rope: scale 2 (position interpolation)", "out",
                              *student_rope_tables(multiply_scale=True)),
    "rope-cos-sin-swapped": ("rope: interleaved pairs, offset > 0", "out", *student_rope_tables(swap=True)),
    "rope-rotation-term": ("rope: interleaved pairs, offset > 0", "out", *student_rope_line("forward", 0, 1, -1)),
    "rope-backward-rotation-term": ("rope: half-split layout", "dx", *student_rope_line("backward", 1, 0, 0)),
    "causal-left-aligned": ("causal_mask: S > T (the queries are the last T positions)", "out",
                            causal(left=True), None),
    "causal-diagonal-hidden": ("causal_mask: T = S", "out", causal(shift=-1), None),
    "causal-one-future-key": ("causal_mask: T = S", "out", causal(shift=1), None),
    "causal-upper-triangle": ("causal_mask: T = S", "out", causal(upper=True), None),
    "sinusoidal-sin-cos-swapped": ("sinusoidal: even d", "out", sinusoidal("swap"), None),
    "sinusoidal-exponent": ("sinusoidal: even d", "out", sinusoidal("exponent"), None),
    "sinusoidal-halves": ("sinusoidal: even d", "out", sinusoidal("halves"), None),
    "sinusoidal-frequency-inverted": ("sinusoidal: even d", "out", sinusoidal("inverted"), None),
    "gradcheck-one-sided": ("numerical_gradient: f(x) = tanh(x W + b), x (B, d_in)", "out",
                            numerical_gradient("forward"), None),
    "gradcheck-not-halved": ("numerical_gradient: f(x) a number (log Σ exp x), df a number", "out",
                             numerical_gradient("not-halved"), None),
    "gradcheck-no-upstream": ("numerical_gradient: f(x) = tanh(x W + b), x (B, d_in)", "out",
                              numerical_gradient("no-upstream"), None),
    "gradcheck-coords-ignored": ("numerical_gradient: 8 entries of x (B, T, C) (coords)", "out",
                                 numerical_gradient("every"), None),
    "relative-error-one-scale": ("relative_error: the estimate twice as large (the larger scale divides)", "out",
                                 relative_error("one-scale"), None),
    "relative-error-sum-of-scales": ("relative_error: a gradient and an estimate close to it", "out",
                                     relative_error("sum"), None),
    "relative-error-per-entry": ("relative_error: a gradient and an estimate close to it", "out",
                                 relative_error("per-entry"), None),
}
MODULE_PLANTED = {
    "mha-dmemory-missing": ("mha: cross-attention (dmemory, W_kv)", "dmemory", mha_backward("no-dmemory")),
    "mha-rope-not-undone": ("mha: RoPE, interleaved", "dx", mha_backward("no-rope")),
    "mha-rope-wrong-way": ("mha: RoPE, half-split layout, scale 2", "dx", mha_backward("rope-forward")),
    "mha-query-path-only": ("mha: causal self-attention", "dx", mha_backward("q-only")),
    "mha-key-path-dropped": ("mha: causal self-attention", "dx", mha_backward("no-k")),
    "mha-heads-merged-by-reshape": ("mha: causal self-attention", "dx", mha_backward("reshape-merge")),
    "mha-kv-gradient-missing": ("mha: cross-attention (dmemory, W_kv)", "dW_kv", mha_backward("no-kv")),
    "mha-merge-order": ("mha: causal self-attention", "dx", mha_backward("k-q-v")),
    "mha-gradient-never-accumulated": ("mha: causal self-attention", "dW_o", mha_backward("no-W_o")),
    "mha-gradient-doubled": ("mha: grouped heads (n_kv_head=2 < n_head=4)", "dW_o", mha_backward("doubled")),
    "block-dmemory-missing": ("block: cross-attention (dmemory)", "dmemory", block_backward("no-dmemory")),
    "residual-identity-missing": ("block: pre-norm decoder block", "dx", residuals(ResidualNoIdentity)),
    "residual-norm-skipped": ("block: pre-norm decoder block", "dx", residuals(ResidualNoNorm)),
    "residual-branch-missing": ("block: post-norm", "dx", residuals(ResidualBranchDropped)),
    "residual-post-norm-adds-dy": ("block: post-norm", "dx", residuals(ResidualPostAddsDy)),
    "residual-dropout-skipped": ("block: residual dropout p=0.3", "dx", residuals(ResidualNoDropout)),
    "block-cross-attention-skipped": ("block: cross-attention (dmemory)", "dx", block_backward("skip-cross")),
    "block-forward-order": ("block: RMSNorm, RoPE, grouped heads", "dx", block_backward("forward-order")),
    "block-gradient-never-accumulated": ("block: pre-norm decoder block", "dattn.sublayer.W_o",
                                         block_backward("ffn-only")),
}


def test_every_catalogue_entry_has_a_planted_bug():
    from test_homework_rubric_work import PLANTED_HERE      # the bugs the newer cases draw, planted there
    names = {m.name for m in catalogue()}
    assert names == set(PLANTED) | set(MODULE_PLANTED) | SQUARE_ONLY | set(PLANTED_HERE)
    assert len(names) == len(catalogue())                     # names are unique


SQUARE_ONLY = {"attention-dv-not-transposed"}        # T = S only: otherwise the shapes do not fit, it raises


def test_dv_without_the_transpose_is_named_where_the_shapes_fit():
    forward, backward = student_attention()
    def dv_not_transposed(dout, cache):
        dq, dk, _ = backward(dout, cache)
        q, K, Vv, P, MB, c, bias_shape = cache
        return dq, dk, (P * MB) @ dout                       # P̃ dout: P̃ᵀ dout belongs
    graded = by_name("attention: masked keys")
    square = [s for s in range(40) if (lambda c: c.inputs["q"].shape[2] == c.inputs["k"].shape[2])(
        graded.draw(np.random.default_rng([3, s])))][:2]
    _assert_named(_diagnoses("attention: masked keys", forward, dv_not_transposed, seeds=square), "dv",
                  "attention-dv-not-transposed")


def _assert_named(results, tensor, name):
    wrong = [messages for _, messages in results if tensor in messages]
    assert wrong, f"the planted bug left {tensor} right in every draw"
    for messages in wrong:
        assert messages[tensor] == _message(name), messages


@pytest.mark.parametrize("name", sorted(PLANTED))
def test_a_planted_bug_in_a_function_is_named(name):
    case, tensor, forward, backward = PLANTED[name]
    _assert_named(_diagnoses(case, forward, backward), tensor, name)


@pytest.mark.parametrize("name", sorted(MODULE_PLANTED))
def test_a_planted_bug_in_a_module_backward_is_named(name):
    case, tensor, patch = MODULE_PLANTED[name]
    _assert_named(_diagnoses(case, module_patch=patch), tensor, name)


def test_key_and_value_merged_the_wrong_way_round_in_cross_attention_is_named():
    _assert_named(_diagnoses("mha: cross-attention (dmemory, W_kv)", module_patch=mha_backward("v-k")),
                  "dmemory", "mha-merge-order")


# ------------------------------------------------------------------ families: each way of writing the mistake
@pytest.mark.parametrize("where, line, term, slip", [(w, line, term, slip) for w in ("forward", "backward")
                                                     for line in (0, 1) for term in (0, 1) for slip in (0, -1)])
def test_every_dropped_or_flipped_rotation_term_is_named(where, line, term, slip):
    tensor, name = ("out", "rope-rotation-term") if where == "forward" else ("dx", "rope-backward-rotation-term")
    _assert_named(_diagnoses("rope: half-split layout", *student_rope_line(where, line, term, slip)), tensor, name)


@pytest.mark.parametrize("case, tensor, name, planted", [
    ("rope: interleaved pairs, offset > 0", "dx", "rope-cos-sin-swapped", student_rope_tables(swap_in_backward=True)),
    ("rope: interleaved pairs, offset > 0", "dx", "rope-theta-exponent", student_rope(exponent=1)),
    ("rope: interleaved pairs, offset > 0", "out", "rope-theta-exponent",
     student_rope_tables(theta=lambda j, D, base: base ** (-2 * j / (D // 2)))),
    ("rope: interleaved pairs, offset > 0", "out", "rope-theta-exponent",
     student_rope_tables(theta=lambda j, D, base: base ** (-2.0 * j))),
    ("rope: interleaved pairs, offset > 0", "out", "rope-theta-exponent",
     student_rope_tables(theta=lambda j, D, base: 1.0 + 0 * j)),
    ("gelu: tanh approximation", "out", "gelu-tanh-cubic", gelu_student("cubic-no-k")),
    ("gelu: tanh approximation", "dx", "gelu-tanh-du", gelu_student("du-no-cubic")),
    ("gelu: tanh approximation", "dx", "gelu-tanh-half", gelu_student("sigmoid-u")),
    ("gelu: exact (erf)", "dx", "gelu-cdf-sign", gelu_student("cdf-sign"))])
def test_other_ways_of_writing_a_family_mistake_are_named(case, tensor, name, planted):
    _assert_named(_diagnoses(case, *planted), tensor, name)


def test_correct_gelu_and_rope_written_afresh_get_no_diagnosis():
    for assignment, planted in (("gelu", gelu_student(None)), ("rope", student_rope_tables())):
        for graded in CASES[assignment]:
            if graded.dtype == "float64":
                for student, messages in _diagnoses(graded.name, *planted):
                    assert messages == {}, graded.name


# ------------------------------------------------------------------ correct code: no diagnosis
def correct_softmax_forward(x, axis=-1):
    m = np.max(x, axis=-1, keepdims=True)
    e = np.exp(x - np.where(np.isfinite(m), m, 0.0))
    s = e.sum(-1, keepdims=True)
    y = np.divide(e, s, out=np.zeros_like(e), where=s > 0)
    return y, y


def correct_softmax_backward(dy, y):
    return y * (dy - (dy * y).sum(-1, keepdims=True))


def correct_layernorm_forward(x, gamma, beta, eps=1e-5):
    xc = x - x.mean(-1, keepdims=True)
    rstd = 1 / np.sqrt((xc * xc).mean(-1, keepdims=True) + eps)
    return xc * rstd * gamma + beta, (xc * rstd, rstd, gamma)


def correct_layernorm_backward(dy, cache):
    xhat, rstd, gamma = cache
    g = dy * gamma
    dx = rstd * (g - g.mean(-1, keepdims=True) - xhat * (g * xhat).mean(-1, keepdims=True))
    rows = (-1, dy.shape[-1])
    return dx, (dy * xhat).reshape(rows).sum(0), dy.reshape(rows).sum(0)


@pytest.mark.parametrize("assignment, forward, backward", [
    ("softmax", correct_softmax_forward, correct_softmax_backward),
    ("layernorm", correct_layernorm_forward, correct_layernorm_backward)])
def test_correct_code_written_afresh_gets_no_diagnosis(assignment, forward, backward):
    for graded in CASES[assignment]:
        if graded.dtype == "float64":
            for student, messages in _diagnoses(graded.name, forward, backward):
                assert messages == {}


def test_a_gradient_checker_written_afresh_is_right_on_every_known_function():
    """CS231n's loop, x perturbed in place: within the tolerance of the closed-form gradients, no
    diagnosis; the relative error as defined: the same."""
    for graded in CASES["gradcheck"]:
        planted = numerical_gradient() if graded.check.forward.endswith("numerical_gradient") else relative_error()
        for student, messages in _diagnoses(graded.name, planted):
            assert messages == {}, graded.name


def test_the_reference_itself_gets_no_diagnosis_in_any_case():
    for graded in (g for cases in CASES.values() for g in cases):
        case = graded.draw(np.random.default_rng(5))
        ref, g = reference_results(graded, case)
        assert diagnose_all(graded.assignment, trial_inputs(graded, case, g), ref, ref,
                            function=_function(graded)) == {}, graded.name


# ------------------------------------------------------------------ promises that are not a value
def test_a_float64_result_for_float32_input_is_named():
    x = np.ones((2, 3), np.float32)
    promoted = x * np.float64(2.0)            # a float64 scalar array promotes: NumPy 2 keeps the array's
    promoted = promoted.astype(np.float64)    # dtype for a NumPy scalar, so the student's astype is explicit
    assert "float64 for float32 inputs" in dtype_message("dx", promoted, np.float32)
    assert dtype_message("dx", x, np.float32) is None


def test_a_backward_that_overwrites_its_upstream_gradient_is_named():
    def relu_backward_in_place(dy, cache):
        dy[~cache.positive] = 0                # the student's shortcut: writes into the caller's array
        return dy
    x = np.random.default_rng(0).standard_normal((3, 4))
    _, cache = relu_forward(x)
    dy = np.random.default_rng(1).standard_normal((3, 4))
    before = dy.copy()
    dx = relu_backward_in_place(dy, cache)
    assert np.array_equal(dx, before * cache.positive)                  # its dx is right ...
    message = mutation_message("dy", before, dy, upstream=True)
    assert message.startswith("your function changed the upstream gradient `dy` in place")  # ... and the grader says so
    assert mutation_message("dy", before, before.copy()) is None


def test_nan_on_fully_masked_rows_is_named():
    def naive_softmax(x, axis=-1):
        e = np.exp(x - x.max(-1, keepdims=True))       # -inf - (-inf) = NaN on a fully masked row
        y = e / e.sum(-1, keepdims=True)
        return y, SM.SoftmaxCache(y, -1)
    with np.errstate(invalid="ignore"):
        results = _diagnoses("softmax: masked (-inf) entries and a fully masked row (0, never NaN)", naive_softmax)
    for student, messages in results:
        assert messages["out"].startswith("NaN in out on the 1 row(s) where every entry is masked")
    assert nan_message("out", np.zeros(3), np.zeros(3)) is None


def test_a_scalar_that_means_nothing_is_not_called_a_factor():
    r = np.random.default_rng(0).standard_normal((3, 4))
    assert diagnose("softmax", "dx", {}, 0.999 * r, r) == ""
    assert "factor" not in diagnose("softmax", "dx", {}, 0.999 * r, r)


# ------------------------------------------------------------------ generic: another array of the call, a scale
def _only_message(results, tensor):
    wrong = [messages[tensor] for _, messages in results if tensor in messages]
    assert wrong, f"the planted bug left {tensor} right in every draw"
    return wrong


def test_gradients_returned_in_the_wrong_order_are_named():
    def backward(dy, cache):
        dx, dgamma, dbeta = N.layernorm_backward(dy, cache)
        return dx, dbeta, dgamma
    for message in _only_message(_diagnoses("layernorm: x (B, T, C)", None, backward), "dgamma"):
        assert message.startswith("dgamma holds what dbeta should be: the gradients come back in the wrong order")


def test_the_upstream_gradient_passed_through_unchanged_is_named():
    def backward(dy, cache):
        return dy * 1.0                                # the mask forgotten: dy * cache.positive
    for message in _only_message(_diagnoses("relu: x (B, T, C)", None, backward), "dx"):
        assert message.startswith("dx is the upstream gradient as it was given")


def test_a_missing_factor_of_an_input_is_named():
    def forward(x, gamma, eps=1e-6):
        y, cache = N.rmsnorm_forward(x, gamma, eps)
        return y / gamma, cache                        # xhat alone: gamma forgotten
    for message in _only_message(_diagnoses("rmsnorm: x (B, T, C)", forward), "out"):
        assert message.startswith("out misses a factor `gamma`")


def test_a_factor_that_is_a_count_of_the_inputs_is_named():
    def forward(logits, targets, ignore_index=-100, smoothing=0.0):
        loss, cache = CE.cross_entropy_forward(logits, targets, ignore_index, smoothing)
        return loss / targets.size, cache              # averaged over every target, then over the kept again
    for message in _only_message(_diagnoses("cross_entropy: ignored targets, no smoothing", forward), "out"):
        assert message.startswith("1/") and "a mean where a sum belongs" in message


def test_a_factor_per_row_is_named():
    def forward(x, axis=-1):
        e = np.exp(x - x.max(-1, keepdims=True))       # not normalised: e / e.sum(...) forgotten
        return e, SM.SoftmaxCache(e, -1)
    for message in _only_message(_diagnoses("softmax: rows of x (B, T, n)", forward), "out"):
        assert message.startswith("off by a factor that is constant along the last axis but differs from row to row")


def test_a_factor_per_feature_is_named_and_a_single_scalar_is_not_a_pattern():
    from minitransformer.homework.diagnose import scale_pattern
    r = np.random.default_rng(0).standard_normal((3, 4, 5))
    assert scale_pattern(r * np.arange(1.0, 6.0), r).startswith("off by a factor per feature")
    assert scale_pattern(r * 3.0, r) == "" and scale_pattern(r + 1.0, r) == ""


def test_a_family_stored_in_a_students_copy_is_recognised(tmp_path):
    from minitransformer.homework import expected
    from minitransformer.homework.reference import write_expected
    (tmp_path / "homework").mkdir()
    write_expected(tmp_path, ["rope"])
    stored = expected.Stored(tmp_path / "homework")
    assert any("#" in k for k in stored.arrays.files)           # the candidates after the first, keyed dx#k
    i, graded = next((i, g) for i, g in enumerate(CASES["rope"]) if g.name == "rope: half-split layout")
    drawn = stored.case(graded, i, 0, expected.PUBLIC_SEED)
    student, _ = run_pair(drawn.case, *student_rope_line("backward", 1, 0, 0), g=drawn.upstream)
    messages = stored.diagnose(graded, i, 0, drawn, student)
    assert messages == {"dx": _message("rope-backward-rotation-term")}


def test_docs_grading_lists_every_catalogue_entry_once():
    import re
    from pathlib import Path
    text = (Path(__file__).resolve().parents[1] / "docs" / "grading.md").read_text(encoding="utf-8")
    listed = re.findall(r"^\| \w+ \| `([\w-]+)` \|", text, re.M)
    assert sorted(listed) == sorted(m.name for m in catalogue())
