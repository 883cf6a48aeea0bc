"""Bugs written by hand, as students write them, graded by the real grader: is the mistake named?

    python benchmarks/handwritten_bugs.py                 # every bug, one JSON line each, then a summary
    python benchmarks/handwritten_bugs.py --only issue    # the issue's bugs (or: fresh, equivalent)
    python benchmarks/handwritten_bugs.py log-softmax-no-sum dropout-one-over-p

Each bug replaces one function of the package (its whole ``def``, as the student writes
it) in an otherwise correct submission, graded by ``homework.grade.grade`` (staged, the
confined child, the graded cases, the diagnoses, the rubric) on the assignments whose
targets live in that file. Printed per bug: the assignment, its score, the points lost
in the other assignments of the file (must be 0), the explanation the student reads
(``Result.explanation``; where the grader has none, the wrong rows' diagnoses and the
exception joined), and ``named``: whether it contains every keyword written beside the
bug BEFORE its message was read. Three correct implementations written differently
(``equivalent``) must keep full marks and get no explanation.

``origin``: "issue", the bugs of the feedback issue (the 24 written by someone who had
not read the catalogue, as far as the issue names them, and the handout's finds);
"fresh", bugs written for this file without reading the catalogue first; "lead", four more written
the same way by a second engineer after the catalogue grew, each one line of the reference's own
function changed (``one_line``).
"""
from __future__ import annotations

import argparse
import ast
import json
import os
import shutil
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.dirname(HERE), HERE]
from train_step import machine  # noqa: E402

from minitransformer.homework.export import PACKAGE_DIR, _find  # noqa: E402
from minitransformer.homework.grade import grade  # noqa: E402
from minitransformer.homework.registry import assignments  # noqa: E402
from minitransformer.homework.sandbox import Limits  # noqa: E402


@dataclass(frozen=True)
class Bug:
    name: str
    assignment: str
    target: str            # "module:qualname" whose def the code replaces
    code: str              # the student's def (a method's at column 0 too)
    keywords: tuple        # what the explanation must contain (lower case), written before reading it
    origin: str            # "issue" | "fresh" | "lead" | "equivalent"


MHA_BACKWARD = '''
def backward(self, dy):
    proj, proj_kv, rope, attn, out, positions, repeat = self._pop_cache()
    do, dW_o, db_o = linear_backward(dy, out)
    self._accumulate_pair("W_o", dW_o, "b_o", db_o)
    dq, dk, dv, dtables = self.positions.attend_backward(
        attention_backward, SPLIT, attn, positions)
    for name, dtable in dtables.items():
        self._accumulate(name, dtable)
    if repeat is not None:
        dk = repeat_kv_backward(dk, repeat)
        dv = repeat_kv_backward(dv, repeat)
    if self.cross:
        dx, dW_q, db_q = linear_backward(merge_heads(dq), proj)
        self._accumulate_pair("W_q", dW_q, "b_q", db_q)
        dmemory, dW_kv, db_kv = linear_backward(merge_heads(dk, dv), proj_kv)
        self._accumulate_pair("W_kv", dW_kv, "b_kv", db_kv)
        return dx, dmemory
    dq = self.positions.rotate_backward(dq, rope)
    dk = self.positions.rotate_backward(dk, rope)
    dx, dW_qkv, db_qkv = linear_backward(MERGED, proj)
    self._accumulate_pair("W_qkv", dW_qkv, "b_qkv", db_qkv)
    return dx
'''


def mha(split="split_heads(do, self.head_dim)", merged="merge_heads(dq, dk, dv)") -> str:
    return MHA_BACKWARD.replace("SPLIT", split).replace("MERGED", merged)


ATTENTION_BACKWARD = '''
def attention_backward(dout, cache):
    q, k_scaled, v, P, scale, bias_shape, dropout = cache
    P_dropped = P if dropout is None else P * dropout.mask * dropout.scale
    DV
    dP_dropped = dout @ v.swapaxes(-1, -2)
    dP = dP_dropped if dropout is None else dropout_backward(dP_dropped, dropout)
    dscores = P * (dP - (dP * P).sum(-1, keepdims=True))
    dbias = None if bias_shape is None else _sum_to_shape(dscores, bias_shape)
    dq = dscores @ k_scaled
    dk = dscores.swapaxes(-1, -2) @ q * scale
    return (dq, dk, dv) if dbias is None else (dq, dk, dv, dbias)
'''

