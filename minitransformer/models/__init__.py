"""Whole models: GPT (decoder-only), Encoder (BERT-like), Seq2Seq (encoder-decoder),
ViT (images) and TabularTransformer (table rows)."""
from .classifier_config import TabularConfig, ViTConfig
from .config import EncoderConfig, GPTConfig, Seq2SeqConfig, TransformerConfig
from .encoder import Encoder
from .gpt import GPT
from .seq2seq import Seq2Seq
from .tabular import TabularTransformer
from .vit import ViT

__all__ = ["GPT", "GPTConfig", "Encoder", "EncoderConfig", "Seq2Seq", "Seq2SeqConfig",
           "TransformerConfig", "ViT", "ViTConfig", "TabularTransformer", "TabularConfig"]
