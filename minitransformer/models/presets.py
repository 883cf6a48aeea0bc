"""Named configurations of published models, and their parameter count by formula.

    config = preset("bert-base")              # an EncoderConfig; preset(name, p_drop=0.0) overrides fields
    count_parameters(config)                  # 109_482_240, without building the model

PRESETS (each count below is tested against a published number, source named in the test):
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
    "gpt2-small"        Radford et al. (2019): 12 layers, 768 wide, 12 heads, V = 50257, 1024
                        learned positions, pre-norm, tanh GELU, head tied to the embedding.
    "llama-2-7b"        Touvron et al. (2023): 32 layers, 4096 wide, 32 heads, d_ff 11008,
    "llama-2-70b"       80 layers, 8192 wide, 64 heads with 8 kv heads (GQA), d_ff 28672;
                        both: V = 32000, RMSNorm (eps 1e-5), SwiGLU, RoPE (half-split), no
                        biases, an untied output matrix; context 4096.
    "albert-base"       Lan et al. (2020): BERT-base's shape with factorised embeddings (E = 128,
                        projected to 768) and one block shared by all 12 layers; V = 30000,
                        tanh GELU, the pooler (Hugging Face's ``AlbertModel``).
    "distilbert"        Sanh et al. (2019): BERT-base with 6 layers, no token types, no pooler.
    "t5-base"           Raffel et al. (2020): 12 + 12 layers, 768 wide, 12 heads of 64, d_ff 3072,
                        V = 32128, pre-norm RMSNorm (eps 1e-6), ReLU, no biases, one embedding
                        for encoder, decoder and output; T5's relative bias (32 buckets, distance
                        128), one table per stack shared by its layers. Not modelled: T5 scales
                        the decoder output by d_model^-0.5 before the tied output matrix.
    "electra-base-discriminator"    Clark et al. (2020): BERT-base's encoder, no pooler, and the
    "electra-small-discriminator"   replaced-token-detection head; small: 256 wide, 4 heads,
                                    d_ff 1024, embeddings of width 128 projected to 256.

``count_parameters`` adds up the shapes every Module creates (the dotted names
of ``Module.parameters()``), one line per part, so it can be checked against
``model.num_parameters()`` for any config (tests/test_presets.py does, over
drawn variants) and used where building the model would cost gigabytes:

    transformer-base    63,082,496    (the paper's Table 3 says 65M; see the README)
    bert-base          109,482,240    (BertModel: 108,891,648 + the pooler's 768·768 + 768)
    bert-large         335,141,888
    gpt2-small         124,439,808
    llama-2-7b       6,738,415,616
    llama-2-70b     68,976,648,192
    albert-base         11,683,584
    distilbert          66,362,880
    t5-base            222,903,552
    electra-base-discriminator   109,483,009    (the encoder 108,891,648 + the head 591,361)
    electra-small-discriminator   13,549,057
"""
from __future__ import annotations

from dataclasses import replace

from ..layers.activation import GATED_ACTIVATIONS
from .classifier_config import TabularConfig, ViTConfig
from .config import EncoderConfig, GPTConfig, Seq2SeqConfig
from ..validate import check_choice, check_items

_BERT = dict(vocab_size=30522, block_size=512, type_vocab_size=2, p_drop=0.1, eps=1e-12, activation="gelu",
             norm_position="post", position="learned", embedding_norm=True, mlm_head=False, pooler=True)
_LLAMA_2 = dict(vocab_size=32000, block_size=4096, norm="rmsnorm", eps=1e-5, activation="swiglu",
                position="rope", rope_layout="half", bias=False, tie_weights=False)
