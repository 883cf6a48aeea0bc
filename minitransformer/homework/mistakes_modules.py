"""The catalogue of common mistakes in the Module backwards: MultiHeadAttention, Residual,
DecoderBlock (see homework/mistakes.py).

A variant builds the reference Module with the case's weights (``inp["build"]``), puts
a wrong backward on that one instance (the line a student leaves out), runs forward
and backward on the case's inputs, and returns every tensor: dx, dmemory, d<param>.
"""
from __future__ import annotations

import types
from itertools import permutations

import numpy as np

from ..functional.attention import attention_backward
from ..functional.heads import merge_heads, split_heads
from ..functional.linear import linear_backward
from ..functional.repeat_kv import repeat_kv_backward
from ..layers.residual import Residual, _split
from .graded import Case, run_module
from .mistakes import Mistake
from .mistakes_match import doubled, missing, never_accumulated


def _run(inp, patch) -> dict:
    """Build the reference, let ``patch(module)`` swap a backward, run the case."""
    module = inp["build"]()
    patch(module)
    result, _ = run_module(module, Case(dict(inp["forward_inputs"])), g=inp["upstream"])
    return result


def _on(instance, method, **options):
    instance.backward = types.MethodType(lambda self, dy: method(self, dy, **options), instance)


# ------------------------------------------------------------------ MultiHeadAttention
def _mha_backward(self, dy, *, rope="inverse", kv_paths=True, accumulate_kv=True, order=(0, 1, 2)):
    """MultiHeadAttention.backward with one thing changed (``order``: the blocks (dq, dk, dv), or
    (dk, dv) with cross-attention, merged in this order)."""
    proj, proj_kv, rope_cache, attn, out, positions, repeat = self._pop_cache()
    do, dW_o, db_o = linear_backward(dy, out)                               # (B, T, H·D)
    self._accumulate_pair("W_o", dW_o, "b_o", db_o)
    dq, dk, dv, dtables = self.positions.attend_backward(attention_backward, split_heads(do, self.head_dim),
                                                         attn, positions)
    for name, dtable in dtables.items():
        self._accumulate(name, dtable)
    if repeat is not None:
        dk, dv = repeat_kv_backward(dk, repeat), repeat_kv_backward(dv, repeat)
    if self.cross:
        dx, dW_q, db_q = linear_backward(merge_heads(dq), proj)
        self._accumulate_pair("W_q", dW_q, "b_q", db_q)
        dmemory, dW_kv, db_kv = linear_backward(merge_heads(*((dk, dv)[i] for i in order[:2])), proj_kv)
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
    dx, dW_qkv, db_qkv = linear_backward(merge_heads(*((dq, dk, dv)[i] for i in order)), proj)
    self._accumulate_pair("W_qkv", dW_qkv, "b_qkv", db_qkv)
    return dx


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
        if "kv_paths" in options and module.cross:
            return {}
        return _run(inp, lambda m: _on(m, _mha_backward, **options))
    return variant


# ------------------------------------------------------------------ Residual, DecoderBlock
def _residual_backward(self, dy, *, identity=True, norm=True, post_adds_dy=False, dropout=True, branch=True):
    """Residual.backward with one thing changed."""
    drop = self.dropout.backward if dropout else (lambda d: d)
    if self.norm_position == "pre":
        dh, extra = _split(self.sublayer.backward(drop(dy)))
        dx = self.norm.backward(dh) if norm else dh
        dx = dx if branch else 0.0 * dx
        dx = dx + dy if identity else dx
    else:
        ds = self.norm.backward(dy) if norm else dy
        dx, extra = _split(self.sublayer.backward(drop(ds)))
        dx = dx if branch else 0.0 * dx
        dx = dx + (dy if post_adds_dy else ds) if identity else dx
    return (dx, *extra) if extra else dx


def _residuals(**options):
    def variant(inp):
        module = inp["build"]()
        residuals = [m for _, m in module.named_modules() if isinstance(m, Residual)]
        if options.get("post_adds_dy") and residuals[0].norm_position != "post":
            return {}
        if not options.get("dropout", True) and not any(r.dropout.p_drop for r in residuals):
            return {}

        def patch(m):
            for _, r in m.named_modules():
                if isinstance(r, Residual):
                    _on(r, _residual_backward, **options)
        return _run(inp, patch)
    return variant


def _block_backward(self, dy, *, cross=True, reverse=True):
    """DecoderBlock.backward with one thing changed."""
    order = ("ffn", "cross_attn", "attn") if reverse else ("attn", "cross_attn", "ffn")
    dx, dmemory = dy, None
    for name in order:
        if name == "cross_attn":
            if self.cross and cross:
                dx, dmemory = self.cross_attn.backward(dx)
            continue
        dx = getattr(self, name).backward(dx)
    return dx if dmemory is None else (dx, dmemory)


def _block(**options):
    def variant(inp):
        module = inp["build"]()
        if "cross" in options and not module.cross:
            return {}
        return _run(inp, lambda m: _on(m, _block_backward, **options))
    return variant


