"""Configurations of the two encoder classifiers that read no text: ViT and the tabular model.

Both are the same trunk (a [CLS] token, bidirectional encoder blocks, a final
norm under pre-norm, a linear head on the [CLS] position) behind a different
tokenizer, so they share ``ClassifierConfig``; each adds the fields of its
input. The architecture fields mean what they mean in ``TransformerConfig``
and are validated by it: ``body()`` builds the equivalent TransformerConfig
(no vocabulary, no positions inside attention), so every message names the
field exactly as the text models' configs do.
"""
from __future__ import annotations

from dataclasses import dataclass, fields

from ..layers.blocks import BlockSpec
from ..validate import check_int
from .config import DictRoundTrip, TransformerConfig


@dataclass
class ClassifierConfig(DictRoundTrip):
    """The encoder trunk and the head; ViT's choices by default (pre-norm, exact GELU)."""
    n_classes: int = 2                 # K: classes of the head on the [CLS] token
    n_layer: int = 2                   # encoder blocks
    n_head: int = 4                    # H: attention heads
    d_model: int = 64                  # C, the width of the residual stream
    d_ff: int | None = None            # F: FFN hidden width; None = 4·d_model
    norm: str = "layernorm"            # "layernorm" or "rmsnorm"
    norm_position: str = "pre"         # "pre" (ViT, FT-Transformer) or "post"
    eps: float = 1e-5                  # the norm's eps, inside the square root
    activation: str = "gelu"           # a name of ACTIVATIONS (layers/activation.py) (FT-Transformer: reglu)
    p_drop: float = 0.0                # probability of dropping (embeddings and residuals)
    bias: bool = True                  # biases in the linear layers
    init_std: float = 0.02             # N(0, init_std²) initialisation of the weights

    def __post_init__(self):
        check_int("n_classes", self.n_classes, low=2)
        self.body()                                   # validates the shared fields

    @property
    def n_tokens(self) -> int:
        """Tokens per example, [CLS] included (1 + the tokenizer's)."""
        raise NotImplementedError(f"{type(self).__name__}.n_tokens")

    def body(self) -> TransformerConfig:
        """The equivalent TransformerConfig of the encoder blocks (it checks every field)."""
        shared = {f.name: getattr(self, f.name) for f in fields(ClassifierConfig) if f.name != "n_classes"}
        return TransformerConfig(vocab_size=1, block_size=self.n_tokens, position="none", **shared)

    def block_spec(self) -> BlockSpec:
        return self.body().block_spec(causal=False)      # encoder blocks: attention both ways



@dataclass
class ViTConfig(ClassifierConfig):
    """Vision Transformer on square images, channels last (B, H, W, C_in)."""
    n_classes: int = 6
    image_size: int = 16               # H = W, pixels per side
    patch_size: int = 4                # p: patches of p × p pixels; image_size must be a multiple
    in_channels: int = 1               # C_in: 1 grey, 3 RGB
    n_registers: int = 0               # R: learned register tokens after the patches (Darcet et al. 2023); 0 = none

    def __post_init__(self):
        for name in ("image_size", "patch_size", "in_channels"):
            check_int(name, getattr(self, name), low=1)
        check_int("n_registers", self.n_registers, low=0)
        if self.image_size % self.patch_size:
            raise ValueError(f"image_size: expected a multiple of patch_size={self.patch_size}, "
                             f"got {self.image_size}")
        super().__post_init__()

    @property
    def grid(self) -> int:
        """Patches per side, image_size / patch_size."""
        return self.image_size // self.patch_size

    @property
    def n_patches(self) -> int:
        """N = (H/p)(W/p)."""
        return self.grid ** 2

    @property
    def n_tokens(self) -> int:
        """[CLS], the N patches and the R registers."""
        return 1 + self.n_patches + self.n_registers


@dataclass
class TabularConfig(ClassifierConfig):
    """FT-Transformer-style model on rows of n_numeric numbers and len(cardinalities) categories."""
    n_numeric: int = 3                 # numeric columns
    cardinalities: tuple = (4, 3)      # V_k: the number of values of each categorical column

    def __post_init__(self):
        check_int("n_numeric", self.n_numeric, low=0)
        if not isinstance(self.cardinalities, (tuple, list)):
            raise TypeError(f"cardinalities: expected a tuple of positive integers, "
                            f"got {type(self.cardinalities).__name__} {self.cardinalities!r}")
        self.cardinalities = tuple(self.cardinalities)          # a JSON list comes back a tuple
        for k, V in enumerate(self.cardinalities):
            check_int(f"cardinalities[{k}]", V, low=1)
        if self.n_numeric + len(self.cardinalities) == 0:
            raise ValueError("n_numeric, cardinalities: expected at least one feature, got none")
        super().__post_init__()

    @property
    def n_tokens(self) -> int:
        return 1 + self.n_numeric + len(self.cardinalities)