PRESETS = {
    "transformer-base": lambda: Seq2SeqConfig(vocab_size=37000, block_size=512, n_layer=6, n_head=8, d_model=512,
                                              d_ff=2048, p_drop=0.1, shared_embeddings=True),
    "bert-base": lambda: EncoderConfig(n_layer=12, n_head=12, d_model=768, d_ff=3072, **_BERT),
    "bert-large": lambda: EncoderConfig(n_layer=24, n_head=16, d_model=1024, d_ff=4096, **_BERT),
    "gpt2-small": lambda: GPTConfig(vocab_size=50257, block_size=1024, n_layer=12, n_head=12, d_model=768,
                                    p_drop=0.1),
    "llama-2-7b": lambda: GPTConfig(n_layer=32, n_head=32, d_model=4096, d_ff=11008, **_LLAMA_2),
    "llama-2-70b": lambda: GPTConfig(n_layer=80, n_head=64, n_kv_head=8, d_model=8192, d_ff=28672, **_LLAMA_2),
    "albert-base": lambda: EncoderConfig(n_layer=12, n_head=12, d_model=768, d_ff=3072, embed_dim=128,
                                         share_layers=True, **{**_BERT, "vocab_size": 30000, "p_drop": 0.0,
                                                               "activation": "gelu_tanh"}),
    "distilbert": lambda: EncoderConfig(n_layer=6, n_head=12, d_model=768, d_ff=3072,
                                        **{**_BERT, "type_vocab_size": 0, "pooler": False}),
    "t5-base": lambda: Seq2SeqConfig(vocab_size=32128, block_size=512, n_layer=12, n_head=12, d_model=768,
                                     d_ff=3072, norm="rmsnorm", norm_position="pre", eps=1e-6, activation="relu",
                                     position="t5", relative_buckets=32, relative_max_distance=128,
                                     share_relative_bias=True, bias=False, p_drop=0.1, shared_embeddings=True,
                                     scale_embeddings=False),
    "electra-base-discriminator": lambda: EncoderConfig(n_layer=12, n_head=12, d_model=768, d_ff=3072,
                                                        rtd_head=True, **{**_BERT, "pooler": False}),
    "electra-small-discriminator": lambda: EncoderConfig(n_layer=12, n_head=4, d_model=256, d_ff=1024,
                                                         embed_dim=128, rtd_head=True,
                                                         **{**_BERT, "pooler": False}),
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


def _norm(c, width: int | None = None) -> int:
    """gamma, beta (LayerNorm) or gamma (RMSNorm) of ``width`` features (default d_model)."""
    width = width or c.d_model
    return 2 * width if c.norm == "layernorm" else width


def _attention(c) -> int:
    """W_qkv (C, (H + 2G)·D) (or W_q and W_kv: the same count), W_o (H·D, C), and their biases."""
    H, G, D, C = c.n_head, c.n_kv_head or c.n_head, c.head_dim, c.d_model
    return _linear(C, (H + 2 * G) * D, c.bias) + _linear(H * D, C, c.bias)


def ffn_parameters(c) -> int:
    """The parameters of ONE feed-forward network of ``c``'s blocks (one expert, with ffn="moe")."""
    F = c.d_ff or 4 * c.d_model
    width = 2 * F if c.activation in GATED_ACTIVATIONS else F          # a gated unit halves its input
    swish_beta = 1 if c.activation == "swish" else 0                   # Swish's learned β
    return _linear(c.d_model, width, c.bias) + swish_beta + _linear(F, c.d_model, c.bias)


def _ffn(c) -> int:
    """One FFN; with ffn="moe", E of them and the router W_router (C, E), which has no bias."""
    if c.ffn == "moe":
        return c.d_model * c.n_experts + c.n_experts * ffn_parameters(c)
    return ffn_parameters(c)


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
    """n_layer blocks, plus the final norm of a pre-norm stack. Shared parameters count once:
    ALBERT's ``share_layers`` (one block's worth), T5's ``share_relative_bias`` (one table)."""
    final_norm = _norm(c) if c.norm_position == "pre" else 0
    if getattr(c, "share_layers", False):
        return _block(c, n_attention) + final_norm
    repeated = (c.n_layer - 1) * _relative(c) if c.share_relative_bias else 0
    return c.n_layer * _block(c, n_attention) - repeated + final_norm


def _encoder(c: EncoderConfig) -> int:
    C, E = c.d_model, c.embed_dim or c.d_model                       # E: ALBERT's embedding width
    positions = c.block_size * E if c.position == "learned" else _positions(c)
    n = c.vocab_size * E + positions + c.type_vocab_size * E + (_norm(c, E) if c.embedding_norm else 0)
    n += _linear(E, C, True) if c.embed_dim else 0                     # the projection E -> C
    n += _stack(c, 1)
    if c.mlm_head:      # dense C -> E, norm, output bias; the output matrix is the tied word embedding
        n += _linear(C, E, True) + _norm(c, E) + c.vocab_size
    if c.pooler:
        n += _linear(C, C, True)
    if c.rtd_head:      # ELECTRA: dense C -> C, then one logit per token
        n += _linear(C, C, True) + _linear(C, 1, True)
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
    registers = c.n_registers * C                                     # (R, C), Darcet et al.
    return patches + positions + registers + _trunk(c)


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


# ------------------------------------------------------------------ the notable-models table
NOTABLE_COLUMNS = ("model", "family", "layers", "d_model", "heads", "kv heads", "d_ff", "vocab", "context",
                   "norm", "activation", "positions", "parameters")


def _family(config) -> str:
    return {GPTConfig: "decoder", EncoderConfig: "encoder", Seq2SeqConfig: "encoder-decoder"}[type(config)]


def notable_models(names=None) -> list[dict]:
    """One row per preset (or per name in ``names``): its architecture and parameter count.

    Returns: a list of dicts with the keys NOTABLE_COLUMNS (ints for the sizes, strings for
    the rest; "layers" of an encoder-decoder is the layers per stack).
    """
    if isinstance(names, str):
        raise TypeError(f"names: expected a list of preset names (e.g. [{names!r}]) or None, got the str {names!r}")
    rows = []
    for i, name in enumerate(tuple(PRESETS) if names is None else check_items("names", names)):
        try:
            c = preset(name)
        except (TypeError, ValueError) as e:         # preset names its own argument, "name"
            raise type(e)(f"names[{i}]: {str(e).partition(': ')[2]}") from None
        rows.append({"model": name, "family": _family(c), "layers": c.n_layer, "d_model": c.d_model,
                     "heads": c.n_head, "kv heads": c.n_kv_head or c.n_head, "d_ff": c.d_ff or 4 * c.d_model,
                     "vocab": c.vocab_size, "context": c.block_size, "norm": f"{c.norm_position}-{c.norm}",
                     "activation": c.activation, "positions": c.position, "parameters": count_parameters(c)})
    return rows


def notable_models_markdown(names=None) -> str:
    """The rows of notable_models as a markdown table (sizes with thousands separators)."""
    rows = notable_models(names)
    lines = ["| " + " | ".join(NOTABLE_COLUMNS) + " |", "|" + "---|" * len(NOTABLE_COLUMNS)]
    for row in rows:
        cells = [f"{v:,}" if isinstance(v, int) else str(v) for v in (row[k] for k in NOTABLE_COLUMNS)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
