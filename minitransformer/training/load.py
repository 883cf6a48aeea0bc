"""Rebuild a trained model, and its tokenizer, from a checkpoint written by ``train``.

    model, tokenizer = minitransformer.load("runs/gpt/checkpoint.npz")

The checkpoint's JSON metadata names the model family ("gpt", "encoder",
"seq2seq") and holds its config and tokenizer; the parameters are loaded into a
model built from that config. The model comes back in eval mode (no dropout).
"""
from __future__ import annotations

from ..models import GPT, Encoder, EncoderConfig, GPTConfig, Seq2Seq, Seq2SeqConfig
from ..models import TabularConfig, TabularTransformer, ViT, ViTConfig
from ..tokenizers import tokenizer_from_dict
from .checkpoint import load_checkpoint

FAMILIES = {"gpt": (GPT, GPTConfig), "encoder": (Encoder, EncoderConfig), "seq2seq": (Seq2Seq, Seq2SeqConfig),
            "vit": (ViT, ViTConfig), "tabular": (TabularTransformer, TabularConfig)}
NO_TOKENIZER = ("seq2seq", "vit", "tabular")   # trained on generated token ids, images, table rows: no text


def load_model(path):
    """(model in eval mode, tokenizer or None) from the checkpoint at ``path``.

    The tokenizer is the run's (CharTokenizer or ByteBPETokenizer) for the text families,
    gpt and encoder; it is None for the families in NO_TOKENIZER, which train on no text:
    seq2seq (generated token ids: the copy/reverse/sort tasks), vit (images) and tabular
    (table rows). ValueError names what the file lacks.
    """
    params, _, meta = load_checkpoint(path)
    family = meta.get("family")
    if family not in FAMILIES:
        raise ValueError(f"path: expected a checkpoint of family {' / '.join(FAMILIES)}, "
                         f"got family {family!r} in {path}")
    if not isinstance(meta.get("config"), dict):
        raise ValueError(f"path: {path} has no 'config' entry; cannot rebuild the model")
    model_class, config_class = FAMILIES[family]
    config = config_class.from_dict(meta["config"])
    model = model_class(config, rng=0)
    model.load_state_dict(params)
    tokenizer = tokenizer_from_dict(meta["tokenizer"]) if isinstance(meta.get("tokenizer"), dict) else None
    if tokenizer is not None:
        _check_tokenizer_fits(path, family, tokenizer, config.vocab_size)
    return model.eval(), tokenizer


def _check_tokenizer_fits(path, family: str, tokenizer, vocab_size: int) -> None:
    """The tokenizer's vocabulary is the model's, as ``train`` writes them (the encoder's one more
    id is [MASK]): a smaller tokenizer cannot decode the ids the model predicts, a larger one
    encodes ids the model has no embedding for."""
    expected = vocab_size - 1 if family == "encoder" else vocab_size
    if tokenizer.vocab_size != expected:
        raise ValueError(f"path: {path}: the tokenizer has {tokenizer.vocab_size} tokens, but the {family} "
                         f"model's vocabulary (vocab_size {vocab_size}) needs {expected}: the file is not "
                         f"a checkpoint as train writes it")
