"""Fuzz the public entrances: Hypothesis draws malformed inputs per family and asserts that
only ValueError or TypeError comes out, with a message that names the argument (or the file).

Each entry of ENTRANCES is one public entrance; the count is reported by
test_entrance_count. Kept fast: small models, few examples per entrance.
"""
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from minitransformer.functional.alibi import alibi_bias, alibi_slopes
from minitransformer.generation.generate import filter_logits, generate, generate_seq2seq, sample_tokens
from minitransformer.layers.embedding import Embedding
from minitransformer.layers.ffn import FeedForward
from minitransformer.layers.linear import Linear
from minitransformer.layers.lm_head import LMHead
from minitransformer.models import GPT, Encoder, Seq2Seq
from minitransformer.models.config import EncoderConfig, GPTConfig, Seq2SeqConfig
from minitransformer.optim import schedules
from minitransformer.optim.clipping import clip_grad_norm
from minitransformer.optim.optimizers import SGD, Adam, AdamW
from minitransformer.pretrained.safetensors import load_safetensors, save_safetensors
from minitransformer.tokenizers import CharTokenizer, tokenizer_from_dict
from minitransformer.tokenizers.bpe import ByteBPETokenizer
from minitransformer.tokenizers.wordpiece import WordPieceTokenizer

TINY = dict(vocab_size=11, block_size=8, n_layer=1, n_head=2, d_model=8)
FAST = settings(max_examples=12, deadline=None, database=None,
                suppress_health_check=list(HealthCheck))

# ------------------------------------------------------------------ malformed values
junk = st.one_of(st.none(), st.booleans(), st.text(max_size=3), st.just([1, 2]), st.just({}),
                 st.sampled_from([float("nan"), float("inf"), -float("inf"), 1e308, -1.0, 0, 0.5, -3,
                                  2 ** 70, 1j, object()]))
bad_dtypes = st.sampled_from([np.int64, np.int8, np.uint8, bool, np.float16, np.float64, np.complex128,
                              object])


@st.composite
def arrays(draw, shapes=None):
    shape = draw(shapes if shapes is not None else
                 st.lists(st.integers(0, 4), min_size=0, max_size=4).map(tuple))
    dtype = draw(bad_dtypes)
    fill = draw(st.sampled_from([0, 1, -1, 7, 100, float("nan"), float("inf")]))
    try:
        return np.full(shape, fill, dtype=dtype)
    except (ValueError, OverflowError, TypeError):
        return np.zeros(shape, dtype=dtype)


anything = st.one_of(junk, arrays())


def refuses(call, names):
    """call() either succeeds or raises ValueError/TypeError whose message names one of ``names``."""
    try:
        call()
    except (ValueError, TypeError) as err:
        message = str(err)
        assert any(n in message for n in names), f"{type(err).__name__} names none of {names}: {message}"


# ------------------------------------------------------------------ fixtures (built once)
_cache = {}


def built(name):
    if name not in _cache:
        _cache[name] = {
            "gpt": lambda: GPT(GPTConfig(**TINY)),
            "encoder": lambda: Encoder(EncoderConfig(**TINY, n_classes=2)),
            "seq2seq": lambda: Seq2Seq(Seq2SeqConfig(**TINY)),
            "linear": lambda: Linear(4, 3, rng=0),
            "lmhead": lambda: LMHead(4, 5, rng=0),
            "ffn": lambda: FeedForward(4, 8, rng=0),
            "embedding": lambda: Embedding(5, 4, rng=0),
            "bpe": lambda: ByteBPETokenizer.train("hello hello world", 260),
            "wordpiece": lambda: WordPieceTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "a", "##b"]),
        }[name]()
    return _cache[name]


def _params():
    return list(Linear(2, 2, rng=0, dtype=np.float64).parameters())


# ------------------------------------------------------------------ the entrances
def e_alibi_slopes(d):
    H = d.draw(st.one_of(junk, st.integers(-5, 10 ** 13)))
    refuses(lambda: alibi_slopes(H), ["H"])


def e_alibi_bias(d):
    slopes, T, S = d.draw(st.one_of(junk, arrays())), d.draw(st.one_of(junk, st.integers(-3, 5))), \
        d.draw(st.one_of(junk, st.integers(-3, 5)))
    refuses(lambda: alibi_bias(slopes, T, S), ["slopes", "T", "S"])