ATTENTION_FORWARD = '''
def attention_forward(q, k, v, mask=None, bias=None, *, p_drop=0.0, rng=None, training=True, drop_mask=None):
    scale = q.shape[-1] ** -0.5
    k_scaled = k * scale
    scores = q @ k_scaled.swapaxes(-1, -2)
    if bias is not None:
        scores = scores + bias
    BODY
    P_dropped, dropout = dropout_forward(P, p_drop, rng, training, drop_mask)
    out = P_dropped @ v
    cache = AttentionCache(q, k_scaled, v, P, scale, None if bias is None else tuple(bias.shape),
                           None if dropout.identity else dropout)
    return out, cache
'''

BUGS = (
    # ---------------------------------------------------------------- the issue's: no diagnosis
    Bug("log-softmax-no-sum", "cross_entropy", "functional.softmax:log_softmax_backward", '''
def log_softmax_backward(dz, cache):
    z, axis = cache
    p = np.exp(z)
    return dz - p
''', ("σ", "dz"), "issue"),
    Bug("rmsnorm-sum-for-mean", "rmsnorm", "functional.norm:rmsnorm_backward", '''
def rmsnorm_backward(dy, cache):
    xhat, rstd, gamma = cache
    dgamma = (dy * xhat).reshape(-1, xhat.shape[-1]).sum(axis=0)
    dxhat = dy * gamma
    dx = rstd * (dxhat - xhat * (dxhat * xhat).sum(axis=-1, keepdims=True))
    return dx, dgamma
''', ("mean",), "issue"),
    Bug("dropout-one-over-p", "dropout", "functional.dropout:dropout_forward", '''
def dropout_forward(x, p_drop, rng=None, training=True, mask=None):
    if not training or p_drop == 0:
        return x, DropoutCache(None, 1.0)
    m = (rng.random(x.shape) >= p_drop) if mask is None else mask
    scale = 1.0 / p_drop
    return x * m * scale, DropoutCache(m, scale)
''', ("1/(1 - p",), "issue"),
    Bug("sorted-scatter-unsorted-dout", "embedding", "functional.embedding:_sorted_scatter", '''
def _sorted_scatter(ids_flat, dout2, V):
    dW = np.zeros((V, dout2.shape[1]), dtype=dout2.dtype)
    order = np.argsort(ids_flat)
    sorted_ids = ids_flat[order]
    starts = np.flatnonzero(np.r_[True, sorted_ids[1:] != sorted_ids[:-1]])
    sums = np.add.reduceat(dout2, starts, axis=0)
    dW[sorted_ids[starts]] = sums
    return dW
''', ("order",), "issue"),
    # ---------------------------------------------------------------- the issue's: vague
    Bug("linear-dx-no-transpose", "linear", "functional.linear:linear_backward", '''
def linear_backward(dy, cache):
    x, W, has_bias = cache
    x_rows = x.reshape(-1, x.shape[-1])
    dh = dy.reshape(-1, dy.shape[-1])
    db = dh.sum(axis=0) if has_bias else None
    dx_rows = dh @ W
    dW = x_rows.T @ dh
    return dx_rows.reshape(x.shape), dW, db
''', ("w.t", "d_out"), "issue"),
    Bug("attention-dv-no-transpose", "attention", "functional.attention:attention_backward",
        ATTENTION_BACKWARD.replace("DV", "dv = P_dropped @ dout"), ("p", "transpose"), "issue"),
    Bug("softmax-no-max-shift", "softmax", "functional.softmax:softmax_forward", '''
def softmax_forward(x, axis=-1):
    e = np.exp(x)
    total = e.sum(axis=axis, keepdims=True)
    y = np.divide(e, total, out=np.zeros_like(e), where=total > 0)
    return y, SoftmaxCache(y, axis)
''', ("max",), "issue"),
    Bug("attention-mask-after-softmax", "attention", "functional.attention:attention_forward",
        ATTENTION_FORWARD.replace("BODY", "P, _ = softmax_forward(scores, axis=-1)\n"
                                  "    P = P if mask is None else np.where(mask, P, 0.0)"),
        ("before the softmax",), "issue"),
    # ---------------------------------------------------------------- the issue's: misleading
    Bug("mha-merge-without-transpose", "mha", "layers.attention:MultiHeadAttention.backward",
        mha(merged="np.concatenate([dq, dk, dv], axis=1).reshape(dq.shape[0], dq.shape[2], -1)"),
        ("transpose",), "issue"),
    Bug("mha-key-path-dropped", "mha", "layers.attention:MultiHeadAttention.backward",
        mha(merged="merge_heads(dq, np.zeros_like(dk), dv)"), ("dk",), "issue"),
    Bug("layernorm-unbiased-variance", "layernorm", "functional.norm:layernorm_forward", '''
def layernorm_forward(x, gamma, beta, eps=1e-5):
    mu = x.mean(axis=-1, keepdims=True)
    var = x.var(axis=-1, keepdims=True, ddof=1)
    rstd = 1.0 / np.sqrt(var + eps)
    xhat = (x - mu) * rstd
    return gamma * xhat + beta, LayerNormCache(xhat, rstd, gamma)
''', ("forward", "biased"), "issue"),
    # ---------------------------------------------------------------- the others (named before)
    Bug("softmax-backward-no-sum", "softmax", "functional.softmax:softmax_backward", '''
def softmax_backward(dy, cache):
    y, axis = cache
    return y * dy
''', ("σ",), "issue"),
    Bug("layernorm-dgamma-no-xhat", "layernorm", "functional.norm:layernorm_backward", '''
def layernorm_backward(dy, cache):
    xhat, rstd, gamma = cache
    C = xhat.shape[-1]
    dbeta = dy.reshape(-1, C).sum(axis=0)
    dgamma = dy.reshape(-1, C).sum(axis=0)
    dxhat = dy * gamma
    dx = rstd * (dxhat - dxhat.mean(-1, keepdims=True) - xhat * (dxhat * xhat).mean(-1, keepdims=True))
    return dx, dgamma, dbeta
''', ("xhat",), "issue"),
    Bug("linear-db-not-summed", "linear", "functional.linear:linear_backward", '''
def linear_backward(dy, cache):
    x, W, has_bias = cache
    x_rows = x.reshape(-1, x.shape[-1])
    dh = dy.reshape(-1, dy.shape[-1])
    db = dh.mean(axis=0) if has_bias else None
    return (dh @ W.T).reshape(x.shape), x_rows.T @ dh, db
''', ("mean",), "issue"),
    Bug("relu-no-upstream", "relu", "functional.activations:relu_backward", '''
def relu_backward(dy, cache):
    return cache.positive.astype(dy.dtype)
''', ("upstream",), "issue"),
    Bug("gelu-backward-phi-only", "gelu", "functional.activations:gelu_forward", '''
def gelu_forward(x, approximate="none"):
    if approximate == "tanh":
        return _gelu_tanh_forward(x)
    Phi = 0.5 * erfc(-x / 2 ** 0.5)
    return x * Phi, GeluCache(Phi)
''', ("φ",), "issue"),
    Bug("ce-sum-not-mean", "cross_entropy", "functional.cross_entropy:cross_entropy_backward", '''
def cross_entropy_backward(dloss, cache):
    logp, y, keep, n_kept, smoothing, shape = cache
    V = logp.shape[-1]
    p = np.exp(logp)
    q = np.full(p.shape, smoothing / V)
    q[np.arange(y.shape[0]), y] += 1.0 - smoothing
    dz = (p - q) * keep[:, None] * float(dloss)
    return dz.reshape(shape).astype(logp.dtype)
''', ("n_kept",), "issue"),
    Bug("attention-no-scale-backward", "attention", "functional.attention:attention_backward",
        ATTENTION_BACKWARD.replace("DV", "dv = P_dropped.swapaxes(-1, -2) @ dout").replace(" * scale\n", "\n"),
        ("√d",), "issue"),
    Bug("dropout-backward-unscaled", "dropout", "functional.dropout:dropout_backward", '''
def dropout_backward(dy, cache):
    if cache.identity:
        return dy
    return dy * cache.mask
''', ("1/(1 - p",), "issue"),
    Bug("rope-backward-same-rotation", "rope", "functional.rope:rope_backward", '''
def rope_backward(dy, cache):
    cos, sin, layout, x_shape = cache
    dy_a, dy_b = _pairs(dy, layout)
    dx = np.empty_like(dy)
    dx_a, dx_b = _pairs(dx, layout)
    dx_a[...] = dy_a * cos - dy_b * sin
    dx_b[...] = dy_a * sin + dy_b * cos
    return dx
''', ("-mθ",), "issue"),
    Bug("embedding-fancy-add", "embedding", "functional.embedding:_one_hot_scatter", '''
def _one_hot_scatter(ids_flat, dout2, V):
    dW = np.zeros((V, dout2.shape[1]), dtype=dout2.dtype)
    dW[ids_flat] += dout2
    return dW
''', ("np.add.at",), "issue"),
    Bug("causal-mask-strict", "causal_mask", "functional.masks:causal_mask", '''
def causal_mask(T, S=None, *, xp=np):
    S = T if S is None else S
    i = xp.arange(T)[:, None] + (S - T)
    j = xp.arange(S)[None, :]
    return j < i
''', ("diagonal",), "issue"),
    Bug("sinusoidal-cos-sin-swapped", "sinusoidal", "functional.sinusoidal:sinusoidal_table", '''
def sinusoidal_table(max_len, d, *, dtype=np.float32, xp=np):
    pos = xp.arange(max_len, dtype=xp.float64)[:, None]
    angle = pos / 10000.0 ** (xp.arange(0, d, 2, dtype=xp.float64) / d)
    PE = xp.empty((max_len, d), dtype=dtype)
    PE[:, 0::2] = xp.cos(angle)
    PE[:, 1::2] = xp.sin(angle[:, : d // 2])
    return PE
''', ("sin",), "issue"),
    Bug("mha-dw-o-assigned", "mha", "layers.attention:MultiHeadAttention.backward",
        mha().replace('self._accumulate_pair("W_o", dW_o, "b_o", db_o)',
                      'self.grads["W_o"] = dW_o\n    self._accumulate("b_o", db_o)'),
        ("w_o",), "issue"),
    # ---------------------------------------------------------------- fresh: written for this file
    Bug("rope-offset-ignored", "rope", "functional.rope:_tables", '''
def _tables(xp, T, D, offset, base, dtype, scale=1.0):
    m = xp.arange(T, dtype=xp.float64) / scale
    theta = base ** (-xp.arange(0, D, 2, dtype=xp.float64) / D)
    angle = m[:, None] * theta[None, :]
    return xp.cos(angle).astype(dtype), xp.sin(angle).astype(dtype)
''', ("offset",), "fresh"),
    Bug("embedding-dw-transposed", "embedding", "functional.embedding:_one_hot_scatter", '''
def _one_hot_scatter(ids_flat, dout2, V):
    one_hot = (ids_flat[:, None] == np.arange(V)).astype(dout2.dtype)
    return (dout2.T @ one_hot).T.T
''', ("shape",), "fresh"),
    Bug("gelu-tanh-cube-missing", "gelu", "functional.activations:_gelu_tanh_forward", '''
def _gelu_tanh_forward(x):
    u = np.sqrt(2.0 / np.pi) * (x + 0.044715 * x * x)
    s = 0.5 * (1.0 + np.tanh(u))
    y = x * s
    du = np.sqrt(2.0 / np.pi) * (1.0 + 2 * 0.044715 * x)
    dydx = s + x * 0.5 * (1.0 - np.tanh(u) ** 2) * du
    return y, GeluCache(dydx)
''', ("x³",), "fresh"),
    Bug("ce-no-upstream", "cross_entropy", "functional.cross_entropy:cross_entropy_backward", '''
def cross_entropy_backward(dloss, cache):
    logp, y, keep, n_kept, smoothing, shape = cache
    V = logp.shape[-1]
    p = np.exp(logp)
    q = np.full(p.shape, smoothing / V)
    q[np.arange(y.shape[0]), y] += 1.0 - smoothing
    dz = (p - q) * keep[:, None] / max(n_kept, 1)
    return dz.reshape(shape).astype(logp.dtype)
''', ("upstream",), "fresh"),
    Bug("block-residual-identity-dropped", "block", "layers.residual:Residual.backward", '''
def backward(self, dy):
    if self.norm_position == "pre":
        dh, extra = _split(self.sublayer.backward(self.dropout.backward(dy)))
        dx = self.norm.backward(dh)
    else:
        ds = self.norm.backward(dy)
        dx, extra = _split(self.sublayer.backward(self.dropout.backward(ds)))
        dx = dx + ds
    return (dx, *extra) if extra else dx
''', ("identity",), "fresh"),
    Bug("gradcheck-forward-difference", "gradcheck", "gradcheck.numerical:numerical_gradient", '''
def numerical_gradient(f, x, df, h=1e-6, coords=None):
    dx = np.zeros(x.shape)
    flat, dx_flat = x.reshape(-1), dx.reshape(-1)
    base = f(x)
    for i in range(x.size) if coords is None else coords:
        old = float(flat[i])
        flat[i] = old + h
        plus = f(x)
        flat[i] = old
        dx_flat[i] = float(np.sum((plus - base) * df)) / h
    return dx
''', ("one-sided",), "fresh"),
    Bug("linear-dw-from-dx", "linear", "functional.linear:linear_backward", '''
def linear_backward(dy, cache):
    x, W, has_bias = cache
    x_rows = x.reshape(-1, x.shape[-1])
    dh = dy.reshape(-1, dy.shape[-1])
    db = dh.sum(axis=0) if has_bias else None
    dW = dh.T @ x_rows
    return (dh @ W.T).reshape(x.shape), dW, db
''', ("transpose",), "fresh"),
    Bug("layernorm-backward-crash-broadcast", "layernorm", "functional.norm:layernorm_backward", '''
def layernorm_backward(dy, cache):
    xhat, rstd, gamma = cache
    C = xhat.shape[-1]
    dbeta = dy.reshape(-1, C).sum(axis=0)
    dgamma = (dy * xhat).reshape(-1, C).sum(axis=0)
    dxhat = dy * gamma
    mean_dxhat = dxhat.mean(axis=-1)
    dx = rstd * (dxhat - mean_dxhat - xhat * (dxhat * xhat).mean(axis=-1, keepdims=True))
    return dx, dgamma, dbeta
''', ("keepdims",), "fresh"),
    Bug("relative-error-no-abs", "gradcheck", "gradcheck.numerical:relative_error", '''
def relative_error(a, n):
    a, n = np.asarray(a, dtype=np.float64), np.asarray(n, dtype=np.float64)
    if a.size == 0:
        return 0.0
    return float(np.max(a - n) / max(np.max(np.abs(a)), np.max(np.abs(n)), 1e-300))
''', ("|",), "fresh"),
    # ---------------------------------------------------------------- right, written differently
    Bug("layernorm-step-by-step", "layernorm", "functional.norm:layernorm_backward", '''
def layernorm_backward(dy, cache):
    xhat, rstd, gamma = cache
    C = xhat.shape[-1]
    dbeta = dy.reshape(-1, C).sum(axis=0)
    dgamma = (dy * xhat).reshape(-1, C).sum(axis=0)
    dxhat = dy * gamma
    xc = xhat / rstd
    dvar = np.sum(dxhat * xc, axis=-1, keepdims=True) * -0.5 * rstd ** 3
    dmu = -np.sum(dxhat * rstd, axis=-1, keepdims=True) - 2.0 * dvar * np.mean(xc, axis=-1, keepdims=True)
    dx = dxhat * rstd + dvar * 2.0 * xc / C + dmu / C
    return dx, dgamma, dbeta
''', (), "equivalent"),
    Bug("gelu-tanh-sech2", "gelu", "functional.activations:_gelu_tanh_forward", '''
def _gelu_tanh_forward(x):
    c = np.sqrt(2.0 / np.pi)
    u = c * (x + 0.044715 * x ** 3)
    t = np.tanh(u)
    y = 0.5 * x * (1.0 + t)
    sech2 = 1.0 / np.cosh(np.clip(u, -300, 300)) ** 2
    dydx = 0.5 * (1.0 + t) + 0.5 * x * sech2 * c * (1.0 + 3 * 0.044715 * x ** 2)
    return y.astype(x.dtype), GeluCache(dydx.astype(x.dtype))
''', (), "equivalent"),
    Bug("attention-loop-over-heads", "attention", "functional.attention:attention_backward", '''
def attention_backward(dout, cache):
    q, k_scaled, v, P, scale, bias_shape, dropout = cache
    B, H = P.shape[:2]
    dq, dk, dv = np.zeros_like(q), np.zeros_like(k_scaled), np.zeros_like(v)
    dscores = np.zeros_like(P)
    for b in range(B):
        for h in range(H):
            Ph = P[b, h] if dropout is None else P[b, h] * dropout.mask[b, h] * dropout.scale
            dv[b, h] = Ph.T @ dout[b, h]
            dPh = dout[b, h] @ v[b, h].T
            if dropout is not None:
                dPh = dPh * dropout.mask[b, h] * dropout.scale
            p = P[b, h]
            ds = p * (dPh - (dPh * p).sum(-1, keepdims=True))
            dscores[b, h] = ds
            dq[b, h] = ds @ k_scaled[b, h]
            dk[b, h] = ds.T @ q[b, h] * scale
    if bias_shape is None:
        return dq, dk, dv
    return dq, dk, dv, _sum_to_shape(dscores, bias_shape)
''', (), "equivalent"),
)


