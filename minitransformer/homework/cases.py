"""The graded cases: what each assignment's docstring promises, drawn as inputs (trusted side).

Every assignment has a tuple of named ``GradedCase``s (``CASES[assignment_id]``). The
first is the main case: the rubric (homework/rubric.py) gives its forward and each of
its gradients a check of their own; every further case is one check, passed when
every tensor of it is right. The report shows each case by its ``name``.

A case draws a ``checks.Case`` from a seeded generator (the drawers of
homework/checks.py, reused; here only what they do not draw is added):

    inputs   name -> array, the forward's arguments (a Module's: ``x``, ``memory``,
             ``key_padding_mask``, passed to ``forward`` by name)
    kwargs   the forward's other arguments (a Module's: ``ctor`` = (args, kwargs) of
             its constructor, ``spec`` = a BlockSpec's fields)
    wrt      the inputs backward returns gradients for, in order

Integration (the grader's parent): for each case, draw ``case.draw(rng)``, send the
inputs to the child, run the reference on copies, compare each tensor
(homework/diagnose.compare with ``tolerance(case)``), diagnose each wrong one
(homework/mistakes.diagnose_all with ``trial_inputs(...)``), and check the generic
promises (``mistakes.dtype_message`` when ``case.dtype`` is float32,
``mistakes.mutation_message`` on the inputs and the upstream gradient after the
call). ``graded.run_pair`` / ``graded.run_module`` are the same evaluation in one process
(``gradcheck FILE:F:B`` and the tests use them).

The drawers draw the graded inputs from the seed: this file is left out of every
student's copy and of the grader's child (homework/export.py, TRUSTED); a copy reads
the same records without them (homework/graded.py, homework/expected.py).
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..functional.embedding import ONE_HOT_MAX_V
from .assignments import BY_ID
from .checks import (draw_bct, draw_bhtd, draw_cross_entropy, draw_dropout, draw_embedding, draw_layernorm,
                     draw_linear, draw_rmsnorm, draw_sinusoidal, draw_softmax)
from .graded import Case, GradedCase, build_module, new, resolve, run_module, run_pair


# ------------------------------------------------------------------ drawers the checks lack
def _float32(draw):
    """The same draw with every floating-point array in float32 (a Module's weights via ctor dtype)."""
    def drawn(rng, *args):
        case = draw(rng, *args)
        inputs = {k: v.astype(np.float32) if v.dtype.kind == "f" else v for k, v in case.inputs.items()}
        kwargs = dict(case.kwargs)
        if "ctor" in kwargs:
            args_, ctor = kwargs["ctor"]
            kwargs["ctor"] = (args_, dict(ctor, dtype=np.float32))
        if kwargs.get("dtype") is np.float64:
            kwargs["dtype"] = np.float32
        return replace(case, inputs=inputs, kwargs=kwargs, masked=dict(case.masked))
    return drawn


def _fixed(draw, **kwargs):
    """draw(rng, None, kwargs): the checks' drawers take (rng, fn, options)."""
    return lambda rng: draw(rng, None, kwargs)


def draw_linear_no_bias(rng):
    case = draw_linear(rng, None, {})
    inputs = dict(case.inputs)
    del inputs["b"]
    return replace(case, inputs=inputs, wrt=("x", "W"))


def draw_masked_softmax(rng):
    """Rows with -inf entries (masked scores) and one row entirely -inf: its output is 0, never NaN."""
    B, T, n = int(rng.integers(1, 3)), int(rng.integers(2, 5)), int(rng.integers(3, 7))
    x = 3 * rng.standard_normal((B, T, n))
    hidden = rng.random(x.shape) < 0.3
    hidden[..., 0] = False
    hidden[0, -1, :] = True                                  # a fully masked row
    x[hidden] = -np.inf
    return Case({"x": x}, masked={"out": np.broadcast_to(hidden, x.shape)})


def draw_large_softmax(rng):
    """Scores around ±1000 (each row shifted): exp overflows to inf above 709 and underflows to 0
    below -745, so only a softmax that subtracts the row max first gives finite probabilities."""
    case = draw_softmax(rng, None, {})
    x = case.inputs["x"]
    return replace(case, inputs={"x": x + rng.choice([-1000.0, 1000.0], size=x.shape[:-1] + (1,))})


def draw_cross_entropy_smoothing(rng):
    case = draw_cross_entropy(rng, None, {})
    return replace(case, kwargs=dict(case.kwargs, smoothing=0.1))


def draw_cross_entropy_plain(rng):
    case = draw_cross_entropy(rng, None, {})
    return replace(case, kwargs=dict(case.kwargs, smoothing=0.0))


def draw_cross_entropy_all_ignored(rng):
    case = draw_cross_entropy(rng, None, {})
    targets = np.full_like(case.inputs["targets"], -100)
    return replace(case, inputs=dict(case.inputs, targets=targets), factors={})


def _small_rows(draw):
    """Some rows scaled by 1e-3: their variance (~1e-6) is near eps, where eps's place shows."""
    def drawn(rng):
        case = draw(rng, None, {})
        x = case.inputs["x"].copy()
        x[..., ::2, :] *= 1e-3
        return replace(case, inputs=dict(case.inputs, x=x))
    return drawn


def draw_embedding_repeated(rng):
    """Ids with repeats (every id of a small vocabulary twice at least): dW must add them up."""
    case = draw_embedding(rng, None, {})
    ids = case.inputs["ids"].copy()
    ids.reshape(-1)[:2] = ids.reshape(-1)[-1]                # the last id three times
    return replace(case, inputs=dict(case.inputs, ids=ids))


def draw_embedding_large_vocabulary(rng):
    """V above ONE_HOT_MAX_V: embedding_backward takes the sorted scatter, not the one-hot product;
    ids with repeats, most rows of dW zero."""
    case = draw_embedding(rng, None, {})
    V = ONE_HOT_MAX_V + int(rng.integers(1, 200))
    ids = rng.integers(0, V, case.inputs["ids"].shape)
    ids.reshape(-1)[:2] = ids.reshape(-1)[-1]                # one id three times
    W = rng.standard_normal((V, case.inputs["W"].shape[1]))
    return replace(case, inputs=dict(case.inputs, ids=ids, W=W))


def draw_dropout_eval(rng):
    case = draw_dropout(rng, None, {})
    kwargs = {"p_drop": case.kwargs["p_drop"], "training": False}
    return replace(case, kwargs=kwargs, factors={})


def _attention(rng, *, H=2, fully_masked=False, bias=False, dropout=False):
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


def draw_rope(rng, layout="interleaved", scale=1.0):
    case = draw_bhtd(rng, None, {})
    offset = int(rng.integers(1, 5))                         # > 0: an ignored offset shows
    return replace(case, kwargs={"offset": offset, "layout": layout, "scale": scale})


def draw_repeat_kv(rng, *, G=2, r=2):
    """x (B, G, S, D) kv heads, r query heads each: S and D differ from G and r, so a swapped axis shows."""
    B, S, D = int(rng.integers(1, 3)), int(rng.integers(3, 6)), 3
    return Case({"x": rng.standard_normal((B, G, S, D))}, {"r": r}, wrt=("x",),
                factors={f"1/r with r={r}": (1.0 / r, "the group's gradients averaged instead of summed?")})


def _module_input(rng, B, T, C=8):
    return rng.standard_normal((B, T, C))


def draw_mha(rng, *, rope=None, n_kv_head=None, cross=False, padding=False):
    """MultiHeadAttention(8, 4), causal unless cross; rope = (layout, scale) or None."""
    B, T = int(rng.integers(1, 3)), int(rng.integers(2, 5))
    ctor = {"cross": cross, "rng": int(rng.integers(0, 2**31)), "dtype": np.float64, "init_std": 0.5,
            "n_kv_head": n_kv_head}
    if not cross:
        ctor["pattern"] = new("layers.attention_pattern:Causal")
    if rope:
        ctor["positions"] = new("layers.attention_positions:RoPE", layout=rope[0], scale=rope[1])
    inputs = {"x": _module_input(rng, B, T)}
    if cross:
        inputs["memory"] = _module_input(rng, B, T + int(rng.integers(1, 3)))
    if padding:
        real = np.ones((B, T), bool)
        real[0, 0] = False                                   # the causal query 0 sees no key: out 0
        inputs["key_padding_mask"] = real
    return Case(inputs, {"ctor": ((8, 4), ctor)})


def draw_block(rng, *, norm_position="pre", cross=False, p_drop=0.0, norm="layernorm", n_kv_head=None,
               rope=False):
    B, T = int(rng.integers(1, 3)), int(rng.integers(2, 5))
    inputs = {"x": _module_input(rng, B, T)}
    if cross:
        inputs["memory"] = _module_input(rng, B, T + 1)
    spec = dict(d_model=8, n_head=4, d_ff=16, norm=norm, norm_position=norm_position, p_drop=p_drop,
                n_kv_head=n_kv_head, init_std=0.5, out_std=0.5)
    if rope:
        spec["positions"] = new("layers.attention_positions:RoPE")
    ctor = {"rng": int(rng.integers(0, 2**31)), "dtype": np.float64, "cross": cross,
            "dropout_rng": int(rng.integers(0, 2**31)) if p_drop else None}
    return Case(inputs, {"ctor": ((), ctor), "spec": spec})


def draw_causal(rng, extra_keys=False):
    T = int(rng.integers(2, 6))
    return Case({}, {"T": T, "S": T + (2 if extra_keys else 0)})   # S - T = 2: not an off-by-one


def draw_sinusoidal_d(rng, odd=False):
    d = 2 * int(rng.integers(2, 5)) + (1 if odd else 0)
    return Case({}, {"max_len": int(rng.integers(3, 12)), "d": d, "dtype": np.float64})


# ------------------------------------------------------------------ the table
def _check(assignment_id, i=0):
    return BY_ID[assignment_id].checks[i]


def _cases(assignment_id, check_index, tensors, *named, float32=None):
    check = _check(assignment_id, check_index)
    cases = [GradedCase(assignment_id, name, check, draw, tensors) for name, draw in named]
    if float32 is not None:
        cases.append(GradedCase(assignment_id, f"{float32}: float32 in, float32 out", check,
                                _float32(named[0][1]), tensors, dtype="float32", numerical=False))
    return cases


def _module(assignment_id, tensors, *named):
    check = _check(assignment_id)
    cases = [GradedCase(assignment_id, name, check, draw, tensors) for name, draw in named]
    cases.append(GradedCase(assignment_id, f"{named[0][0]}: float32 in, float32 out", check,
                            _float32(named[0][1]), tensors, dtype="float32", numerical=False))
    return cases


_MHA_T = ("out", "dx", "dmemory", "dW_*", "db_*")
_BLOCK_T = ("out", "dx", "dmemory", "d*.*")

CASES = {
    "linear": tuple(_cases("linear", 0, ("out", "dx", "dW", "db"),
                           ("linear: x (B, T, d_in), d_in != d_out", _fixed(draw_linear)),
                           ("linear: no bias (b=None)", draw_linear_no_bias), float32="linear")),
    "relu": tuple(_cases("relu", 0, ("out", "dx"), ("relu: x (B, T, C)", _fixed(draw_bct)), float32="relu")),
    "gelu": tuple(_cases("gelu", 0, ("out", "dx"),
                         ("gelu: exact (erf)", _fixed(draw_bct, approximate="none")), float32="gelu")
                  + _cases("gelu", 1, ("out", "dx"),
                           ("gelu: tanh approximation", _fixed(draw_bct, approximate="tanh")))),
    "softmax": tuple(_cases("softmax", 0, ("out", "dx"),
                            ("softmax: rows of x (B, T, n)", _fixed(draw_softmax)),
                            ("softmax: masked (-inf) entries and a fully masked row (0, never NaN)",
                             draw_masked_softmax),
                            ("softmax: scores near ±1000 (subtract the row max: exp(1000) overflows)",
                             draw_large_softmax), float32="softmax")),
    "cross_entropy": tuple(_cases("cross_entropy", 0, ("out", "dx"),
                                  ("log_softmax: rows of x (B, T, V)", _fixed(draw_bct)), float32="log_softmax")
                           + _cases("cross_entropy", 1, ("out", "dlogits"),
                                    ("cross_entropy: ignored targets, no smoothing", draw_cross_entropy_plain),
                                    ("cross_entropy: label smoothing 0.1 and ignored targets",
                                     draw_cross_entropy_smoothing),
                                    ("cross_entropy: every target ignored (loss 0, gradient 0)",
                                     draw_cross_entropy_all_ignored), float32="cross_entropy")),
    "layernorm": tuple(_cases("layernorm", 0, ("out", "dx", "dgamma", "dbeta"),
                              ("layernorm: x (B, T, C)", _fixed(draw_layernorm)),
                              ("layernorm: rows of variance near eps", _small_rows(draw_layernorm)),
                              float32="layernorm")),
    "rmsnorm": tuple(_cases("rmsnorm", 0, ("out", "dx", "dgamma"),
                            ("rmsnorm: x (B, T, C)", _fixed(draw_rmsnorm)),
                            ("rmsnorm: rows of mean square near eps", _small_rows(draw_rmsnorm)),
                            float32="rmsnorm")),
    "embedding": tuple(_cases("embedding", 0, ("out", "dW"),
                              ("embedding: repeated ids (their gradients add up)", draw_embedding_repeated),
                              ("embedding: a vocabulary above 128 (the sorted scatter)",
                               draw_embedding_large_vocabulary),
                              float32="embedding")),
    "dropout": tuple(_cases("dropout", 0, ("out", "dx"),
                            ("dropout: training with a given keep-mask", _fixed(draw_dropout)),
                            ("dropout: eval mode (training=False) is the identity", draw_dropout_eval),
                            float32="dropout")),
    "attention": tuple(_cases("attention", 0, ("out", "dq", "dk", "dv", "dbias"),
                              ("attention: masked keys", lambda rng: _attention(rng)),
                              ("attention: a query with every key masked (0, never NaN)",
                               lambda rng: _attention(rng, fully_masked=True)),
                              ("attention: four heads (H=4)", lambda rng: _attention(rng, H=4)),
                              ("attention: additive bias (dbias)", lambda rng: _attention(rng, bias=True)),
                              ("attention: dropout on P with a given drop_mask",
                               lambda rng: _attention(rng, dropout=True)),
                              float32="attention")),
    "rope": tuple(_cases("rope", 0, ("out", "dx"),
                         ("rope: interleaved pairs, offset > 0", draw_rope),
                         ("rope: half-split layout", lambda rng: draw_rope(rng, "half")),
                         ("rope: scale 2 (position interpolation)", lambda rng: draw_rope(rng, scale=2.0)),
                         float32="rope")),
    "mha": tuple(_module("mha", _MHA_T,
                         ("mha: causal self-attention", lambda rng: draw_mha(rng)),
                         ("mha: RoPE, interleaved", lambda rng: draw_mha(rng, rope=("interleaved", 1.0))),
                         ("mha: RoPE, half-split layout, scale 2", lambda rng: draw_mha(rng, rope=("half", 2.0))),
                         ("mha: grouped heads (n_kv_head=2 < n_head=4)", lambda rng: draw_mha(rng, n_kv_head=2)),
                         ("mha: cross-attention (dmemory, W_kv)", lambda rng: draw_mha(rng, cross=True)),
                         ("mha: key padding, a query with no key (0, never NaN)",
                          lambda rng: draw_mha(rng, padding=True)))
                 + _cases("mha", 1, ("out", "dx"),
                          ("repeat_kv: G=2 kv heads for H=4 query heads", draw_repeat_kv),
                          ("repeat_kv: multi-query, G=1 kv head for H=3 query heads",
                           lambda rng: draw_repeat_kv(rng, G=1, r=3)), float32="repeat_kv")),
    "block": tuple(_module("block", _BLOCK_T,
                           ("block: pre-norm decoder block", lambda rng: draw_block(rng)),
                           ("block: post-norm", lambda rng: draw_block(rng, norm_position="post")),
                           ("block: cross-attention (dmemory)", lambda rng: draw_block(rng, cross=True)),
                           ("block: residual dropout p=0.3", lambda rng: draw_block(rng, p_drop=0.3)),
                           ("block: RMSNorm, RoPE, grouped heads",
                            lambda rng: draw_block(rng, norm="rmsnorm", rope=True, n_kv_head=2)))),
    "sinusoidal": tuple(_cases("sinusoidal", 0, ("out",),
                               ("sinusoidal: even d", _fixed(draw_sinusoidal)),
                               ("sinusoidal: odd d", lambda rng: draw_sinusoidal_d(rng, odd=True)))),
    "causal_mask": tuple(_cases("causal_mask", 0, ("out",),
                                ("causal_mask: T = S", draw_causal),
                                ("causal_mask: S > T (the queries are the last T positions)",
                                 lambda rng: draw_causal(rng, extra_keys=True)))),
}


def cases(assignment_id: str) -> tuple:
    """The graded cases of one assignment, the main case first."""
    return CASES[assignment_id]


def by_name(name: str) -> GradedCase:
    for graded in CASES.values():
        for case in graded:
            if case.name == name:
                return case
    raise KeyError(f"no graded case named {name!r}")


# ------------------------------------------------------------------ the reference on a drawn case
def upstream_for(out, seed: int = 0):
    """The random upstream gradient of a result (never all ones), in its dtype; 0-d for a loss.
    Drawn from the seed, so trusted side only."""
    g = np.random.default_rng(np.random.SeedSequence([seed, 7])).standard_normal(np.shape(out))
    return g.astype(np.asarray(out).dtype)


def reference_results(graded: GradedCase, case: Case, seed: int = 0, package: str | None = None):
    """The reference's results on a drawn case, and the upstream gradient (parent side)."""
    package = package or __name__.split(".")[0]
    check = graded.check
    upstream = lambda out: upstream_for(out, seed)                # noqa: E731  (drawn from the output's shape)
    if check.checker == "module":
        return run_module(build_module(resolve(package, check.forward), case, package), case, g=upstream)
    forward = resolve(package, check.forward)
    backward = resolve(package, check.backward) if check.backward else None
    if backward is None:
        return {"out": forward(**case.kwargs)}, None
    return run_pair(case, forward, backward, g=upstream)


def trial_inputs(graded: GradedCase, case: Case, g, package: str | None = None) -> dict:
    """What homework/mistakes.py needs to compute its variants: the forward's arguments by
    name (arrays and options), ``upstream`` (the gradient given to backward), and for a
    Module ``build`` (a zero-argument function returning the reference Module with the
    case's weights)."""
    inputs = dict(case.inputs, **{k: v for k, v in case.kwargs.items() if k not in ("ctor", "spec")})
    inputs["upstream"] = g
    if graded.check.checker == "module":
        package = package or __name__.split(".")[0]
        cls = resolve(package, graded.check.forward)
        inputs["build"] = lambda: build_module(cls, case, package)
        inputs["forward_inputs"] = dict(case.inputs)
    return inputs