def _module_forward(name, arg):
    def entrance(d):
        x = d.draw(anything)
        module = built(name)
        refuses(lambda: module.forward(x), [arg])
        module.release_caches()
    return entrance


def _module_backward(name, good):
    def entrance(d):
        module = built(name)
        dout = d.draw(anything)
        module.forward(*good())
        refuses(lambda: module.backward(dout), ["dout"])
        module.release_caches()
    return entrance


def _f32(shape):
    return lambda: (np.ones(shape, np.float32),)


def _ids(shape=(2, 3)):
    return lambda: (np.ones(shape, np.int64),)


def _ctor(cls, names, **fixed):
    def entrance(d):
        kwargs = dict(fixed)
        key = d.draw(st.sampled_from(names))
        kwargs[key] = d.draw(junk)
        refuses(lambda: cls(**kwargs), [key])
    return entrance


def e_seq2seq_forward(d):
    model = built("seq2seq")
    src, tgt = d.draw(anything), d.draw(anything)
    refuses(lambda: model.forward(src, tgt), ["src", "tgt_in", "ids"])
    model.release_caches()


def e_seq2seq_backward(d):
    model = built("seq2seq")
    dout = d.draw(anything)
    model.forward(np.ones((2, 3), np.int64), np.ones((2, 3), np.int64))
    refuses(lambda: model.backward(dout), ["dout"])
    model.release_caches()


CONFIG_FIELDS = ["vocab_size", "block_size", "n_layer", "n_head", "d_model", "n_kv_head", "d_ff", "norm",
                 "norm_position", "eps", "activation", "position", "rope_layout", "window", "p_drop", "bias",
                 "init_std"]


def _config(cls, extra):
    def entrance(d):
        field = d.draw(st.sampled_from(CONFIG_FIELDS + extra))
        value = d.draw(st.one_of(st.none(), st.booleans(), st.text(max_size=3),
                                 st.sampled_from([0, -1, 0.5, 2.0, float("inf"), float("nan"), "4", 10 ** 9])))
        kwargs = {**TINY, field: value}
        refuses(lambda: cls(**kwargs), [field, "d_model", "n_kv_head", "n_head", "shared_embeddings",
                                        "src_vocab_size"])
    return entrance


def _strategy_kwargs(d):
    return {d.draw(st.sampled_from(["strategy", "temperature", "top_k", "top_p", "beam_size",
                                    "length_penalty", "rng", "eos_id", "trace", "use_cache"])): d.draw(junk)}


def e_generate(d):
    model = built("gpt")
    prompt = d.draw(st.one_of(anything, st.just(np.array([[1, 99]])), st.just(np.ones((1, 0), np.int64))))
    kwargs = _strategy_kwargs(d) if d.draw(st.booleans()) else {}
    n = d.draw(st.one_of(st.integers(-2, 9), junk))
    names = ["prompt_ids", "max_new_tokens", "temperature", "top_k", "top_p", "strategy", "beam_size",
             "length_penalty", "rng", "eos_id", "trace"]
    refuses(lambda: generate(model, prompt, n, **kwargs), names)


def e_generate_seq2seq(d):
    model = built("seq2seq")
    src = d.draw(st.one_of(anything, st.just(np.ones((1, 2), np.int64))))
    kwargs = _strategy_kwargs(d)
    kwargs.pop("use_cache", None)
    bos, eos, n = d.draw(st.one_of(junk, st.integers(-1, 12))), d.draw(st.one_of(junk, st.integers(-1, 12))), \
        d.draw(st.one_of(junk, st.integers(-1, 10)))
    names = ["src", "max_len", "bos_id", "eos_id", "temperature", "top_k", "top_p", "strategy", "beam_size",
             "length_penalty", "rng", "trace", "ids"]
    refuses(lambda: generate_seq2seq(model, src, n, bos, eos, **kwargs), names)


def e_filter_logits(d):
    logits = d.draw(st.one_of(anything, st.just(np.zeros((2, 5)))))
    kw = {k: d.draw(junk) for k in d.draw(st.sets(st.sampled_from(["temperature", "top_k", "top_p"])))}
    refuses(lambda: filter_logits(logits, **kw), ["logits", "temperature", "top_k", "top_p"])


