"""Named configurations of published models, and their parameter count by formula.

    config = preset("bert-base")              # an EncoderConfig; preset(name, p_drop=0.0) overrides fields
    count_parameters(config)                  # 109_482_240, without building the model

PRESETS:
    "transformer-base"  Vaswani et al. (2017), Table 3 "base": N = 6 encoder and 6 decoder
                        layers, d_model 512, h = 8, d_ff 2048, P_drop 0.1; one shared
                        BPE vocabulary of about 37000 tokens (section 5.1, English-German)
                        with the embeddings and the pre-softmax projection tied (3.4);
                        sinusoidal positions (no parameters), post-norm, ReLU.
    "bert-base"         Devlin et al. (2019): L = 12, H = 768, A = 12, d_ff 3072, V = 30522
    "bert-large"        L = 24, H = 1024, A = 16, d_ff 4096, V = 30522
                        both: 512 learned positions, 2 token types, embedding LayerNorm, eps 1e-12,
                        exact GELU, post-norm, and the pooler; no MLM head: the count is that of
                        Hugging Face's ``BertModel`` (the encoder that BERT checkpoints hold).

``count_parameters`` adds up the shapes every Module creates (the dotted names
of ``Module.parameters()``), one line per part, so it can be checked against
``model.num_parameters()`` for any config (tests/test_presets.py does, over
drawn variants) and used where building the model would cost gigabytes:

    transformer-base    63,082,496    (the paper's Table 3 says 65M; see the README)
    bert-base          109,482,240    (BertModel: 108,891,648 + the pooler's 768·768 + 768)
    bert-large         335,141,888
"""
from __future__ import annotations

from dataclasses import replace

from ..layers.activation import GATED_ACTIVATIONS
from .classifier_config import TabularConfig, ViTConfig
from .config import EncoderConfig, GPTConfig, Seq2SeqConfig
from ..validate import check_choice

_BERT = dict(vocab_size=30522, block_size=512, type_vocab_size=2, p_drop=0.1, eps=1e-12, activation="gelu",
             norm_position="post", position="learned", embedding_norm=True, mlm_head=False, pooler=True)
PRESETS = {
    "transformer-base": lambda: Seq2SeqConfig(vocab_size=37000, block_size=512, n_layer=6, n_head=8, d_model=512,
                                              d_ff=2048, p_drop=0.1, shared_embeddings=True),
    "bert-base": lambda: EncoderConfig(n_layer=12, n_head=12, d_model=768, d_ff=3072, **_BERT),
    "bert-large": lambda: EncoderConfig(n_layer=24, n_head=16, d_model=1024, d_ff=4096, **_BERT),
}
# Positions with parameters: "learned" (block_size · C, in the embeddings) and the relative
# schemes, which live in every self-attention layer (_relative); the rest have none.
KNOWN_POSITIONS = ("learned", "sinusoidal", "rope", "alibi", "none", "shaw", "t5")


def preset(name: str, **overrides):
    """The config called ``name`` (one of PRESETS), with ``overrides`` replacing fields (validated)."""
    check_choice("name", name, tuple(PRESETS))
    return replace(PRESETS[name](), **overrides)


def _linear(d_in: int, d_out: int, bias: bool) -> int:
    return d_in * d_out + (d_out if bias else 0)


def _norm(c) -> int:
    return 2 * c.d_model if c.norm == "layernorm" else c.d_model      # gamma, beta / gamma


def _attention(c) -> int:
    """W_qkv (C, (H + 2G)·D) (or W_q and W_kv: the same count), W_o (H·D, C), and their biases."""
    H, G, D, C = c.n_head, c.n_kv_head or c.n_head, c.head_dim, c.d_model
    return _linear(C, (H + 2 * G) * D, c.bias) + _linear(H * D, C, c.bias)