# ------------------------------------------------------------------ a submission with one def replaced
def _module_path(module: str) -> Path:
    return (PACKAGE_DIR / Path(*module.split("."))).with_suffix(".py")


def one_line(target: str, old: str, new: str) -> str:
    """The reference's def of ``target`` ("module:function") with its line ``old`` written as ``new``."""
    module, name = target.split(":")
    source = _module_path(module).read_text(encoding="utf-8")
    code = ast.get_source_segment(source, _find(ast.parse(source), name))
    if old not in code:
        raise ValueError(f"{target}: no {old!r} in its def")
    return code.replace(old, new, 1)


BUGS += (
    Bug("softmax-dx-without-y", "softmax", "functional.softmax:softmax_backward",
        one_line("functional.softmax:softmax_backward", "dx = y * (dy - s)", "dx = dy - s"), ("factor y",), "lead"),
    Bug("rmsnorm-eps-outside-root", "rmsnorm", "functional.norm:rmsnorm_forward",
        one_line("functional.norm:rmsnorm_forward", "rms = xp.sqrt(ms + eps_s)", "rms = xp.sqrt(ms) + eps_s"),
        ("eps",), "lead"),
    Bug("ce-smoothing-summed", "cross_entropy", "functional.cross_entropy:cross_entropy_forward",
        one_line("functional.cross_entropy:cross_entropy_forward", "smooth = -logp.mean(axis=-1)",
                 "smooth = -logp.sum(axis=-1)"), ("mean",), "lead"),
    Bug("attention-scale-one-over-d", "attention", "functional.attention:attention_forward",
        one_line("functional.attention:attention_forward", "scale = q.shape[-1] ** -0.5",
                 "scale = q.shape[-1] ** -1.0"), ("√d",), "lead"),
)


