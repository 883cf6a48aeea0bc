"""mha: MultiHeadAttention's backward (self and cross, RoPE, grouped kv heads), and repeat_kv's pair."""
from __future__ import annotations

import types
from itertools import permutations

import numpy as np

from ...functional.attention import attention_backward
from ...functional.heads import merge_heads, split_heads
from ...functional.linear import linear_backward
from ...functional.repeat_kv import repeat_kv_backward, repeat_kv_forward
from ..assignment import Assignment, Mistake, cases, module, pair
from ..graded import BACKWARD_CALLS, Case, new
from ..mistakes_match import assigned, doubled, missing, never_accumulated, repeat_kv_not_summed
from . import L2
from ._draw import module_input
from ._variants import _g, _on, _run, _x


# ------------------------------------------------------------------ the graded inputs
def draw(rng, *, rope=None, n_kv_head=None, cross=False, padding=False, calls=1) -> Case:
    """MultiHeadAttention(8, 4), causal unless cross; rope = (layout, scale) or None; ``calls``: forward
    and backward that many times on the same inputs, no zero_grad between (the gradients add up)."""
    B, T = int(rng.integers(1, 3)), int(rng.integers(2, 5))
    ctor = {"cross": cross, "rng": int(rng.integers(0, 2**31)), "dtype": np.float64, "init_std": 0.5,
            "n_kv_head": n_kv_head}
    if not cross:
        ctor["pattern"] = new("layers.attention_pattern:Causal")
    if rope:
        ctor["positions"] = new("layers.attention_positions:RoPE", layout=rope[0], scale=rope[1])
    inputs = {"x": module_input(rng, B, T)}
    if cross:
        inputs["memory"] = module_input(rng, B, T + int(rng.integers(1, 3)))
    if padding:
        real = np.ones((B, T), bool)
        real[0, 0] = False                                   # the causal query 0 sees no key: out 0
        inputs["key_padding_mask"] = real
    return Case(inputs, {"ctor": ((8, 4), ctor), **({BACKWARD_CALLS: calls} if calls > 1 else {})})


def draw_repeat_kv(rng, *, G=2, r=2) -> Case:
    """x (B, G, S, D) kv heads, r query heads each: S and D differ from G and r, so a swapped axis shows."""
    B, S, D = int(rng.integers(1, 3)), int(rng.integers(3, 6)), 3
    return Case({"x": rng.standard_normal((B, G, S, D))}, {"r": r}, wrt=("x",),
                factors={f"1/r with r={r}": (1.0 / r, "the group's gradients averaged instead of summed?")})


# ------------------------------------------------------------------ the catalogue: repeat_kv
def _repeat_kv_tiled(inp):
    """The kv heads tiled (0, 1, 0, 1, ...) instead of repeated (0, 0, 1, 1, ...): forward and backward."""
    x, dout, r = _x(inp), _g(inp), int(inp["r"])
    B, G, S, D = x.shape
    return {"out": np.tile(x, (1, r, 1, 1)), "dx": dout.reshape(B, r, G, S, D).sum(axis=1)}


def _repeat_kv_first_copy(inp):
    """dx takes the gradient of one copy of each kv head (the first of its group), not their sum."""
    dout, r = _g(inp), int(inp["r"])
    return {"dx": dout[:, ::r]}



# ------------------------------------------------------------------ the catalogue: MultiHeadAttention
# A variant builds the reference Module with the case's weights, puts a wrong backward on that one
# instance (the line a student leaves out), runs forward and backward, and returns every tensor.
def _merged_by_reshape(*parts):
    """(B, n_i, T, D) parts side by side as (B, T, n·D) by a reshape alone, the heads axis never moved
    behind T: the wrong line."""
    B, _, T, _ = parts[0].shape
    return np.concatenate(parts, axis=1).reshape(B, T, -1)


def _split_by_reshape(h, D):
    B, T, _ = h.shape
    return h.reshape(B, -1, T, D)


