"""Whole models: GPT (decoder-only), Encoder (BERT-like), Seq2Seq (encoder-decoder)."""
from .config import EncoderConfig, GPTConfig, Seq2SeqConfig, TransformerConfig
from .encoder import Encoder
from .gpt import GPT
from .seq2seq import Seq2Seq

__all__ = ["GPT", "GPTConfig", "Encoder", "EncoderConfig", "Seq2Seq", "Seq2SeqConfig",
           "TransformerConfig"]
