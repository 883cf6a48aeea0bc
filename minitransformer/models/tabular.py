"""A tabular Transformer in the style of FT-Transformer (Gorishniy et al. 2021, "Revisiting
Deep Learning Models for Tabular Data").

    T      = FeatureTokenizer(x_num, x_cat)        (B, n_num + n_cat, C)   one token per feature
    x_0    = [cls ; T]                             (B, 1 + n_num + n_cat, C)
    logits = EncoderClassifier(Dropout(x_0))       (B, K)                  blocks, Norm_f, head on [CLS]

No positions: each feature is told apart by its own weights in the tokenizer,
and the order of a table's columns carries no meaning. Deviations from the paper,
named: its head is Norm -> ReLU -> Linear (ours: Norm -> Linear, as ViT), its
FFN uses ReGLU (ours: any activation of the config, GELU by default), and its
first block skips the attention's pre-norm.
"""
from __future__ import annotations

import numpy as np

from ..backend import default_rng
from ..layers.cls_token import ClsToken
from ..layers.dropout import Dropout
from ..layers.feature_tokenizer import FeatureTokenizer
from ..layers.module import Module
from ..validate import check_ndim
from .classifier import EncoderClassifier
from .classifier_config import TabularConfig
from .gpt import dropout_generator


class TabularTransformer(Module):
    def __init__(self, config: TabularConfig, *, rng=0, dropout_rng=None, dtype=np.float32):
        super().__init__()
        if not isinstance(config, TabularConfig):
            raise TypeError(f"config: expected a TabularConfig, got {type(config).__name__}")
        init_rng = default_rng(rng)
        dropout_rng = dropout_rng if dropout_rng is not None else dropout_generator(rng)
        self.config = config
        C = config.d_model
        self.add_child("tokenizer", FeatureTokenizer(config.n_numeric, config.cardinalities, C, rng=init_rng,
                                                     init_std=config.init_std, dtype=dtype))
        self.add_child("cls", ClsToken(C, rng=init_rng, init_std=config.init_std, dtype=dtype))
        self.add_child("dropout", Dropout(config.p_drop, rng=dropout_rng))
        self.add_child("encoder", EncoderClassifier(config, rng=init_rng, dropout_rng=dropout_rng, dtype=dtype))

    def forward(self, x_num, x_cat):
        """x_num (B, n_numeric) floating; x_cat (B, len(cardinalities)) integers -> logits (B, n_classes)."""
        check_ndim("x_num", x_num, 2, "(B, n_numeric)")
        if x_num.shape[0] == 0:
            raise ValueError(f"x_num: expected at least one row, got shape {tuple(x_num.shape)}")
        T = self.tokenizer.forward(x_num, x_cat)                          # (B, n_num + n_cat, C)
        x = self.dropout.forward(self.cls.forward(T))                     # (B, 1 + n_num + n_cat, C)
        logits = self.encoder.forward(x)                                  # (B, K)
        self._save(True, logits)
        return logits

    def backward(self, dlogits):
        """dlogits (B, n_classes) -> (dx_num (B, n_numeric), None for x_cat)."""
        self._pop_cache(dlogits)
        dx = self.dropout.backward(self.encoder.backward(dlogits))        # (B, 1 + n_num + n_cat, C)
        return self.tokenizer.backward(self.cls.backward(dx))             # (dx_num, None)