# ------------------------------------------------------------------ generic Module mistakes
_PARAMS = ("d*",)

MODULES = (
    Mistake("mha", "MultiHeadAttention", "mha-dmemory-missing", ("dmemory",),
            "cross-attention's backward returns (dx, dmemory): the memory's gradient comes back through "
            "the key/value projection, linear_backward(merge_heads(dk, dv), the W_kv cache)",
            match=missing),
    Mistake("mha", "MultiHeadAttention", "mha-rope-not-undone", ("dx", "dmemory", "d*"),
            "the RoPE rotation of q and k is not undone: after attention's backward, send dq and dk through "
            "rope_backward (the rotation by -mθ) before the projection's backward",
            _mha(rope="skip")),
    Mistake("mha", "MultiHeadAttention", "mha-rope-wrong-way", ("dx", "dmemory", "d*"),
            "dq and dk are rotated FORWARD by mθ: the backward of RoPE is rope_backward, the rotation by -mθ",
            _mha(rope="forward")),
    Mistake("mha", "MultiHeadAttention", "mha-query-path-only", ("dx", "dmemory", "d*"),
            "only the queries' gradient reaches x: the keys and values are projections of x too; merge "
            "dq, dk, dv side by side and send them back through W_qkv",
            _mha(kv_paths=False)),
    Mistake("mha", "MultiHeadAttention", "mha-merge-order", ("dx", "dmemory", "d*"),
            "dq, dk, dv are merged in the wrong order: W_qkv's columns are [Q | K | V], so the gradient "
            "sent back is merge_heads(dq, dk, dv) (cross-attention: W_kv is [K | V], merge_heads(dk, dv))",
            _mha_merge_orders),
    Mistake("mha", "MultiHeadAttention", "mha-kv-gradient-missing", ("dW_kv", "db_kv"),
            "the key/value projection's gradient (W_kv, b_kv) is not accumulated: it comes with dmemory "
            "from linear_backward(merge_heads(dk, dv), the W_kv cache)",
            _mha(accumulate_kv=False)),
    Mistake("mha", "MultiHeadAttention", "mha-gradient-never-accumulated", _PARAMS,
            "this parameter's gradient stays 0: it is never accumulated into grads (self._accumulate(name, g))",
            match=never_accumulated),
    Mistake("mha", "MultiHeadAttention", "mha-gradient-doubled", _PARAMS,
            "twice the expected gradient: it is accumulated twice", match=doubled),
    Mistake("block", "DecoderBlock", "block-dmemory-missing", ("dmemory",),
            "a block with cross-attention returns (dx, dmemory): pass on the dmemory that the "
            "cross-attention Residual returns",
            match=missing),
    Mistake("block", "DecoderBlock", "residual-identity-missing", ("dx", "dmemory", "d*"),
            "the identity branch's gradient is missing: y = x + F(...) gives dx = (the branch's gradient) + dy "
            "(post-norm: + ds, the gradient at the sum)",
            _residuals(identity=False)),
    Mistake("block", "DecoderBlock", "residual-branch-missing", ("dx", "dmemory", "d*"),
            "only the identity branch's gradient reaches x: y = x + F(...) gives dx = (the branch's gradient, "
            "through the sublayer and the norm) + dy; the branch's gradient was overwritten or dropped",
            _residuals(branch=False)),
    Mistake("block", "DecoderBlock", "residual-norm-skipped", ("dx", "dmemory", "d*"),
            "the norm's backward is skipped: the gradient must go through norm.backward "
            "(pre-norm: after the sublayer's; post-norm: first)",
            _residuals(norm=False)),
    Mistake("block", "DecoderBlock", "residual-post-norm-adds-dy", ("dx", "d*"),
            "post-norm y = Norm(x + F(x)): the identity branch carries ds = norm.backward(dy), not dy",
            _residuals(post_adds_dy=True)),
    Mistake("block", "DecoderBlock", "residual-dropout-skipped", ("dx", "dmemory", "d*"),
            "the residual dropout's backward is skipped: the sublayer's gradient is dropout.backward(dy) "
            "(dropped entries get 0, kept ones the scale 1/(1 - p_drop))",
            _residuals(dropout=False)),
    Mistake("block", "DecoderBlock", "block-cross-attention-skipped", ("dx", "dmemory", "d*"),
            "the cross-attention sublayer is skipped in backward: ffn, then cross_attn (which returns "
            "(dx, dmemory)), then attn: the forward's order reversed",
            _block(cross=False)),
    Mistake("block", "DecoderBlock", "block-forward-order", ("dx", "dmemory", "d*"),
            "the sublayers run backward in the forward's order: backward runs them reversed, ffn first, "
            "attn last",
            _block(reverse=False)),
    Mistake("block", "DecoderBlock", "block-gradient-never-accumulated", _PARAMS,
            "this parameter's gradient stays 0: it is never accumulated into grads (self._accumulate(name, g))",
            match=never_accumulated),
)
