"""The encoder-decoder Transformer of Vaswani et al. (2017).

    memory = Encoder(src, source padding mask)                     (B, S, C)
    logits = Decoder(tgt_in, memory, source padding mask)          (B, T, V)

The decoder's self-attention is causal (teacher forcing: position t sees the
target tokens before it); its cross-attention sees every real source token.
With ``shared_embeddings`` the source embedding, the target embedding and the
output projection are one matrix (section 3.4 of the paper), scaled by √C on
the way in.

Backward: the decoder returns dmemory, the sum of the memory gradients of all
its cross-attention layers, and the encoder takes it from there.
"""
from __future__ import annotations

import numpy as np

from ..backend import default_rng
from ..layers.module import Module
from ..validate import check_integer_ids, check_mask, check_ndim
from .config import Seq2SeqConfig
from .decoder import DecoderStack
from .embeddings import check_nonempty
from .encoder import Encoder
from .gpt import dropout_generator


class Seq2Seq(Module):
    def __init__(self, config: Seq2SeqConfig, *, rng=0, dropout_rng=None, dtype=np.float32):
        super().__init__()
        if not isinstance(config, Seq2SeqConfig):
            raise TypeError(f"config: expected a Seq2SeqConfig, got {type(config).__name__}")
        init_rng = default_rng(rng)
        dropout_rng = dropout_rng if dropout_rng is not None else dropout_generator(rng)
        self.config = config
        src_config = Seq2SeqConfig.from_dict({**config.to_dict(),      # the window is the decoder's
                                              "vocab_size": config.src_vocab_size or config.vocab_size,
                                              "window": None, "dilation": 1, "global_positions": []})
        self.add_child("encoder", Encoder(src_config, rng=init_rng, dropout_rng=dropout_rng, dtype=dtype,
                                          scale_embeddings=config.scale_embeddings))
        self.add_child("decoder", DecoderStack(config, cross=True, tie_weights=config.shared_embeddings,
                                               scale_embeddings=config.scale_embeddings, rng=init_rng,
                                               dropout_rng=dropout_rng, dtype=dtype))
        if config.shared_embeddings:
            self.decoder.embed.tok.tie("W", self.encoder.embed.tok, "W")
            self.decoder.head.tie("W", self.encoder.embed.tok, "W")

    def source_mask(self, src, src_mask=None):
        """(B, S) bool, True = real source token: the given mask, or src != pad_id."""
        if src_mask is None:
            return src != self.config.pad_id
        check_mask("src_mask", src_mask, src.shape)
        return src_mask.astype(bool)

    def encode(self, src, src_mask=None):
        """src (B, S) -> memory (B, S, C)."""
        check_ndim("src", src, 2, "(B, S)")
        check_nonempty("src", src)
        return self.encoder.forward(src, attention_mask=self.source_mask(src, src_mask))

    def forward(self, src, tgt_in, src_mask=None):
        """src (B, S), tgt_in (B, T) (BOS + target, shifted right) -> logits (B, T, V)."""
        check_ndim("src", src, 2, "(B, S)")
        check_ndim("tgt_in", tgt_in, 2, "(B, T)")
        check_nonempty("src", src)
        check_nonempty("tgt_in", tgt_in)
        check_integer_ids("src", src, self.config.src_vocab_size or self.config.vocab_size)
        check_integer_ids("tgt_in", tgt_in, self.config.vocab_size)
        if src.shape[0] != tgt_in.shape[0]:
            raise ValueError(f"tgt_in: expected {src.shape[0]} rows (the batch of src), "
                             f"got shape {tuple(tgt_in.shape)}")
        mask = self.source_mask(src, src_mask)
        memory = self.encode(src, mask)                                   # (B, S, C)
        logits = self.decoder.forward(tgt_in, memory, mask)              # (B, T, V)
        self._save(True, logits)
        return logits

    def backward(self, dlogits):
        """dlogits: the shape and dtype of forward's logits (ValueError/TypeError naming ``dout``)."""
        self._pop_cache(dlogits)
        dmemory = self.decoder.backward(dlogits)                          # (B, S, C)
        self.encoder.backward(dmemory)
        return None
