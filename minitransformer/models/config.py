"""Configuration dataclasses, one per model family, validated on construction.

The variants the lectures teach are values here, not subclasses: ``norm``,
``norm_position``, ``activation``, ``position``, ``n_kv_head`` (grouped-query),
``window`` (sliding window), ``tie_weights``, ``ffn`` (dense or a mixture of
experts, with ``n_experts``, ``top_k``, ``capacity_factor``). Every message names the
field, what was expected and what was given.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import ClassVar

from ..functional.moe import EXPERT_ACTIVATIONS
from ..layers.activation import ACTIVATIONS
from ..layers.attention_pattern import make_pattern
from ..layers.attention_positions import make_positions
from ..layers.blocks import BlockSpec
from ..layers.norm import NORMS
from ..validate import check_choice, check_int, check_items, check_number

NORM_POSITIONS = ("pre", "post")
FFN_KINDS = ("dense", "moe")


def check_bool_field(name: str, value) -> None:
    """TypeError naming the field unless ``value`` is a bool (a string "False" is truthy)."""
    if not isinstance(value, bool):
        raise TypeError(f"{name}: expected True or False, got {type(value).__name__} {value!r}")
POSITIONS = ("learned", "sinusoidal", "rope", "alibi", "shaw", "t5", "none")


class DictRoundTrip:
    """to_dict / from_dict for a config dataclass: the JSON a checkpoint stores, and back."""

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict):
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise ValueError(f"config: unknown fields {unknown} for {cls.__name__}")
        return cls(**d)


@dataclass
class TransformerConfig(DictRoundTrip):
    """The architecture fields every family shares."""
    vocab_size: int = 103              # V: number of token ids
    block_size: int = 64               # longest sequence the model accepts (positions 0..block_size-1)
    n_layer: int = 4                   # number of blocks (per stack)
    n_head: int = 4                    # H: attention heads
    d_model: int = 128                 # C, the width of the residual stream
    n_kv_head: int | None = None       # G: key/value heads; None = n_head (MHA), 1 = multi-query
    d_ff: int | None = None            # F: FFN hidden width; None = 4·d_model
    norm: str = "layernorm"            # "layernorm" or "rmsnorm"
    norm_position: str = "pre"         # "pre" (GPT-2) or "post" (original paper, BERT)
    eps: float = 1e-5                  # the norm's eps, inside the square root
    activation: str = "gelu_tanh"      # a name of ACTIVATIONS (layers/activation.py); "gelu" is exact (erf)
    position: str = "learned"          # learned | sinusoidal | rope | alibi | shaw | t5 | none
    rope_layout: str = "interleaved"   # RoPE pairs: "interleaved" (RoFormer) or "half" (NeoX)
    window: int | None = None          # sliding window (None = full): decoders look back over the window
                                       # most recent keys; EncoderConfig both ways, |i - j| < window
    p_drop: float = 0.0                # probability of dropping, residual and embedding dropout
    bias: bool = True                  # biases in the linear layers
    init_std: float = 0.02             # N(0, init_std²) initialisation of the weights
    # Relative positions (position="shaw" or "t5"), learned in every self-attention layer:
    relative_clip: int = 16            # Shaw: k, distances clipped to [-k, k], tables of 2k+1 rows
    relative_buckets: int = 32         # T5: buckets of the (buckets, n_head) bias table
    relative_max_distance: int = 128   # T5: distances from here on share the last bucket

    # ---- attention extensions: sparse patterns, attention dropout, RoPE interpolation
    dilation: int = 1                  # > 1: dilated sliding window, every dilation-th key (needs window)
    global_positions: list = ()        # positions that see and are seen by all (global + sliding window)
    attn_p_drop: float = 0.0           # attention dropout: probability of dropping an entry of P
    rope_scale: float = 1.0            # RoPE position interpolation: position m is rotated as m / rope_scale
    share_relative_bias: bool = False  # T5: one rel_bias table per stack, shared by its layers (needs "t5")

    # ---- the feed-forward sublayer: dense, or a sparse mixture of experts (layers/moe.py)
    ffn: str = "dense"                 # "dense" (one FFN per block) or "moe" (n_experts FFNs, top_k per token)
    n_experts: int = 4                 # E: experts per MoE layer
    top_k: int = 1                     # k: experts per token (Switch Transformer: 1; Mixtral: 2)
    capacity_factor: float | None = 1.25   # expert slots ⌈factor · N·k / E⌉ in training; None = no limit
    moe_aux_weight: float = 0.01       # α: weight of the load-balancing loss in the training loss

    # T5's bucket rule for this family's self-attention: both ways (True) or causal (False)
    bidirectional_attention: ClassVar[bool] = True

    def __post_init__(self):
        for name in ("vocab_size", "block_size", "n_layer", "n_head", "d_model"):
            check_int(name, getattr(self, name), low=1)
        for name in ("n_kv_head", "d_ff", "window"):
            if getattr(self, name) is not None:
                check_int(name, getattr(self, name), low=1)
        check_choice("norm", self.norm, NORMS)
        check_choice("norm_position", self.norm_position, NORM_POSITIONS)
        check_choice("activation", self.activation, ACTIVATIONS)
        check_choice("position", self.position, POSITIONS)
        if self.d_model % self.n_head:
            raise ValueError(f"d_model: expected a multiple of n_head={self.n_head}, got {self.d_model}")
        if self.n_kv_head is not None and self.n_head % self.n_kv_head:
            raise ValueError(f"n_kv_head: expected a divisor of n_head={self.n_head}, got {self.n_kv_head}")
        if self.position == "rope" and self.head_dim % 2:
            raise ValueError(f"d_model: RoPE needs an even head dim, got d_model/n_head = {self.head_dim}")
        check_number("p_drop", self.p_drop)          # TypeError for a non-number, ValueError for NaN
        if not 0.0 <= self.p_drop < 1.0:
            raise ValueError(f"p_drop: expected a probability in [0, 1), got {self.p_drop!r}")
        check_number("eps", self.eps, low=0.0, low_open=True, finite=True)
        check_number("init_std", self.init_std, low=0.0, finite=True)
        check_bool_field("bias", self.bias)
        self._check_attention_extensions()
        make_positions(self, causal=not self.bidirectional_attention)   # the position fields, checked there
        make_pattern(self, causal=True)     # window, dilation, global_positions (an encoder's: EncoderConfig)
        self._check_ffn()

    def _check_ffn(self) -> None:
        """The mixture-of-experts fields (read only with ffn="moe", checked always)."""
        check_choice("ffn", self.ffn, FFN_KINDS)
        check_int("n_experts", self.n_experts, low=1)
        check_int("top_k", self.top_k, low=1, high=self.n_experts)
        if self.capacity_factor is not None:
            check_number("capacity_factor", self.capacity_factor, low=0.0, low_open=True, finite=True)
        check_number("moe_aux_weight", self.moe_aux_weight, low=0.0, finite=True)
        if self.ffn == "moe" and self.activation not in EXPERT_ACTIVATIONS:
            raise ValueError(f"activation: the experts take one of {tuple(EXPERT_ACTIVATIONS)}, "
                             f"got {self.activation!r} with ffn='moe'")

    def _check_attention_extensions(self) -> None:
        """Attention dropout, the global positions' range, T5's shared table."""
        check_int("dilation", self.dilation, low=1)
        check_number("attn_p_drop", self.attn_p_drop, low=0.0, high=1.0, high_open=True)
        # a list, as JSON gives it back: a checkpoint's config round-trips unchanged
        self.global_positions = [check_int(f"global_positions[{n}]", g, low=0, high=self.block_size - 1)
                                 for n, g in enumerate(check_items("global_positions", self.global_positions))]
        check_bool_field("share_relative_bias", self.share_relative_bias)
        if self.share_relative_bias and self.position != "t5":
            raise ValueError("share_relative_bias: shares T5's relative bias table; expected position='t5', "
                             f"got position={self.position!r}")

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_head

    def block_spec(self, *, causal: bool) -> BlockSpec:
        """The blocks' spec, with self-attention's position hook and pattern built once for a stack:
        ``causal`` for a decoder (GPT, the Seq2Seq decoder), both ways for an encoder."""
        out_std = self.init_std / (2 * self.n_layer) ** 0.5   # GPT-2: scale residual projections
        return BlockSpec(d_model=self.d_model, n_head=self.n_head, d_ff=self.d_ff or 4 * self.d_model,
                         n_kv_head=self.n_kv_head, norm=self.norm, norm_position=self.norm_position,
                         eps=self.eps, activation=self.activation, p_drop=self.p_drop,
                         bias=self.bias, init_std=self.init_std, out_std=out_std, attn_p_drop=self.attn_p_drop,
                         positions=make_positions(self, causal), pattern=make_pattern(self, causal),
                         ffn=self.ffn, n_experts=self.n_experts, top_k=self.top_k,
                         capacity_factor=self.capacity_factor, moe_aux_weight=self.moe_aux_weight)


@dataclass
class GPTConfig(TransformerConfig):
    """Decoder-only language model (GPT-2 style by default)."""
    tie_weights: bool = True           # LM head shares the token embedding matrix
    bidirectional_attention: ClassVar[bool] = False   # causal self-attention only

    def __post_init__(self):
        super().__post_init__()
        check_bool_field("tie_weights", self.tie_weights)


@dataclass
class EncoderConfig(TransformerConfig):
    """BERT-like encoder. BERT itself: post-norm, exact GELU, learned positions, eps 1e-12."""
    norm_position: str = "post"
    activation: str = "gelu"
    eps: float = 1e-12
    type_vocab_size: int = 0           # token-type (segment) embeddings; 0 = none, BERT uses 2
    embedding_norm: bool = True        # LayerNorm after summing the embeddings (BERT)
    mlm_head: bool = True              # masked-language-model head (tied to the word embeddings)
    n_classes: int = 0                 # sequence-classification head on the first token; 0 = none
    pad_id: int = 0                    # the padding token id, for the attention mask
    pooler: bool = False               # BERT's pooler tanh(h[:, 0] W + b); the "cls" head then reads it
    embed_dim: int | None = None       # E: ALBERT's factorised embeddings at width E, then a Linear E -> C
    share_layers: bool = False         # ALBERT: every block shares the first block's parameters
    rtd_head: bool = False             # ELECTRA's discriminator: a "replaced?" logit per token (head="rtd")

    def __post_init__(self):
        super().__post_init__()
        make_pattern(self, causal=False)              # a window both ways: no sparse pattern
        for name in ("type_vocab_size", "n_classes"):
            check_int(name, getattr(self, name), low=0)
        check_int("pad_id", self.pad_id, low=0, high=self.vocab_size - 1)      # an id of the vocabulary
        for name in ("embedding_norm", "mlm_head", "pooler", "share_layers", "rtd_head"):
            check_bool_field(name, getattr(self, name))
        if self.embed_dim is not None:
            check_int("embed_dim", self.embed_dim, low=1)


@dataclass
class Seq2SeqConfig(TransformerConfig):
    """Encoder-decoder, the original Transformer (Vaswani et al. 2017) by default."""
    norm_position: str = "post"
    activation: str = "relu"
    position: str = "sinusoidal"
    n_layer: int = 2                   # blocks in the encoder and in the decoder
    src_vocab_size: int | None = None  # None = vocab_size (one shared vocabulary)
    shared_embeddings: bool = True     # encoder, decoder and head share one matrix (needs one vocab)
    pad_id: int = 0                    # padding id of both vocabularies
    scale_embeddings: bool = True      # multiply embeddings by √d_model (section 3.4 of the paper)

    def __post_init__(self):
        super().__post_init__()
        if self.src_vocab_size is not None:
            check_int("src_vocab_size", self.src_vocab_size, low=1)
        check_int("pad_id", self.pad_id, low=0, high=min(self.vocab_size, self.src_vocab_size or self.vocab_size) - 1)
        for name in ("shared_embeddings", "scale_embeddings"):
            check_bool_field(name, getattr(self, name))
        if self.shared_embeddings and self.src_vocab_size not in (None, self.vocab_size):
            raise ValueError(f"shared_embeddings: needs src_vocab_size == vocab_size={self.vocab_size}, "
                             f"got src_vocab_size={self.src_vocab_size}")