def e_sample_tokens(d):
    probs = d.draw(anything)
    rng = d.draw(st.one_of(junk, st.just(np.random.default_rng(0))))
    refuses(lambda: sample_tokens(probs, rng), ["probs", "rng"])


def _encode(name):
    def entrance(d):
        text = d.draw(st.one_of(junk, arrays(), st.binary(max_size=4)))
        tok = CharTokenizer.from_text("ab") if name == "char" else built(name)
        call = tok.tokenize if name == "wordpiece" else tok.encode
        refuses(lambda: call(text), ["text"])
    return entrance


def e_bpe_load(d):
    content = d.draw(st.one_of(st.binary(max_size=40), st.just(b"[" * 50000 + b"]" * 50000),
                               st.just(b'{"type": "bpe"}'), st.just(b'{"type": "bpe", "merges": 3, '
                                                                    b'"special_tokens": [], "pattern": null}')))
    path = os.path.join(_tmpdir(), "tok.json")
    with open(path, "wb") as f:
        f.write(content)
    refuses(lambda: ByteBPETokenizer.load(path), ["tok.json"])


def e_tokenizer_from_dict(d):
    value = d.draw(st.one_of(junk, st.dictionaries(st.sampled_from(["type", "chars", "merges"]), junk,
                                                   max_size=3)))
    refuses(lambda: tokenizer_from_dict(value), ["d", "tokenizer", "type", "chars", "merges"])


def _optimizer(cls, names):
    def entrance(d):
        key = d.draw(st.sampled_from(names))
        value = d.draw(junk)
        kwargs = {"lr": 1e-3, key: value}
        if key == "betas":
            kwargs[key] = d.draw(st.one_of(junk, st.tuples(junk, junk)))
        refuses(lambda: cls(_params(), **kwargs), [key])
    return entrance


def e_optimizer_step(d):
    opt = Adam(_params(), lr=1e-3)
    lr = d.draw(junk)
    refuses(lambda: opt.step(lr=lr), ["lr"])


def e_optimizer_load_state(d):
    opt = Adam(_params(), lr=1e-3)
    opt.step()
    state = opt.state_dict()
    key = d.draw(st.sampled_from(sorted(state)))
    state[key] = d.draw(anything)
    refuses(lambda: opt.load_state_dict(state), ["state"])


def e_module_load_state(d):
    lin = Linear(2, 2, rng=0)
    state = lin.state_dict()
    state[d.draw(st.sampled_from(["W", "b"]))] = d.draw(anything)
    refuses(lambda: lin.load_state_dict(state), ["state"])


def _schedule(make, names):
    def entrance(d):
        args = [d.draw(st.one_of(junk, st.integers(-2, 20))) for _ in names]
        refuses(lambda: make(*args)(d.draw(st.one_of(junk, st.integers(-2, 5)))), names + ["step"])
    return entrance


def e_clip(d):
    max_norm = d.draw(junk)
    grads = d.draw(st.one_of(st.just([np.ones(3)]), st.lists(arrays(), max_size=2)))
    refuses(lambda: clip_grad_norm(grads, max_norm), ["max_norm", "grads_or_params"])


def _tmpdir():
    import tempfile
    if "tmp" not in _cache:
        _cache["tmp"] = tempfile.mkdtemp(prefix="entrances_models_")
    return _cache["tmp"]


def e_safetensors(d):
    path = os.path.join(_tmpdir(), "w.safetensors")
    if "good" not in _cache:
        save_safetensors(path, {"a": np.arange(6, dtype=np.float32).reshape(2, 3)})
        with open(path, "rb") as f:
            _cache["good"] = f.read()
    good = _cache["good"]
    how = d.draw(st.sampled_from(["random", "truncate", "flip", "deep"]))
    if how == "random":
        content = d.draw(st.binary(max_size=64))
    elif how == "truncate":
        content = good[:d.draw(st.integers(0, len(good) - 1))]
    elif how == "flip":
        i = d.draw(st.integers(0, min(len(good) - 1, 60)))
        content = good[:i] + bytes([good[i] ^ 0xFF]) + good[i + 1:]
    else:
        header = b'{"a":' + b"[" * 50000 + b"]" * 50000 + b"}"
        content = len(header).to_bytes(8, "little") + header
    with open(path, "wb") as f:
        f.write(content)
    refuses(lambda: load_safetensors(path), ["w.safetensors"])


