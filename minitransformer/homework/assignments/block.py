"""block: a whole pre- or post-norm decoder block's backward: Residual.backward and DecoderBlock.backward."""
from __future__ import annotations

import numpy as np

from ...layers.residual import Residual, _split
from ..assignment import Assignment, Mistake, cases, module
from ..graded import Case, new
from ..mistakes_match import missing, never_accumulated
from . import L3
from ._draw import module_input
from ._variants import _on, _run


# ------------------------------------------------------------------ the graded inputs
def draw(rng, *, norm_position="pre", cross=False, p_drop=0.0, norm="layernorm", n_kv_head=None,
         rope=False) -> Case:
    B, T = int(rng.integers(1, 3)), int(rng.integers(2, 5))
    inputs = {"x": module_input(rng, B, T)}
    if cross:
        inputs["memory"] = module_input(rng, B, T + 1)
    spec = dict(d_model=8, n_head=4, d_ff=16, norm=norm, norm_position=norm_position, p_drop=p_drop,
                n_kv_head=n_kv_head, init_std=0.5, out_std=0.5)
    if rope:
        spec["positions"] = new("layers.attention_positions:RoPE")
    ctor = {"rng": int(rng.integers(0, 2**31)), "dtype": np.float64, "cross": cross,
            "dropout_rng": int(rng.integers(0, 2**31)) if p_drop else None}
    return Case(inputs, {"ctor": ((), ctor), "spec": spec})


# ------------------------------------------------------------------ the catalogue
# A variant builds the reference block with the case's weights, puts a wrong backward on its
# Residuals or on the block itself, runs forward and backward, and returns every tensor.
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



_PARAMS = ("d*",)                     # every parameter gradient of the Module

MISTAKES = (
    Mistake("DecoderBlock", "block-dmemory-missing", ("dmemory",),
            "a block with cross-attention returns (dx, dmemory): pass on the dmemory that the "
            "cross-attention Residual returns",
            match=missing),
    Mistake("DecoderBlock", "residual-identity-missing", ("dx", "dmemory", "d*"),
            "the identity branch's gradient is missing: y = x + F(...) gives dx = (the branch's gradient) + dy "
            "(post-norm: + ds, the gradient at the sum)",
            _residuals(identity=False)),
    Mistake("DecoderBlock", "residual-branch-missing", ("dx", "dmemory", "d*"),
            "only the identity branch's gradient reaches x: y = x + F(...) gives dx = (the branch's gradient, "
            "through the sublayer and the norm) + dy; the branch's gradient was overwritten or dropped",
            _residuals(branch=False)),
    Mistake("DecoderBlock", "residual-norm-skipped", ("dx", "dmemory", "d*"),
            "the norm's backward is skipped: the gradient must go through norm.backward "
            "(pre-norm: after the sublayer's; post-norm: first)",
            _residuals(norm=False)),
    Mistake("DecoderBlock", "residual-post-norm-adds-dy", ("dx", "d*"),
            "post-norm y = Norm(x + F(x)): the identity branch carries ds = norm.backward(dy), not dy",
            _residuals(post_adds_dy=True)),
    Mistake("DecoderBlock", "residual-dropout-skipped", ("dx", "dmemory", "d*"),
            "the residual dropout's backward is skipped: the sublayer's gradient is dropout.backward(dy) "
            "(dropped entries get 0, kept ones the scale 1/(1 - p_drop))",
            _residuals(dropout=False)),
    Mistake("DecoderBlock", "block-cross-attention-skipped", ("dx", "dmemory", "d*"),
            "the cross-attention sublayer is skipped in backward: ffn, then cross_attn (which returns "
            "(dx, dmemory)), then attn: the forward's order reversed",
            _block(cross=False)),
    Mistake("DecoderBlock", "block-forward-order", ("dx", "dmemory", "d*"),
            "the sublayers run backward in the forward's order: backward runs them reversed, ffn first, "
            "attn last",
            _block(reverse=False)),
    Mistake("DecoderBlock", "block-gradient-never-accumulated", _PARAMS,
            "this parameter's gradient stays 0: it is never accumulated into grads (self._accumulate(name, g))",
            match=never_accumulated),
)


ASSIGNMENT = Assignment(
    id="block", title="A whole pre-norm block: Residual and DecoderBlock backward", lecture=L3, points=10,
    targets=("layers.residual:Residual.backward", "layers.blocks:DecoderBlock.backward"),
    needs=("mha", "layernorm", "rmsnorm", "gelu", "relu", "dropout", "linear"),
    equivalents=("layers.blocks:EncoderBlock.backward",                        # the block without cross-attention
                 "models.gpt_reference:gpt_loss_and_gradients"),               # a whole pre-norm block's backward, written out
    cases=cases(module("layers.blocks:DecoderBlock"), ("out", "dx", "dmemory", "d*.*"),
                ("block: pre-norm decoder block", draw),
                ("block: post-norm", lambda rng: draw(rng, norm_position="post")),
                ("block: cross-attention (dmemory)", lambda rng: draw(rng, cross=True)),
                ("block: residual dropout p=0.3", lambda rng: draw(rng, p_drop=0.3)),
                ("block: RMSNorm, RoPE, grouped heads", lambda rng: draw(rng, norm="rmsnorm", rope=True, n_kv_head=2)),
                float32="block: pre-norm decoder block"),
    mistakes=MISTAKES,
)
