"""Modules: own parameters and gradients, call ``functional/`` for the math."""
from .activation import GEGLU, GELU, ReLU, SiLU, SwiGLU, make_activation
from .attention import MultiHeadAttention
from .attention_pattern import BidirectionalWindow, Causal, DilatedWindow, Full, GlobalWindow, SlidingWindow
from .attention_positions import ALiBi, NoPositions, RoPE, Shaw, T5Bias
from .kv_cache import KVCache
from .blocks import BlockSpec, DecoderBlock, EncoderBlock, set_recompute
from .dropout import Dropout
from .embedding import Embedding
from .ffn import FeedForward
from .linear import Linear
from .lm_head import LMHead
from .module import Module, ModuleList
from .norm import LayerNorm, RMSNorm, make_norm
from .positions import LearnedPositionEmbedding
from .residual import Residual
