"""A BERT-like encoder (Devlin et al. 2019): bidirectional self-attention.

    x_0 = InputEmbedding(ids, token types)             (B, S, C)
    x_l = EncoderBlock_l(x_{l-1}, padding mask)        (B, S, C)
    h   = Norm_f(x_L)        (pre-norm only)

Heads, chosen per call with ``head=``:
    "mlm":  masked-language-model logits  Eᵀ LayerNorm(GELU(h W + b)) + b_V   (B, S, V)
    "pool": BERT's pooler (config.pooler): pooled = tanh(h[:, 0] W_p + b_p)  (B, C)
    "cls":  sequence classification from the first token: h[:, 0] W_c + b_c  (B, n_classes),
            or pooled W_c + b_c with the pooler (BERT's own classifier)
    None:   the hidden states h themselves                                   (B, S, C)

BERT is expressible exactly: post-norm, exact GELU, learned positions,
token-type embeddings, an embedding LayerNorm, eps from the config, and the
pooler (functional/pooler.py) when ``pooler=True``. ALBERT (Lan et al. 2020) too:
``embed_dim`` = E embeds at width E and projects to C with a Linear (E·V + E·C parameters
instead of C·V; the MLM head goes back to width E for the tied output matrix), and
``share_layers`` ties every block to the first (models/sharing.py). ELECTRA (Clark et
al. 2020): ``rtd_head`` adds the replaced-token-detection head; its loss is a binary
cross-entropy per token (training/loss.py has the multi-class one, not this).
"""
from __future__ import annotations


import numpy as np

from ..backend import default_rng, get_xp
from ..layers.activation import make_activation
from ..layers.blocks import EncoderBlock
from ..layers.linear import Linear
from ..layers.lm_head import LMHead
from ..layers.module import Module, ModuleList
from ..layers.norm import make_norm
from ..layers.pooler import Pooler
from ..validate import check_choice, check_mask, check_ndim
from .config import EncoderConfig, TransformerConfig
from .embeddings import InputEmbedding
from .sharing import share_parameters
from .gpt import dropout_generator


class MLMHead(Module):
    """logits = LayerNorm(act(h W + b)) Eᵀ + b_V, E tied to the word embeddings."""

    def __init__(self, config: TransformerConfig, *, rng, dtype):
        super().__init__()
        C = config.d_model
        E = getattr(config, "embed_dim", None) or C                     # ALBERT: back to the embedding width
        self.add_child("dense", Linear(C, E, rng=rng, init_std=config.init_std, dtype=dtype))
        self.add_child("act", make_activation(_plain_activation(config)))
        self.add_child("norm", make_norm(config.norm, E, config.eps, dtype))
        self.add_child("decoder", LMHead(E, config.vocab_size, bias=True, rng=rng,
                                         init_std=config.init_std, dtype=dtype))

    def forward(self, h):
        return self.decoder.forward(self.norm.forward(self.act.forward(self.dense.forward(h))))

    def backward(self, dlogits):
        return self.dense.backward(self.act.backward(self.norm.backward(self.decoder.backward(dlogits))))


def _plain_activation(config) -> str:
    """A head's activation: the config's; GELU where the config's is gated (it needs 2F inputs);
    SiLU for Swish (the heads keep no β of their own)."""
    if config.activation == "swish":
        return "silu"
    return "gelu" if config.activation in ("geglu", "swiglu") else config.activation


class RTDHead(Module):
    """ELECTRA's discriminator head: logit_j = act(h_j W_d + b_d) w_r + b_r, (B, S, C) -> (B, S)."""

    def __init__(self, config: TransformerConfig, *, rng, dtype):
        super().__init__()
        C = config.d_model
        self.add_child("dense", Linear(C, C, rng=rng, init_std=config.init_std, dtype=dtype))
        self.add_child("act", make_activation(_plain_activation(config)))
        self.add_child("out", Linear(C, 1, rng=rng, init_std=config.init_std, dtype=dtype))

    def forward(self, h):
        return self.out.forward(self.act.forward(self.dense.forward(h)))[..., 0]     # (B, S)

    def backward(self, dlogits):
        return self.dense.backward(self.act.backward(self.out.backward(dlogits[..., None])))