def _mha_backward(self, dy, *, rope="inverse", kv_paths=True, accumulate_kv=True, order=(0, 1, 2),
                  merge=merge_heads, split=split_heads, key_path=True, heads="repeat"):
    """MultiHeadAttention.backward with one thing changed (``order``: the blocks (dq, dk, dv), or
    (dk, dv) with cross-attention, merged in this order; ``merge``, ``split``: the heads' reshapes;
    ``key_path``: dk sent back, or zeros in its place; ``heads="modulo"``: query head h's gradient
    summed into kv head h % G)."""
    proj, proj_kv, rope_cache, attn, out, positions, repeat = self._pop_cache()
    do, dW_o, db_o = linear_backward(dy, out)                               # (B, T, H·D)
    self._accumulate_pair("W_o", dW_o, "b_o", db_o)
    dq, dk, dv, dtables = self.positions.attend_backward(attention_backward, split(do, self.head_dim),
                                                         attn, positions)
    for name, dtable in dtables.items():
        self._accumulate(name, dtable)
    if repeat is not None and heads == "modulo":
        dk, dv = _modulo_sum(dk, self.n_kv_head), _modulo_sum(dv, self.n_kv_head)
    elif repeat is not None:
        dk, dv = repeat_kv_backward(dk, repeat), repeat_kv_backward(dv, repeat)
    if self.cross:
        dx, dW_q, db_q = linear_backward(merge(dq), proj)
        self._accumulate_pair("W_q", dW_q, "b_q", db_q)
        dmemory, dW_kv, db_kv = linear_backward(merge(*((dk, dv)[i] for i in order[:2])), proj_kv)
        if accumulate_kv:
            self._accumulate_pair("W_kv", dW_kv, "b_kv", db_kv)
        return dx, dmemory
    if rope_cache is not None and rope == "inverse":
        dq, dk = self.positions.rotate_backward(dq, rope_cache), self.positions.rotate_backward(dk, rope_cache)
    elif rope_cache is not None and rope == "forward":
        rotate = lambda a: self.positions.rotate(a, 0)[0]                  # noqa: E731  the wrong way round
        dq, dk = rotate(dq), rotate(dk)
    if not kv_paths:
        dk, dv = np.zeros_like(dk), np.zeros_like(dv)
    if not key_path:
        dk = np.zeros_like(dk)
    dx, dW_qkv, db_qkv = linear_backward(merge(*((dq, dk, dv)[i] for i in order)), proj)
    self._accumulate_pair("W_qkv", dW_qkv, "b_qkv", db_qkv)
    return dx