def with_def(source: str, qualname: str, code: str) -> str:
    """``source`` with the def of ``qualname`` (its decorators too) replaced by ``code``, its body
    starting with ``import numpy as np`` (the staging takes bodies only, not the file's imports)."""
    node = _find(ast.parse(source), qualname)
    start = min([node.lineno] + [d.lineno for d in node.decorator_list]) - 1
    lines = source.splitlines(keepends=True)
    code = textwrap.dedent(code).strip("\n")
    first = ast.parse(code).body[0].body[0].lineno - 1                      # the body's first line (a long
    lines_of = code.split("\n")                                            # signature spans several)
    code = "\n".join(lines_of[:first] + ["    import numpy as np"] + lines_of[first:])   # a student's own import first
    code = textwrap.indent(code + "\n", " " * node.col_offset)
    return "".join(lines[:start]) + code + "".join(lines[node.end_lineno:])


def graded_with(bug: Bug) -> list:
    """The assignments whose targets share the bug's file: its own and the ones it could cost."""
    module = bug.target.split(":")[0]
    return [a for a in assignments() if any(t.module == module for t in a.targets)]


def submission(folder: Path, bug: Bug, graded: list) -> Path:
    shutil.rmtree(folder, ignore_errors=True)
    module, qualname = bug.target.split(":")
    for m in sorted({t.module for a in graded for t in a.targets}):
        source = _module_path(m).read_text(encoding="utf-8")
        if m == module:
            source = with_def(source, qualname, bug.code)
        path = folder / "minitransformer" / Path(*m.split(".")).with_suffix(".py")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source, encoding="utf-8")
    os.chmod(folder, 0o755)
    return folder