class Encoder(Module):
    def __init__(self, config: TransformerConfig, *, rng=0, dropout_rng=None, dtype=np.float32,
                 scale_embeddings: bool = False):
        super().__init__()
        if not isinstance(config, TransformerConfig):
            raise TypeError(f"config: expected an EncoderConfig, got {type(config).__name__}")
        init_rng = default_rng(rng)
        dropout_rng = dropout_rng if dropout_rng is not None else dropout_generator(rng)
        self.config = config
        C = config.d_model
        bert = isinstance(config, EncoderConfig)
        E = config.embed_dim if bert and config.embed_dim else C           # the embeddings' width
        self.add_child("embed", InputEmbedding(
            config.vocab_size, E, config.block_size, config.position,
            type_vocab_size=config.type_vocab_size if bert else 0,
            scale=C ** 0.5 if scale_embeddings else 1.0,
            norm=config.norm if bert and config.embedding_norm else None, eps=config.eps,
            p_drop=config.p_drop, rng=init_rng, dropout_rng=dropout_rng, init_std=config.init_std,
            dtype=dtype))
        if bert and config.embed_dim:
            self.add_child("embed_proj", Linear(E, C, rng=init_rng, init_std=config.init_std, dtype=dtype))
        spec = config.block_spec(causal=False)
        self.add_child("blocks", ModuleList(EncoderBlock(spec, rng=init_rng, dropout_rng=dropout_rng,
                                                         dtype=dtype) for _ in range(config.n_layer)))
        if bert and config.share_layers:
            share_parameters(self.blocks)
        elif config.share_relative_bias:
            share_parameters(self.blocks, lambda name: name.endswith("rel_bias"))
        if config.norm_position == "pre":
            self.add_child("norm_f", make_norm(config.norm, C, config.eps, dtype))
        if bert and config.mlm_head:
            self.add_child("mlm_head", MLMHead(config, rng=init_rng, dtype=dtype))
            self.mlm_head.decoder.tie("W", self.embed.tok, "W")
        if bert and config.pooler:
            self.add_child("pool_head", Pooler(C, rng=init_rng, init_std=config.init_std, dtype=dtype))
        if bert and config.rtd_head:
            self.add_child("rtd_head", RTDHead(config, rng=init_rng, dtype=dtype))
        if bert and config.n_classes:
            self.add_child("cls_head", Linear(C, config.n_classes, rng=init_rng,
                                              init_std=config.init_std, dtype=dtype))

    def forward(self, ids, token_type_ids=None, attention_mask=None, head=None):
        """ids (B, S); attention_mask (B, S) True/1 = real token (None: all real).

        Returns hidden states (B, S, C), the logits of ``head`` ("mlm", "cls"), or the pooled (B, C) ("pool").
        """
        check_choice("head", head, (None, "mlm", "cls", "pool", "rtd"))
        if head is not None and f"{head}_head" not in self.children:
            raise ValueError(f"head: this encoder has no {head!r} head (see EncoderConfig)")
        check_ndim("ids", ids, 2, "(B, S)")
        key_padding_mask = None
        if attention_mask is not None:
            check_mask("attention_mask", attention_mask, ids.shape)
            key_padding_mask = attention_mask.astype(bool)
        x = self.embed.forward(ids, token_type_ids)                       # (B, S, C), or (B, S, E)
        if "embed_proj" in self.children:
            x = self.embed_proj.forward(x)                                # (B, S, C)
        for block in self.blocks:
            x = block.checkpointed_forward(x, key_padding_mask)           # (B, S, C)
        if "norm_f" in self.children:
            x = self.norm_f.forward(x)
        if head == "mlm":
            out = self.mlm_head.forward(x)                                # (B, S, V)
        elif head == "pool":
            out = self.pool_head.forward(x)                               # (B, C)
        elif head == "rtd":
            out = self.rtd_head.forward(x)                                # (B, S)
        elif head == "cls" and "pool_head" in self.children:
            out = self.cls_head.forward(self.pool_head.forward(x))        # (B, n_classes)
        elif head == "cls":
            out = self.cls_head.forward(x[:, 0])                          # (B, n_classes)
        else:
            out = x
        self._save((head, x.shape), out)
        return out

    def backward(self, dout):
        """dout: the gradient of what forward returned, its shape and dtype (ValueError/TypeError
        naming ``dout`` otherwise). Returns None (ids have no gradient)."""
        head, hidden_shape = self._pop_cache(dout)
        if head == "mlm":
            dx = self.mlm_head.backward(dout)                             # (B, S, C)
        elif head == "pool":
            dx = self.pool_head.backward(dout)                            # (B, S, C)
        elif head == "rtd":
            dx = self.rtd_head.backward(dout)                             # (B, S, C)
        elif head == "cls" and "pool_head" in self.children:
            dx = self.pool_head.backward(self.cls_head.backward(dout))    # (B, S, C)
        elif head == "cls":
            dx = _scatter_first(self.cls_head.backward(dout), hidden_shape)  # (B, S, C)
        else:
            dx = dout
        if "norm_f" in self.children:
            dx = self.norm_f.backward(dx)
        for block in reversed(list(self.blocks)):
            dx = block.checkpointed_backward(dx)
        if "embed_proj" in self.children:
            dx = self.embed_proj.backward(dx)                             # (B, S, E)
        self.embed.backward(dx)
        return None


def _scatter_first(d_first, shape):
    """Gradient of x[:, 0]: d_first in row 0, zeros elsewhere."""
    xp = get_xp(d_first)
    dx = xp.zeros(shape, dtype=d_first.dtype)                             # (B, S, C)
    dx[:, 0] = d_first
    return dx