def _modulo_sum(d, G):
    """(B, H, S, D) -> (B, G, S, D): query head h's gradient into kv head h % G."""
    B, H, S, D = d.shape
    return d.reshape(B, H // G, G, S, D).sum(axis=1)


def _modulo_heads(self, k, v):
    """Grouped heads mapped as kv head h % G for query head h (np.tile), instead of h // r."""
    if self.n_kv_head == self.n_head:
        return k, v, None
    r = self.n_head // self.n_kv_head
    return np.tile(k, (1, r, 1, 1)), np.tile(v, (1, r, 1, 1)), repeat_kv_forward(k, r)[1]


def _mha_heads_modulo(inp):
    """A family: the forward's heads mapped h % G, the backward summing either way (h % G, or h // r)."""
    module = inp["build"]()
    if module.n_kv_head == module.n_head:
        return {}

    def patch(m, heads):
        m._repeat_kv = types.MethodType(_modulo_heads, m)
        _on(m, _mha_backward, heads=heads)
    return [_run(inp, lambda m, h=h: patch(m, h)) for h in ("modulo", "repeat")]


def _mha_merge_orders(inp):
    """A family: the blocks merged in any wrong order ([dq | dk | dv] for W_qkv, [dk | dv] for W_kv)."""
    orders = [(1, 0, 2)] if inp["build"]().cross else [o for o in permutations(range(3)) if o != (0, 1, 2)]
    return [_run(inp, lambda m, o=o: _on(m, _mha_backward, order=o)) for o in orders]


def _mha(**options):
    def variant(inp):
        module = inp["build"]()
        if options.get("rope") and module.positions.name != "rope":
            return {}
        if "accumulate_kv" in options and not module.cross:
            return {}
        if ("kv_paths" in options or "key_path" in options) and module.cross:
            return {}
        return _run(inp, lambda m: _on(m, _mha_backward, **options))
    return variant


_PARAMS = ("d*",)                     # every parameter gradient of the Module

MISTAKES = (
    Mistake("repeat_kv", "repeat-kv-not-summed", ("dx",),
            "one gradient slice per QUERY head (B, H, S, D): the r = H/G query heads that share a kv head "
            "add their gradients into it, dx (B, G, S, D) = the sum over each group of r copies",
            match=repeat_kv_not_summed),
    Mistake("repeat_kv", "repeat-kv-tiled", ("out", "dx"),
            "the kv heads are tiled (0, 1, 0, 1, ...) instead of repeated (0, 0, 1, 1, ...): query head h "
            "reads kv head h // r, so the r copies of a kv head sit side by side (np.repeat along the heads "
            "axis, not np.tile), and its gradient sums those r neighbours",
            _repeat_kv_tiled),
    Mistake("repeat_kv", "repeat-kv-one-copy", ("dx",),
            "dx keeps the gradient of one copy of each kv head: all r copies fed the loss, so dx sums the r "
            "gradients of each group",
            _repeat_kv_first_copy),
    Mistake("MultiHeadAttention", "mha-dmemory-missing", ("dmemory",),
            "cross-attention's backward returns (dx, dmemory): the memory's gradient comes back through "
            "the key/value projection, linear_backward(merge_heads(dk, dv), the W_kv cache)",
            match=missing),
    Mistake("MultiHeadAttention", "mha-rope-not-undone", ("dx", "dmemory", "d*"),
            "the RoPE rotation of q and k is not undone: after attention's backward, send dq and dk through "
            "rope_backward (the rotation by -mθ) before the projection's backward",
            _mha(rope="skip")),
    Mistake("MultiHeadAttention", "mha-rope-wrong-way", ("dx", "dmemory", "d*"),
            "dq and dk are rotated FORWARD by mθ: the backward of RoPE is rope_backward, the rotation by -mθ",
            _mha(rope="forward")),
    Mistake("MultiHeadAttention", "mha-query-path-only", ("dx", "dmemory", "d*"),
            "only the queries' gradient reaches x: the keys and values are projections of x too; merge "
            "dq, dk, dv side by side and send them back through W_qkv",
            _mha(kv_paths=False)),
    Mistake("MultiHeadAttention", "mha-key-path-dropped", ("dx", "dmemory", "d*"),
            "the keys' gradient is left out: k = x W_k is a path from x too, so dk goes back with dq and dv, "
            "merge_heads(dq, dk, dv) through W_qkv (zeros in its place drop the key path)",
            _mha(key_path=False)),
    Mistake("MultiHeadAttention", "mha-heads-merged-by-reshape", ("dx", "dmemory", "d*"),
            "the heads are merged (or split) by a reshape alone: (B, H, T, D) -> (B, T, H·D) needs the heads "
            "axis moved behind T first, transpose(0, 2, 1, 3) then reshape (merge_heads / split_heads do both)",
            lambda inp: [_run(inp, lambda m: _on(m, _mha_backward, merge=_merged_by_reshape)),
                         _run(inp, lambda m: _on(m, _mha_backward, split=_split_by_reshape)),
                         _run(inp, lambda m: _on(m, _mha_backward, merge=_merged_by_reshape,
                                                 split=_split_by_reshape))]),
    Mistake("MultiHeadAttention", "mha-merge-order", ("dx", "dmemory", "d*"),
            "dq, dk, dv are merged in the wrong order: W_qkv's columns are [Q | K | V], so the gradient "
            "sent back is merge_heads(dq, dk, dv) (cross-attention: W_kv is [K | V], merge_heads(dk, dv))",
            _mha_merge_orders),
    Mistake("MultiHeadAttention", "mha-kv-gradient-missing", ("dW_kv", "db_kv"),
            "the key/value projection's gradient (W_kv, b_kv) is not accumulated: it comes with dmemory "
            "from linear_backward(merge_heads(dk, dv), the W_kv cache)",
            _mha(accumulate_kv=False)),
    Mistake("MultiHeadAttention", "mha-kv-heads-modulo", ("dx", "d*"),
            "grouped heads are mapped h % G: query head h shares kv head h // r (r = H/G query heads per kv "
            "head, side by side: 0, 0, 1, 1 for H=4, G=2), so repeat_kv repeats each kv head r times along "
            "the heads axis (np.repeat, not np.tile) and its backward sums each group of r neighbours",
            _mha_heads_modulo),
    Mistake("MultiHeadAttention", "mha-gradient-never-accumulated", _PARAMS,
            "this parameter's gradient stays 0: it is never accumulated into grads (self._accumulate(name, g))",
            match=never_accumulated),
    Mistake("MultiHeadAttention", "mha-gradient-doubled", _PARAMS,
            "twice the expected gradient: it is accumulated twice", match=doubled),
    Mistake("MultiHeadAttention", "mha-gradient-assigned", _PARAMS,
            "this parameter's gradient is assigned (grads[name] = g), not added: backward accumulates, "
            "grads[name] += g (self._accumulate(name, g)), so two backward calls without zero_grad between "
            "them add up; here forward and backward ran twice and this gradient holds one call's only",
            match=assigned),
)


ASSIGNMENT = Assignment(
    id="mha", title="Multi-head attention: the Module's backward, and grouped kv heads (repeat_kv)", lecture=L2,
    points=10,
    targets=("layers.attention:MultiHeadAttention.backward", "functional.repeat_kv:repeat_kv_forward",
             "functional.repeat_kv:repeat_kv_backward"),
    needs=("linear", "causal_mask", "attention", "rope"),
    cases=cases(module("layers.attention:MultiHeadAttention"), ("out", "dx", "dmemory", "dW_*", "db_*"),
                ("mha: causal self-attention", draw),
                ("mha: RoPE, interleaved", lambda rng: draw(rng, rope=("interleaved", 1.0))),
                ("mha: RoPE, half-split layout, scale 2", lambda rng: draw(rng, rope=("half", 2.0))),
                ("mha: grouped heads (n_kv_head=2 < n_head=4)", lambda rng: draw(rng, n_kv_head=2)),
                ("mha: cross-attention (dmemory, W_kv)", lambda rng: draw(rng, cross=True)),
                ("mha: key padding, a query with no key (0, never NaN)", lambda rng: draw(rng, padding=True)),
                ("mha: backward called twice, no zero_grad (the gradients add up)", lambda rng: draw(rng, calls=2)),
                float32="mha: causal self-attention")
    + cases(pair("functional.repeat_kv", "repeat_kv"), ("out", "dx"),
            ("repeat_kv: G=2 kv heads for H=4 query heads", draw_repeat_kv),
            ("repeat_kv: G=3 kv heads, r=2 query heads each (H=6: h // r, never h % G or h // G)",
             lambda rng: draw_repeat_kv(rng, G=3, r=2)),
            ("repeat_kv: multi-query, G=1 kv head for H=3 query heads", lambda rng: draw_repeat_kv(rng, G=1, r=3)),
            float32="repeat_kv"),
    mistakes=MISTAKES,
    handout="Write repeat_kv_forward and repeat_kv_backward (functional/repeat_kv.py) first: the Module calls "
            "them for grouped kv heads (n_kv_head < n_head), before attention and after its backward.",
    also_checked=" A row with nothing to attend gives 0, never NaN.",
)