def e_checkpoint(d):
    from minitransformer.training.checkpoint import load_checkpoint, save_checkpoint
    path = os.path.join(_tmpdir(), "c.npz")
    if "ckpt" not in _cache:
        save_checkpoint(path, built("gpt"))
        with open(path, "rb") as f:
            _cache["ckpt"] = f.read()
    good = _cache["ckpt"]
    if d.draw(st.booleans()):
        content = d.draw(st.binary(max_size=64))
    else:
        content = good[:d.draw(st.integers(0, len(good) - 1))]
    with open(path, "wb") as f:
        f.write(content)
    refuses(lambda: load_checkpoint(path), ["c.npz"])


ENTRANCES = {
    "alibi_slopes": e_alibi_slopes,
    "alibi_bias": e_alibi_bias,
    "Linear()": _ctor(Linear, ["d_in", "d_out", "bias", "init_std"], d_in=2, d_out=3),
    "Linear.forward": _module_forward("linear", "x"),
    "Linear.backward": _module_backward("linear", _f32((2, 4))),
    "LMHead()": _ctor(LMHead, ["d_model", "vocab_size", "bias", "init_std"], d_model=2, vocab_size=3),
    "LMHead.forward": _module_forward("lmhead", "x"),
    "LMHead.backward": _module_backward("lmhead", _f32((2, 4))),
    "FeedForward()": _ctor(FeedForward, ["d_model", "d_ff", "init_std", "out_std"], d_model=2, d_ff=3),
    "FeedForward.forward": _module_forward("ffn", "x"),
    "FeedForward.backward": _module_backward("ffn", _f32((2, 4))),
    "Embedding()": _ctor(Embedding, ["vocab_size", "d_model", "init_std"], vocab_size=3, d_model=2),
    "Embedding.forward": _module_forward("embedding", "ids"),
    "Embedding.backward": _module_backward("embedding", _ids()),
    "GPT.forward": _module_forward("gpt", "ids"),
    "GPT.backward": _module_backward("gpt", _ids()),
    "Encoder.forward": _module_forward("encoder", "ids"),
    "Encoder.backward": _module_backward("encoder", _ids()),
    "Seq2Seq.forward": e_seq2seq_forward,
    "Seq2Seq.backward": e_seq2seq_backward,
    "GPTConfig": _config(GPTConfig, ["tie_weights"]),
    "EncoderConfig": _config(EncoderConfig, ["type_vocab_size", "embedding_norm", "mlm_head", "n_classes",
                                             "pad_id"]),
    "Seq2SeqConfig": _config(Seq2SeqConfig, ["src_vocab_size", "shared_embeddings", "pad_id",
                                             "scale_embeddings"]),
    "generate": e_generate,
    "generate_seq2seq": e_generate_seq2seq,
    "filter_logits": e_filter_logits,
    "sample_tokens": e_sample_tokens,
    "CharTokenizer.encode": _encode("char"),
    "ByteBPETokenizer.encode": _encode("bpe"),
    "WordPieceTokenizer.tokenize": _encode("wordpiece"),
    "ByteBPETokenizer.load": e_bpe_load,
    "tokenizer_from_dict": e_tokenizer_from_dict,
    "SGD()": _optimizer(SGD, ["lr", "momentum", "weight_decay"]),
    "Adam()": _optimizer(Adam, ["lr", "betas", "eps"]),
    "AdamW()": _optimizer(AdamW, ["lr", "betas", "eps", "weight_decay"]),
    "Optimizer.step": e_optimizer_step,
    "Optimizer.load_state_dict": e_optimizer_load_state,
    "Module.load_state_dict": e_module_load_state,
    "constant_schedule": _schedule(schedules.constant_schedule, ["lr"]),
    "warmup_cosine_schedule": _schedule(schedules.warmup_cosine_schedule,
                                        ["max_lr", "warmup_steps", "total_steps", "min_lr"]),
    "noam_schedule": _schedule(schedules.noam_schedule, ["d_model", "warmup_steps", "factor"]),
    "clip_grad_norm": e_clip,
    "load_safetensors": e_safetensors,
    "load_checkpoint": e_checkpoint,
}


@pytest.mark.parametrize("name", sorted(ENTRANCES))
@FAST
@given(data=st.data())
def test_entrance_refuses_with_a_named_error(name, data):
    ENTRANCES[name](data)


def test_entrance_count():
    assert len(ENTRANCES) == 44
