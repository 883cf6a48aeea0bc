"""A whole GPT on one screen: forward and backward with functional calls only.

The Modules (layers/, models/gpt.py) split this into reusable pieces; here it is
one function a student reads top to bottom. It covers the default GPTConfig:
pre-norm LayerNorm blocks, tanh-GELU MLP, learned positions, multi-head attention
(n_kv_head = n_head), the head tied to the token embedding, no dropout. The
backward runs the forward's lines in exact reverse order; each block of it names
the line it reverses. tests/test_gpt_reference.py ties it to GPT.forward/backward.
Shapes: B batch, T positions, C = d_model, H heads, D = C/H, F = d_ff, V vocab.
"""
from __future__ import annotations

from ..backend import get_xp
from ..functional.activations import gelu_backward, gelu_forward
from ..functional.attention import attention_backward, attention_forward
from ..functional.cross_entropy import cross_entropy_backward, cross_entropy_forward
from ..functional.embedding import embedding_backward, embedding_forward
from ..functional.heads import merge_heads, split_heads
from ..functional.linear import linear_backward, linear_forward
from ..functional.masks import causal_mask
from ..functional.norm import layernorm_backward, layernorm_forward


def gpt_loss_and_gradients(p: dict, ids, targets, config):
    """loss, grads for params ``p`` (model.state_dict() names), ids and targets (B, T)."""
    B, T = ids.shape
    D, eps = config.d_model // config.n_head, config.eps
    # ------------------------------------------------------------------ forward
    tok, c_tok = embedding_forward(ids, p["embed.tok.W"])                    # (B, T, C)
    x = tok + p["embed.pos.W"][:T]                                           # (B, T, C)
    mask = causal_mask(T)                                                    # (T, T)
    caches = []
    for l in range(config.n_layer):
        a, f = f"blocks.{l}.attn.", f"blocks.{l}.ffn."
        h, c_ln1 = layernorm_forward(x, p[a + "norm.gamma"], p[a + "norm.beta"], eps)        # (B, T, C)
        qkv, c_qkv = linear_forward(h, p[a + "sublayer.W_qkv"], p[a + "sublayer.b_qkv"])     # (B, T, 3C)
        q, k, v = split_heads(qkv, D).reshape(B, 3, -1, T, D).swapaxes(0, 1)           # 3 × (B, H, T, D)
        o, c_att = attention_forward(q, k, v, mask)                                    # (B, H, T, D)
        y, c_o = linear_forward(merge_heads(o), p[a + "sublayer.W_o"], p[a + "sublayer.b_o"])  # (B, T, C)
        x = x + y                                                                      # residual
        h, c_ln2 = layernorm_forward(x, p[f + "norm.gamma"], p[f + "norm.beta"], eps)        # (B, T, C)
        u, c_in = linear_forward(h, p[f + "sublayer.fc_in.W"], p[f + "sublayer.fc_in.b"])    # (B, T, F)
        z, c_act = gelu_forward(u, "tanh")                                             # (B, T, F)
        m, c_out = linear_forward(z, p[f + "sublayer.fc_out.W"], p[f + "sublayer.fc_out.b"])  # (B, T, C)
        x = x + m                                                                      # residual
        caches.append((c_ln1, c_qkv, c_att, c_o, c_ln2, c_in, c_act, c_out))
    h, c_lnf = layernorm_forward(x, p["norm_f.gamma"], p["norm_f.beta"], eps)         # (B, T, C)
    logits, c_head = linear_forward(h, p["embed.tok.W"].T)                           # (B, T, V) tied head
    loss, c_ce = cross_entropy_forward(logits, targets)
    # ----------------------------------------------------------------- backward
    g = {}
    dlogits = cross_entropy_backward(1.0, c_ce)                                      # loss = CE(logits)
    dh, dW_head, _ = linear_backward(dlogits, c_head)                                # logits = h W_tokᵀ
    dx, g["norm_f.gamma"], g["norm_f.beta"] = layernorm_backward(dh, c_lnf)          # h = LN_f(x)
    for l in reversed(range(config.n_layer)):
        a, f = f"blocks.{l}.attn.", f"blocks.{l}.ffn."
        c_ln1, c_qkv, c_att, c_o, c_ln2, c_in, c_act, c_out = caches[l]
        dz, g[f + "sublayer.fc_out.W"], g[f + "sublayer.fc_out.b"] = linear_backward(dx, c_out)  # m = z W + b
        du = gelu_backward(dz, c_act)                                                     # z = gelu(u)
        dh, g[f + "sublayer.fc_in.W"], g[f + "sublayer.fc_in.b"] = linear_backward(du, c_in)     # u = h W + b
        dh, g[f + "norm.gamma"], g[f + "norm.beta"] = layernorm_backward(dh, c_ln2)     # h = LN(x)
        dx = dx + dh                                                            # x = x + m: both paths
        do, g[a + "sublayer.W_o"], g[a + "sublayer.b_o"] = linear_backward(dx, c_o)      # y = merge(o) W_o
        dq, dk, dv = attention_backward(split_heads(do, D), c_att)                   # o = attention(q, k, v)
        dqkv = merge_heads(dq, dk, dv)                                               # q, k, v = split(qkv)
        dh, g[a + "sublayer.W_qkv"], g[a + "sublayer.b_qkv"] = linear_backward(dqkv, c_qkv)  # qkv = h W
        dh, g[a + "norm.gamma"], g[a + "norm.beta"] = layernorm_backward(dh, c_ln1)      # h = LN(x)
        dx = dx + dh                                                            # x = x + y: both paths
    dpos = get_xp(dx).zeros_like(p["embed.pos.W"])                                   # x = tok + pos[:T]
    dpos[:T] = dx.sum(axis=0)                                                        # (T, C)
    g["embed.pos.W"] = dpos
    g["embed.tok.W"] = embedding_backward(dx, c_tok) + dW_head.T                     # tied: both uses
    return loss, g