def what_the_student_reads(result) -> str:
    """The explanation; where the grader gives none, the wrong rows' diagnoses and the message."""
    explanation = getattr(result, "explanation", "")
    if explanation:
        return explanation
    said = [result.message] if result.message else []
    for r in result.rows:
        if not r.ok and r.diagnosis and r.diagnosis not in said:
            said.append(r.diagnosis)
    return " | ".join(said)


def run_bug(bug: Bug, folder: Path, limits: Limits) -> dict:
    graded = graded_with(bug)
    results = {r.id: r for r in grade(submission(folder, bug, graded), [a.id for a in graded], limits=limits,
                                      unconfined=True)}
    own = results[bug.assignment]
    text = what_the_student_reads(own)
    elsewhere = sum(r.max_score - (r.score or 0.0) for i, r in results.items() if i != bug.assignment)
    if bug.origin == "equivalent":
        named = own.passed and not text
    else:
        named = all(k in text.lower() for k in bug.keywords)
    return {"bug": bug.name, "origin": bug.origin, "assignment": bug.assignment,
            "score": own.score, "max_score": own.max_score, "points_lost_elsewhere": round(elsewhere, 4),
            "keywords": list(bug.keywords), "named": named, "message": text}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("bugs", nargs="*", help="bug names (default: all)")
    parser.add_argument("--only", choices=("issue", "fresh", "lead", "equivalent"), help="one origin")
    args = parser.parse_args(argv)
    chosen = [b for b in BUGS if (not args.bugs or b.name in args.bugs) and (not args.only or b.origin == args.only)]
    limits = Limits(timeout=60.0, budget=300.0)
    start, rows = time.monotonic(), []
    with tempfile.TemporaryDirectory(prefix="mt-bugs-") as tmp:
        os.chmod(tmp, 0o755)
        for bug in chosen:
            row = run_bug(bug, Path(tmp) / "sub", limits)
            rows.append(row)
            print(json.dumps(row, ensure_ascii=False), flush=True)
    summary = {}
    for origin in ("issue", "fresh", "lead", "equivalent"):
        mine = [r for r in rows if r["origin"] == origin]
        if mine:
            summary[origin] = {"bugs": len(mine), "named": sum(r["named"] for r in mine),
                               "lost_elsewhere": sum(r["points_lost_elsewhere"] > 0 for r in mine)}
    print(json.dumps({"benchmark": "handwritten_bugs", "summary": summary,
                      "seconds": round(time.monotonic() - start, 1), "machine": machine()}, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
