"""One training step of each family, traced: a tiny model on a sentence (or an image), or a checkpoint.

    t = traced_step("gpt")                                # the tiny GPT on DEFAULT_TEXT, float64
    t = traced_step("seq2seq", text="hello world")
    t = traced_step(checkpoint="runs/gpt")                # a trained model (its folder or its .npz)
    t = trace_step(model, "gpt", {"x": ids, "targets": targets}, {"tokens": [...]})   # any model, any batch

A step is forward, the cross-entropy loss, and backward (the gradients of every
parameter); the optimizer's update is not a functional routine and is not shown.
The tiny models run in float64 with init_std 0.25 (0.02 makes every attention map
flat at initialisation, and there would be nothing to see); a checkpoint runs as
it was trained, in training mode (its dropout draws from its own generator).

What each family learns from the text (``Trace.meta`` says it in words too):
    gpt      the next character: x = text[:-1], targets = text[1:]
    encoder  masked characters (BERT): every 7th position from the 4th is [MASK], the
             loss reads those positions only
    seq2seq  the text reversed: source = the text, decoder input = BOS + reversed[:-1]
    vit      the class of a drawn shape (training/shapes.py, public seed 0); no text
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ..functional.cross_entropy import cross_entropy_backward, cross_entropy_forward
from ..models import GPT, Encoder, EncoderConfig, GPTConfig, Seq2Seq, Seq2SeqConfig, ViT, ViTConfig
from ..tokenizers import CharTokenizer
from ..training.data import BOS, make_sequence_task
from ..training.shapes import SHAPES, draw_shapes
from ..validate import check_choice
from .record import trace
from .values import Limits

FAMILIES = ("gpt", "encoder", "seq2seq", "vit")
DEFAULT_TEXT = "Attention is all you need."
MAX_TEXT = 64                     # characters the tiny models take (their block_size)
SPECIALS = 3                      # seq2seq: ids 0, 1, 2 are PAD, BOS, EOS; characters from 3 on
TINY = dict(n_layer=2, n_head=2, d_model=16, init_std=0.25)
MASK_EVERY, MASK_FROM = 7, 3      # encoder: the masked positions


def traced_step(family: str | None = None, text: str | None = None, checkpoint=None,
                limits: Limits = Limits()):
    """The Trace of one training step of a built-in tiny model or a checkpoint (``Trace.error`` says
    what stopped it, if anything); ValueError naming the flag on bad input."""
    model, batch, meta = build(family, text, checkpoint)
    return trace_step(model, meta["family"], batch, meta, limits)


def trace_step(model, family: str, batch: dict, meta: dict | None = None, limits: Limits = Limits()):
    """The Trace of one training step of ``model`` on ``batch`` (the keys run_step reads); ``meta``
    (tokens, vocab, text, task) is what the page shows about the input."""
    check_choice("family", family, FAMILIES)
    with trace(model, limits=limits) as t:
        t.meta.update(_describe(model, dict(meta or {}, family=family)))
        try:
            t.meta["loss"] = run_step(model, family, batch, t)
        except Exception as e:                       # the trace so far is the point: keep it
            t.error = f"{type(e).__name__}: {e}"
    return t


def run_step(model, family: str, batch: dict, t) -> float:
    """Forward, cross-entropy, backward (the lines the page shows as the loss's call site); returns
    the loss. ``t``: the Trace being recorded, which names the loss's steps "loss"."""
    logits = _forward(model, family, batch)                            # (B, T, V), or (B, K) for vit
    with t.named("loss"):
        loss, cache = cross_entropy_forward(logits, batch["targets"])   # L, the mean over the targets
        dlogits = cross_entropy_backward(1.0, cache)                    # dL/dlogits, with dL = 1
    model.backward(dlogits)                                             # every parameter's gradient
    return float(loss)


def _forward(model, family: str, batch: dict):
    if family == "seq2seq":
        return model.forward(batch["src"], batch["tgt_in"])
    if family == "encoder":
        return model.forward(batch["x"], head="mlm")
    return model.forward(batch["images"] if family == "vit" else batch["x"])


# ------------------------------------------------------------------ the model and the batch
def build(family: str | None, text: str | None, checkpoint) -> tuple:
    """(model in training mode, batch, meta); ValueError naming the flag on bad input."""
    if family is not None and family not in FAMILIES:
        raise ValueError(f"--model: expected one of {', '.join(FAMILIES)}, got {family!r}")
    if checkpoint is not None:
        model, tokenizer, family, task = _load(checkpoint, family)
        if family == "seq2seq" and tokenizer is None:
            if text is not None:
                raise ValueError("--text: this seq2seq checkpoint was trained on token ids (its task "
                                 f"{task!r}, no tokenizer); leave --text out")
            return _seq2seq_task(model, task)
    else:
        family, tokenizer = family or "gpt", None
    if family == "vit":
        if text is not None:
            raise ValueError("--text: the vit family reads an image (a drawn shape), not text; leave --text out")
        return _vit(model if checkpoint is not None else None)
    text = DEFAULT_TEXT if text is None else text
    if checkpoint is None:
        _check_text(text)
        tokenizer = CharTokenizer.from_text(text)
        model = None
    maker = {"gpt": _gpt, "encoder": _encoder, "seq2seq": _seq2seq}[family]
    return maker(text, tokenizer, model)


def _check_text(text: str) -> None:
    if not isinstance(text, str) or not 2 <= len(text) <= MAX_TEXT:
        length = len(text) if isinstance(text, str) else type(text).__name__
        raise ValueError(f"--text: expected 2 to {MAX_TEXT} characters, got {length}")


def _load(checkpoint, family):
    from ..training.checkpoint import load_checkpoint
    from ..training.load import FAMILIES as LOADABLE, load_model
    path = Path(checkpoint)
    path = path / "checkpoint.npz" if path.is_dir() else path
    if not path.is_file():
        raise ValueError(f"--checkpoint: expected a run folder holding checkpoint.npz, or the .npz, got {checkpoint}")
    try:
        model, tokenizer = load_model(str(path))
    except (ValueError, TypeError, OSError, KeyError) as e:
        raise ValueError(f"--checkpoint: {e}") from None
    found = next(name for name, (cls, _) in LOADABLE.items() if type(model) is cls)
    if found not in FAMILIES or (family is not None and family != found):
        expected = family or " / ".join(FAMILIES)
        raise ValueError(f"--checkpoint: expected a {expected} checkpoint, got family {found!r}")
    task = load_checkpoint(str(path))[2].get("task", "reverse") if found == "seq2seq" else None
    return model.train(), tokenizer, found, task


def _encode(tokenizer, text: str, limit: int) -> list:
    try:
        ids = tokenizer.encode(text)
    except (ValueError, TypeError) as e:
        raise ValueError(f"--text: {e}") from None
    if not 2 <= len(ids) <= limit:
        raise ValueError(f"--text: expected 2 to {limit} tokens (the model's block_size + 1), got {len(ids)}")
    return ids


def _pieces(tokenizer, ids) -> list:
    return [tokenizer.decode([i]) for i in ids]


def _gpt(text, tokenizer, model):
    if model is None:
        model = GPT(GPTConfig(vocab_size=tokenizer.vocab_size, block_size=MAX_TEXT, **TINY), rng=0,
                    dtype=np.float64)
    ids = np.asarray([_encode(tokenizer, text, model.config.block_size + 1)], dtype=np.int64)   # (1, T + 1)
    tokens = _pieces(tokenizer, ids[0])
    meta = {"family": "gpt", "task": "predict the next character of the text", "text": text,
            "tokens": tokens[:-1], "targets": tokens[1:], "vocab": _pieces(tokenizer, range(tokenizer.vocab_size))}
    return model, {"x": ids[:, :-1], "targets": ids[:, 1:]}, _describe(model, meta)


def _encoder(text, tokenizer, model):
    if model is None:
        model = Encoder(EncoderConfig(vocab_size=tokenizer.vocab_size + 1, block_size=MAX_TEXT, **TINY), rng=0,
                        dtype=np.float64)
    mask_id = model.config.vocab_size - 1                                 # train's [MASK]: the one extra id
    ids = np.asarray([_encode(tokenizer, text, model.config.block_size)], dtype=np.int64)   # (1, T)
    masked = np.arange(ids.shape[1]) % MASK_EVERY == MASK_FROM
    x = np.where(masked, mask_id, ids)                                    # (1, T)
    targets = np.where(masked, ids, -100)                                 # ignore_index elsewhere
    tokens = ["[MASK]" if m else c for m, c in zip(masked, _pieces(tokenizer, ids[0]))]
    meta = {"family": "encoder", "task": f"recover the masked characters (every {MASK_EVERY}th from "
            f"position {MASK_FROM})", "text": text, "tokens": tokens,
            "targets": [c if m else "" for m, c in zip(masked, _pieces(tokenizer, ids[0]))],
            "vocab": _pieces(tokenizer, range(tokenizer.vocab_size)) + ["[MASK]"]}
    return model, {"x": x, "targets": targets}, _describe(model, meta)


def _seq2seq(text, tokenizer, model):
    if model is None:
        V = tokenizer.vocab_size + SPECIALS
        model = Seq2Seq(Seq2SeqConfig(vocab_size=V, block_size=MAX_TEXT + 2, **{**TINY, "n_layer": 1}), rng=0,
                        dtype=np.float64)
    src = np.asarray([_encode(tokenizer, text, model.config.block_size - 1)], dtype=np.int64) + SPECIALS
    target = src[:, ::-1]                                                 # (1, S) the text reversed
    tgt_in = np.concatenate([np.full((1, 1), BOS), target[:, :-1]], axis=1)   # (1, S)
    chars = _pieces(tokenizer, src[0] - SPECIALS)
    meta = {"family": "seq2seq", "task": "write the text reversed (teacher forcing)", "text": text,
            "source_tokens": chars, "tokens": ["<bos>"] + chars[::-1][:-1], "targets": chars[::-1],
            "vocab": ["<pad>", "<bos>", "<eos>"] + _pieces(tokenizer, range(tokenizer.vocab_size))}
    return model, {"src": src, "tgt_in": tgt_in, "targets": target}, _describe(model, meta)


def _seq2seq_task(model, task: str):
    """A seq2seq checkpoint trained on ids (copy / reverse / sort): one example of its task, public seed 0."""
    L = model.config.block_size - 2
    src, _, tgt_in, tgt_out = make_sequence_task(task, 1, (L, L), model.config.vocab_size, np.random.default_rng(0))
    names = ["<pad>", "<bos>", "<eos>"] + [str(i) for i in range(SPECIALS, model.config.vocab_size)]
    meta = {"family": "seq2seq", "task": f"{task} the source ids (teacher forcing)", "text": "",
            "source_tokens": [names[i] for i in src[0]], "tokens": [names[i] for i in tgt_in[0]],
            "targets": [names[i] for i in tgt_out[0]], "vocab": names}
    return model, {"src": src, "tgt_in": tgt_in, "targets": tgt_out}, _describe(model, meta)


def _vit(model):
    if model is None:
        model = ViT(ViTConfig(image_size=16, patch_size=4, n_classes=len(SHAPES), **TINY), rng=0, dtype=np.float64)
    c = model.config
    images, labels = draw_shapes(1, np.random.default_rng(0), size=c.image_size)   # (1, S, S, 1), (1,)
    images = np.repeat(images, c.in_channels, axis=-1).astype(model.patches.W.dtype)
    tokens = ["[CLS]"] + [f"{r},{s}" for r in range(c.grid) for s in range(c.grid)]
    meta = {"family": "vit", "task": f"classify the drawn shape (a {SHAPES[int(labels[0])]})",
            "text": "", "tokens": tokens, "targets": [SHAPES[int(labels[0])]], "vocab": list(SHAPES)}
    return model, {"images": images, "targets": labels}, _describe(model, meta)


def _describe(model, meta: dict) -> dict:
    config = model.config
    meta["config"] = config.to_dict()
    meta["dtype"] = str(next(p for _, p, _ in model.parameters()).dtype)
    meta["parameters"] = model.num_parameters()
    meta["model"] = type(model).__name__
    return meta