def _ffn(c) -> int:
    F = c.d_ff or 4 * c.d_model
    width = 2 * F if c.activation in GATED_ACTIVATIONS else F          # a gated unit halves its input
    return _linear(c.d_model, width, c.bias) + _linear(F, c.d_model, c.bias)


def _relative(c) -> int:
    """The relative-position tables of one self-attention layer (cross-attention has none):
    Shaw's rel_K, rel_V (2k+1, D) each; T5's rel_bias (n_buckets, H)."""
    if c.position == "shaw":
        return 2 * (2 * c.relative_clip + 1) * c.head_dim
    if c.position == "t5":
        return c.relative_buckets * c.n_head
    return 0


def _block(c, n_attention: int) -> int:
    """One block: its attention sublayers and the FFN, each with its norm; the first
    attention sublayer is the self-attention, which holds the relative tables."""
    return n_attention * (_attention(c) + _norm(c)) + _relative(c) + _ffn(c) + _norm(c)


def _positions(c) -> int:
    if c.position not in KNOWN_POSITIONS:
        raise ValueError(f"position: count_parameters knows {KNOWN_POSITIONS}, got {c.position!r}")
    return c.block_size * c.d_model if c.position == "learned" else 0


def _stack(c, n_attention: int) -> int:
    """n_layer blocks, plus the final norm of a pre-norm stack."""
    return c.n_layer * _block(c, n_attention) + (_norm(c) if c.norm_position == "pre" else 0)


def _encoder(c: EncoderConfig) -> int:
    C = c.d_model
    n = c.vocab_size * C + _positions(c) + c.type_vocab_size * C + (_norm(c) if c.embedding_norm else 0)
    n += _stack(c, 1)
    if c.mlm_head:      # dense, norm, output bias; the output matrix is the tied word embedding
        n += _linear(C, C, True) + _norm(c) + c.vocab_size
    if c.pooler:
        n += _linear(C, C, True)
    if c.n_classes:
        n += _linear(C, c.n_classes, True)
    return n


def _gpt(c: GPTConfig) -> int:
    C = c.d_model
    head = 0 if c.tie_weights else c.vocab_size * C                   # LMHead: no bias
    return c.vocab_size * C + _positions(c) + _stack(c, 1) + head


def _seq2seq(c: Seq2SeqConfig) -> int:
    C, V_src = c.d_model, c.src_vocab_size or c.vocab_size
    encoder = V_src * C + _positions(c) + _stack(c, 1)
    separate = 0 if c.shared_embeddings else 2 * c.vocab_size * C    # target embedding and output matrix
    decoder = _positions(c) + _stack(c, 2) + separate                 # self- and cross-attention
    return encoder + decoder


def _trunk(c) -> int:
    """The classifiers' [CLS] vector, blocks, final norm and head."""
    return c.d_model + _stack(c.body(), 1) + _linear(c.d_model, c.n_classes, True)


def _vit(c: ViTConfig) -> int:
    C = c.d_model
    patches = _linear(c.patch_size ** 2 * c.in_channels, C, True)
    positions = (2 * c.grid + 1) * C                                  # E_row, E_col, e_cls
    return patches + positions + _trunk(c)


def _tabular(c: TabularConfig) -> int:
    C = c.d_model
    return 2 * c.n_numeric * C + sum(c.cardinalities) * C + _trunk(c)  # W_num, b_num, E


_COUNTERS = ((ViTConfig, _vit), (TabularConfig, _tabular), (EncoderConfig, _encoder), (GPTConfig, _gpt),
             (Seq2SeqConfig, _seq2seq))


def count_parameters(config) -> int:
    """The number of parameters the model of ``config`` has (tied matrices counted once),
    computed from the shapes alone: no array is allocated."""
    for config_class, counter in _COUNTERS:
        if isinstance(config, config_class):
            config.__post_init__()          # checked again: a field set after construction is not
            return counter(config)
    raise TypeError(f"config: expected one of {[k.__name__ for k, _ in _COUNTERS]}, got {type(config).__name__}")
