"""Fuzz the public entrances: every functional pair (and its fast twin), every Module, the
masks and positions, the tokenizers' other methods, the data routines, checkpoints and the CLI.

Each entrance names its arguments and a good value for each; Hypothesis replaces one or two of
them by a malformed value (None, a list, a 0-d / bool / int / complex / object / float16 array,
an array of the wrong ndim, NaN, inf, 0, -1, 10**12, a string, rng=0 ...) and asserts that only
ValueError or TypeError comes out, with a message that names a replaced argument. The CLI is run
in-process (``cli.main``): exit code 2, one line on stderr naming the flag, no traceback.
"""
import contextlib
import io
import os
import tempfile

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from minitransformer.fast.kernels import twin_of
from minitransformer.functional import activations as A
from minitransformer.functional import alibi, attention, cross_entropy, dropout, embedding, erf, gated
from minitransformer.functional import heads, linear, masks, norm, rope, sinusoidal, softmax

FAST = settings(max_examples=15, deadline=None, database=None, suppress_health_check=list(HealthCheck))
rng0 = np.random.default_rng(0)


def f32(*shape, scale=1.0, seed=0):
    return (scale * np.random.default_rng(seed).standard_normal(shape)).astype(np.float32)


def ids(*shape, high=5):
    return np.random.default_rng(1).integers(0, high, shape)


# ------------------------------------------------------------------ malformed values
def _bad_arrays():
    return [np.array(1.0, np.float32), np.zeros((2, 3), bool), np.ones((2, 3), np.int64),
            np.ones((2, 3), np.complex64), np.array([[object()]] * 2, dtype=object), np.ones((2, 3), np.float16),
            np.ones((0, 3), np.float32), np.ones((2, 0), np.float32), np.ones((7,), np.float32),
            np.ones((1, 1, 1, 1, 1), np.float32), np.full((2, 3), np.nan, np.float32),
            np.full((2, 3), np.inf, np.float32), np.ones((2, 3), np.float64), np.array(["a", "b"])]


junk = st.one_of(
    st.sampled_from([None, True, False, 0, -1, 1, 2 ** 40, 10 ** 12, -(10 ** 12), 0.5, -0.5, 1e308,
                     float("nan"), float("inf"), -float("inf"), 1j, "", "3", "abc", b"ab", [1, 2], [[1.0]],
                     (), {}, {"a": 1}, object(), np.random.default_rng(0), np.int64(3), np.float32(2.0)]),
    st.sampled_from(_bad_arrays()),
    st.text(max_size=3))


def refuses(call, names, also=()):
    """call() either succeeds or raises ValueError/TypeError (or one of ``also``) whose message names
    one of ``names``."""
    try:
        call()
    except (ValueError, TypeError, *also) as err:
        message = str(err)
        assert any(n in message for n in names), f"{type(err).__name__} names none of {names}: {message}"


def entrance(fn, good, names=None, extra=()):
    """An entrance: fn(**kwargs); good() gives a dict of good arguments; one or two are replaced."""
    def run(d):
        kwargs = good()
        keys = d.draw(st.lists(st.sampled_from(sorted(kwargs)), min_size=1, max_size=2, unique=True))
        for key in keys:
            kwargs[key] = d.draw(junk)
        allowed = [(names or {}).get(k, k) for k in keys] + list(extra)
        refuses(lambda: fn(**kwargs), allowed)
    return run


def backward_entrance(forward, backward, good, dout_name):
    """forward(**good()) then backward(junk, cache): the upstream gradient is named."""
    def run(d):
        _, cache = forward(**good())
        dout = d.draw(junk)
        refuses(lambda: backward(dout, cache), [dout_name])
    return run


# ------------------------------------------------------------------ functional pairs
def _pair(name, forward, backward, good, dout_name="dy", names=None, extra=()):
    yield f"{name}_forward", entrance(forward, good, names, extra)
    yield f"{name}_backward", backward_entrance(forward, backward, good, dout_name)
    twin_f, twin_b = twin_of(forward), twin_of(backward)
    if twin_f is not forward:
        yield f"{name}_forward (fast)", entrance(twin_f, good, names, extra)
    if twin_b is not backward:
        yield f"{name}_backward (fast)", backward_entrance(twin_f, twin_b, good, dout_name)


def _functional():
    x = lambda: {"x": f32(2, 3, 4)}                                       # noqa: E731
    yield from _pair("softmax", softmax.softmax_forward, softmax.softmax_backward,
                     lambda: {"x": f32(2, 5), "axis": -1})
    yield from _pair("log_softmax", softmax.log_softmax_forward, softmax.log_softmax_backward,
                     lambda: {"x": f32(2, 5), "axis": -1}, "dz")
    yield from _pair("layernorm", norm.layernorm_forward, norm.layernorm_backward,
                     lambda: {"x": f32(2, 4), "gamma": f32(4), "beta": f32(4), "eps": 1e-5})
    yield from _pair("rmsnorm", norm.rmsnorm_forward, norm.rmsnorm_backward,
                     lambda: {"x": f32(2, 4), "gamma": f32(4), "eps": 1e-6})
    yield from _pair("linear", linear.linear_forward, linear.linear_backward,
                     lambda: {"x": f32(2, 4), "W": f32(4, 3), "b": f32(3)})
    yield from _pair("embedding", embedding.embedding_forward, embedding.embedding_backward,
                     lambda: {"ids": ids(2, 3), "W": f32(5, 4)}, "dout")
    yield from _pair("relu", A.relu_forward, A.relu_backward, x)
    yield from _pair("gelu", A.gelu_forward, A.gelu_backward, lambda: {"x": f32(2, 4), "approximate": "tanh"})
    yield from _pair("silu", A.silu_forward, A.silu_backward, x)
    yield from _pair("geglu", gated.geglu_forward, gated.geglu_backward, lambda: {"h": f32(2, 4)})
    yield from _pair("swiglu", gated.swiglu_forward, gated.swiglu_backward, lambda: {"h": f32(2, 4)})
    yield from _pair("dropout", dropout.dropout_forward, dropout.dropout_backward,
                     lambda: {"x": f32(2, 4), "p_drop": 0.5, "rng": np.random.default_rng(0), "training": True})
    yield from _pair("cross_entropy", cross_entropy.cross_entropy_forward, cross_entropy.cross_entropy_backward,
                     lambda: {"logits": f32(2, 3, 5), "targets": ids(2, 3), "ignore_index": -100,
                              "smoothing": 0.1}, "dloss")
    yield from _pair("attention", attention.attention_forward, attention.attention_backward,
                     lambda: {"q": f32(1, 2, 3, 4), "k": f32(1, 2, 3, 4), "v": f32(1, 2, 3, 4),
                              "mask": masks.causal_mask(3), "bias": f32(2, 3, 3)}, "dout")
    yield from _pair("rope", rope.rope_forward, rope.rope_backward,
                     lambda: {"x": f32(1, 2, 3, 4), "offset": 0, "base": 10000.0, "layout": "half"})
    yield "erf", entrance(erf.erf, lambda: {"x": f32(3)})
    yield "erfc", entrance(erf.erfc, lambda: {"x": f32(3)})
    yield "split_heads", entrance(heads.split_heads, lambda: {"h": f32(2, 3, 8), "D": 4})
    yield "merge_heads", entrance(lambda parts: heads.merge_heads(*parts) if isinstance(parts, tuple)
                                  else heads.merge_heads(parts), lambda: {"parts": (f32(2, 2, 3, 4),)},
                                  extra=["parts", "x", "heads", "h"])
    yield "alibi_bias(dtype)", entrance(alibi.alibi_bias, lambda: {"slopes": alibi.alibi_slopes(2), "T": 3, "S": 3,
                                                            "dtype": np.float32}, extra=["T", "S"])
    yield "sinusoidal_table", entrance(sinusoidal.sinusoidal_table, lambda: {"max_len": 4, "d": 6,
                                                                              "dtype": np.float32})
    yield "query_key_positions", entrance(masks.query_key_positions, lambda: {"T": 3, "S": 4})
    yield "causal_mask", entrance(masks.causal_mask, lambda: {"T": 3, "S": 4})
    yield "sliding_window_mask", entrance(masks.sliding_window_mask, lambda: {"T": 3, "window": 2, "S": 4})
    yield "key_padding_mask(lengths)", entrance(masks.key_padding_mask,
                                                lambda: {"lengths": np.array([1, 3]), "S": 3})
    yield "key_padding_mask(padding)", entrance(masks.key_padding_mask,
                                                lambda: {"padding": np.zeros((2, 3), bool)})
    yield "combine_masks", entrance(lambda a, b: masks.combine_masks(a, b),
                                    lambda: {"a": masks.causal_mask(3), "b": np.ones((1, 3), bool)},
                                    extra=["mask", "masks"])
    yield "additive_mask", entrance(masks.additive_mask, lambda: {"mask": masks.causal_mask(3),
                                                                  "dtype": np.float32})


# ------------------------------------------------------------------ Modules
def _module_entrances():
    from minitransformer.layers import activation, attention as mha, blocks, dropout as dmod, kv_cache
    from minitransformer.layers import norm as nmod, positions, residual
    from minitransformer.layers import RoPE, SlidingWindow
    mods = {
        "LayerNorm": (nmod.LayerNorm, {"d_model": 4, "eps": 1e-5}, lambda: (f32(2, 3, 4),), "x"),
        "RMSNorm": (nmod.RMSNorm, {"d_model": 4, "eps": 1e-6}, lambda: (f32(2, 3, 4),), "x"),
        "ReLU": (activation.ReLU, {}, lambda: (f32(2, 4),), "x"),
        "GELU": (activation.GELU, {"approximate": "none"}, lambda: (f32(2, 4),), "x"),
        "SiLU": (activation.SiLU, {}, lambda: (f32(2, 4),), "x"),
        "GEGLU": (activation.GEGLU, {}, lambda: (f32(2, 4),), "h"),
        "SwiGLU": (activation.SwiGLU, {}, lambda: (f32(2, 4),), "h"),
        "Dropout": (dmod.Dropout, {"p_drop": 0.5, "rng": 0}, lambda: (f32(2, 4),), "x"),
        "MultiHeadAttention": (mha.MultiHeadAttention, {"d_model": 8, "n_head": 2, "n_kv_head": 1,
                                                        "pattern": SlidingWindow(2), "rng": 0},
                               lambda: (f32(2, 3, 8),), "x"),
        "LearnedPositionEmbedding": (positions.LearnedPositionEmbedding, {"max_len": 8, "d_model": 4, "rng": 0},
                                     lambda: (3,), "T"),
    }
    for name, (cls, kwargs, inputs, arg) in mods.items():
        if kwargs:
            yield f"{name}()", entrance(cls, lambda kwargs=kwargs: dict(kwargs))
        yield f"{name}.forward", _module_forward(cls, kwargs, arg, inputs)
        yield f"{name}.backward", _module_backward(cls, kwargs, inputs)
    spec = lambda: dict(d_model=8, n_head=2, d_ff=16)                       # noqa: E731
    yield "BlockSpec", entrance(blocks.BlockSpec, lambda: dict(spec(), eps=1e-5, p_drop=0.1,
                                                               pattern=SlidingWindow(2), positions=RoPE()),
                                extra=["d_model", "n_head", "n_kv_head"])
    yield "EncoderBlock.forward", _module_forward(lambda **k: blocks.EncoderBlock(blocks.BlockSpec(**spec()), rng=0),
                                                  {}, "x", lambda: (f32(2, 3, 8),))
    yield "EncoderBlock.backward", _module_backward(lambda **k: blocks.EncoderBlock(blocks.BlockSpec(**spec()),
                                                                                    rng=0), {}, lambda: (f32(2, 3, 8),))
    yield "DecoderBlock.forward", _module_forward(
        lambda **k: blocks.DecoderBlock(blocks.BlockSpec(**spec()), cross=True, rng=0), {}, "x",
        lambda: (f32(2, 3, 8), f32(2, 4, 8)), names=["x", "memory"])
    yield "Residual()", entrance(residual.Residual, lambda: {"sublayer": activation.ReLU(), "norm": nmod.LayerNorm(4),
                                                             "dropout": dmod.Dropout(0.0), "norm_position": "pre"},
                                 extra=["sublayer", "norm", "dropout"])
    yield "KVCache.append", entrance(lambda k_new, v_new: kv_cache.KVCache().append(k_new, v_new),
                                     lambda: {"k_new": f32(1, 2, 3, 4), "v_new": f32(1, 2, 3, 4)})
    yield "make_norm", entrance(nmod.make_norm, lambda: {"kind": "layernorm", "d_model": 4},
                                names={"kind": "kind"}, extra=["name", "norm"])
    yield "make_activation", entrance(activation.make_activation, lambda: {"name": "gelu"})


def _module_forward(cls, kwargs, arg, inputs, names=None):
    def run(d):
        module = cls(**kwargs)
        args = list(inputs())
        i = d.draw(st.integers(0, len(args) - 1))
        args[i] = d.draw(junk)
        refuses(lambda: module.forward(*args), names or [arg])
    return run


def _module_backward(cls, kwargs, inputs):
    def run(d):
        module = cls(**kwargs)
        module.forward(*inputs())
        dout = d.draw(junk)
        refuses(lambda: module.backward(dout), ["dout", "dy", "dP", "dx"])
    return run


# ------------------------------------------------------------------ models
def _model_entrances():
    from minitransformer.models import GPT, Encoder, Seq2Seq
    from minitransformer.models.config import EncoderConfig, GPTConfig, Seq2SeqConfig
    tiny = dict(vocab_size=11, block_size=8, n_layer=1, n_head=2, d_model=8)
    yield "GPT()", entrance(GPT, lambda: {"config": GPTConfig(**tiny), "rng": 0, "dtype": np.float32},
                            extra=["config", "rng", "dtype"])
    yield "Encoder()", entrance(Encoder, lambda: {"config": EncoderConfig(**tiny), "rng": 0},
                                extra=["config", "rng"])
    yield "Seq2Seq()", entrance(Seq2Seq, lambda: {"config": Seq2SeqConfig(**tiny), "rng": 0},
                                extra=["config", "rng"])
    gpt = GPT(GPTConfig(**tiny))
    yield "GPT.forward(T > block_size, ids)", entrance(
        lambda ids: gpt.forward(ids), lambda: {"ids": np.ones((1, 9), np.int64)})
    enc = Encoder(EncoderConfig(**tiny, type_vocab_size=2))
    yield "Encoder.forward(token_type_ids, padding)", entrance(
        lambda ids, token_type_ids, key_padding_mask: enc.forward(ids, token_type_ids=token_type_ids,
                                                                  key_padding_mask=key_padding_mask),
        lambda: {"ids": np.ones((2, 3), np.int64), "token_type_ids": np.zeros((2, 3), np.int64),
                 "key_padding_mask": np.zeros((2, 3), bool)}, extra=["padding", "mask"])
    yield "GPT.load_state_dict", entrance(lambda state: gpt.load_state_dict(state), lambda: {"state": {}})
    yield "GPT.astype", entrance(lambda dtype: GPT(GPTConfig(**tiny)).astype(dtype), lambda: {"dtype": np.float64})
    yield "GPT.to", entrance(lambda device: GPT(GPTConfig(**tiny)).to(device), lambda: {"device": "cpu"})


# ------------------------------------------------------------------ tokenizers, data, checkpoints
def _tmp():
    if "dir" not in _TMP:
        _TMP["dir"] = tempfile.mkdtemp(prefix="fuzz_more_")
    return _TMP["dir"]


_TMP = {}


def _write(name, content):
    path = os.path.join(_tmp(), name)
    with open(path, "wb") as f:
        f.write(content)
    return path


json_junk = st.one_of(st.binary(max_size=30), st.sampled_from([
    b"[" * 40000 + b"]" * 40000, b'{"a":' * 30000 + b"1" + b"}" * 30000, b"null", b"[]", b'"x"', b"1e999",
    b'{"type": "char", "chars": 5}', b'{"type": "char", "chars": [1, 2]}', b'{"type": "char", "chars": ["ab"]}',
    b'{"type": "wordpiece", "vocab": {"a": "b"}}', b'{"type": "wordpiece", "vocab": ["a", "a"]}',
    b'{"type": "bpe", "merges": [[1, 2]], "special_tokens": {}, "pattern": 3}', b"\xff\xfe\x00",
    b'{"type": "bpe", "merges": [[300, 2]], "special_tokens": [], "pattern": null}']))


def _tokenizer_entrances():
    from minitransformer.tokenizers import CharTokenizer, tokenizer_from_dict
    from minitransformer.tokenizers.bpe import ByteBPETokenizer
    from minitransformer.tokenizers.wordpiece import WordPieceTokenizer
    char = CharTokenizer.from_text("abc")
    bpe = ByteBPETokenizer.train("hello hello world", 262, special_tokens=["<eos>"])
    wp = WordPieceTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "a", "##b"])
    yield "CharTokenizer.from_text", entrance(CharTokenizer.from_text, lambda: {"text": "abc"})
    yield "CharTokenizer.decode", entrance(char.decode, lambda: {"ids": [0, 1]})
    yield "CharTokenizer.from_dict", entrance(CharTokenizer.from_dict, lambda: {"d": char.to_dict()},
                                              extra=["d", "chars", "type", "tokenizer"])
    yield "ByteBPETokenizer.train", entrance(ByteBPETokenizer.train, lambda: {"text": "ab ab", "vocab_size": 258,
                                                                              "special_tokens": ()})
    yield "ByteBPETokenizer.encode(allowed_special)", entrance(bpe.encode, lambda: {"text": "hello", "allowed_special": "all"})
    yield "ByteBPETokenizer.decode", entrance(bpe.decode, lambda: {"ids": [104, 101], "errors": "replace"})
    yield "ByteBPETokenizer.save", entrance(bpe.save, lambda: {"path": os.path.join(_tmp(), "b.json")})
    yield "WordPieceTokenizer()", entrance(WordPieceTokenizer, lambda: {"vocab": ["[PAD]", "[UNK]", "a"]},
                                           extra=["vocab", "unk"])
    yield "WordPieceTokenizer.encode", entrance(wp.encode, lambda: {"text": "ab", "add_special_tokens": True,
                                                                    "max_length": 8})
    yield "WordPieceTokenizer.encode_batch", entrance(wp.encode_batch, lambda: {"texts": ["ab", "a"],
                                                                                "max_length": 8})
    yield "WordPieceTokenizer.decode", entrance(wp.decode, lambda: {"ids": [4, 5], "skip_special_tokens": True})
    yield "WordPieceTokenizer.from_vocab_file", _file_entrance(WordPieceTokenizer.from_vocab_file, "vocab.txt",
                                                               st.binary(max_size=30))

    def from_json(d):
        content = d.draw(json_junk)
        path = _write("tok.json", content)
        import json
        try:
            value = json.loads(content)
        except (ValueError, RecursionError):
            return
        refuses(lambda: tokenizer_from_dict(value), ["d", "tokenizer", "type", "chars", "merges", "vocab",
                                                     "special_tokens", "pattern"])
        refuses(lambda: ByteBPETokenizer.load(path), ["tok.json"])
    yield "tokenizer_from_dict(json)", from_json


def _file_entrance(load, name, contents, extra=()):
    def run(d):
        path = _write(name, d.draw(contents))
        refuses(lambda: load(path), [name, *extra])
    return run


def _data_entrances():
    from minitransformer.training import data
    from minitransformer.training.tasks import LanguageModelTask
    yield "train_val_split", entrance(data.train_val_split, lambda: {"ids": np.arange(20), "val_fraction": 0.1})
    yield "random_batch", entrance(data.random_batch, lambda: {"data": np.arange(50), "block_size": 4,
                                                               "batch_size": 2, "rng": np.random.default_rng(0)})
    yield "make_sequence_task", entrance(data.make_sequence_task, lambda: {
        "task": "reverse", "n": 4, "length_range": (2, 4), "vocab": 6, "rng": np.random.default_rng(0)})
    yield "mlm_mask", entrance(data.mlm_mask, lambda: {"ids": ids(2, 5, high=9), "rng": np.random.default_rng(0),
                                                       "vocab_size": 10, "mask_id": 9, "p": 0.15})
    yield "load_text", _file_entrance(data.load_text, "corpus.txt", st.binary(max_size=20), extra=["path"])
    yield "LanguageModelTask()", entrance(LanguageModelTask, lambda: {"train_ids": np.arange(50) % 5,
                                                                      "val_ids": np.arange(50) % 5,
                                                                      "block_size": 4, "batch_size": 2},
                                          extra=["ids", "data"])


def _checkpoint_entrances():
    from minitransformer.models import GPT
    from minitransformer.models.config import GPTConfig
    from minitransformer.training.checkpoint import save_checkpoint
    from minitransformer.training.load import load_model
    from minitransformer.pretrained.safetensors import save_safetensors
    gpt = GPT(GPTConfig(vocab_size=11, block_size=8, n_layer=1, n_head=2, d_model=8))
    yield "save_checkpoint", entrance(save_checkpoint, lambda: {"path": os.path.join(_tmp(), "s.npz"),
                                                                "model": gpt, "meta": {"a": 1}},
                                      extra=["path", "model", "meta", "s.npz"])
    yield "save_safetensors", entrance(save_safetensors, lambda: {"path": os.path.join(_tmp(), "s.safetensors"),
                                                                  "tensors": {"a": f32(2)}},
                                       extra=["path", "tensors", "s.safetensors"])

    def load_model_bytes(d):
        good = os.path.join(_tmp(), "good.npz")
        if "ckpt" not in _TMP:
            save_checkpoint(good, gpt, meta={"config": {}})
            with open(good, "rb") as f:
                _TMP["ckpt"] = f.read()
        how = d.draw(st.sampled_from(["random", "truncate", "flip"]))
        content = _TMP["ckpt"]
        if how == "random":
            content = d.draw(st.binary(max_size=64))
        elif how == "truncate":
            content = content[:d.draw(st.integers(0, len(content) - 1))]
        else:
            i = d.draw(st.integers(0, len(content) - 1))
            content = content[:i] + bytes([content[i] ^ 0xFF]) + content[i + 1:]
        path = _write("m.npz", content)
        refuses(lambda: load_model(path), ["m.npz"])
    yield "load_model(bytes)", load_model_bytes
    def load_model_path(d):
        path = d.draw(junk)
        # a str that names no file: FileNotFoundError naming it; anything else: TypeError/ValueError
        names = ["path", *([path] if isinstance(path, str) and path else [])]
        refuses(lambda: load_model(path), names, also=(FileNotFoundError,) if isinstance(path, str) else ())
    yield "load_model(path)", load_model_path


def _optim_entrances():
    from minitransformer.optim import schedules
    from minitransformer.optim.optimizers import SGD, Adam, AdamW
    from minitransformer.layers.linear import Linear
    params = lambda: list(Linear(2, 2, rng=0).parameters())                 # noqa: E731
    for cls in (SGD, Adam, AdamW):
        yield f"{cls.__name__}(params)", entrance(cls, lambda: {"params": params(), "lr": 1e-3},
                                                  extra=["params", "lr"])
    for name in dir(schedules):
        make = getattr(schedules, name)
        if name.endswith("_schedule") and callable(make):
            import inspect
            sig = inspect.signature(make)
            good = {p: (100 if "steps" in p or p == "d_model" else 1e-3) for p in sig.parameters
                    if sig.parameters[p].default is inspect.Parameter.empty}
            yield f"{name}()", entrance(make, lambda good=good: dict(good))


# ------------------------------------------------------------------ the CLI, in-process
def run_cli(argv):
    """(exit code, stdout, stderr) of ``cli.main(argv)`` run in this process."""
    from minitransformer import cli
    out, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = cli.main(argv) or 0
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else 1
    return code, out.getvalue(), err.getvalue()


ALWAYS_BAD = ["abc", "", "nan", "inf", "-inf", "1e999", "0x10"]     # bad for every numeric flag
MAYBE_BAD = ["0", "-1", "2.5", "-0.5", "1e-320"]                     # bad for some flags


def _numeric_flags(command):
    from minitransformer import cli
    sub = next(a for a in cli._parser()._actions if a.__class__.__name__ == "_SubParsersAction")
    parser = sub.choices[command]
    if command == "homework":                                          # its numbers belong to `check`
        nested = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
        parser = nested.choices["check"]
    return sorted(a.option_strings[-1] for a in parser._actions if a.option_strings and a.type is not None
                  and a.type is not str)


def _cli_base(command):
    """Arguments that make ``command`` run quickly when the fuzzed flag is valid."""
    if command == "train":
        return ["train", "--steps", "1", "--n-layer", "1", "--d-model", "8", "--n-head", "2", "--block-size", "8",
                "--batch-size", "2", "--eval-interval", "1", "--out", os.path.join(_tmp(), "cli_run"), "--overwrite"]
    if command == "generate":
        return ["generate", "--checkpoint", _cli_checkpoint(), "--prompt", "ab", "--max-new-tokens", "2"]
    if command == "homework":
        return ["homework", "check", _tmp(), "a_no_such_assignment"]
    return [command]


def _cli_checkpoint():
    if "cli_ckpt" not in _TMP:
        out = os.path.join(_tmp(), "cli_ckpt")
        code, _, err = run_cli(["train", "--steps", "1", "--n-layer", "1", "--d-model", "8", "--n-head", "2",
                                "--block-size", "8", "--batch-size", "2", "--out", out])
        assert code == 0, err
        _TMP["cli_ckpt"] = next(os.path.join(out, f) for f in os.listdir(out) if f.endswith(".npz"))
    return _TMP["cli_ckpt"]


def assert_one_line_error(argv, code, err, flag=None):
    assert "Traceback" not in err, (argv, err)
    lines = [line for line in err.strip().splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1, (argv, code, err)
    if flag is not None:
        assert flag in lines[0], (argv, err)


def _cli_flag_entrance(command):
    def run(d):
        flag = d.draw(st.sampled_from(_numeric_flags(command)))
        value = d.draw(st.sampled_from(ALWAYS_BAD + MAYBE_BAD))
        if command == "train" and flag in ("--steps", "--d-model", "--n-layer", "--block-size", "--batch-size") \
                and value not in ALWAYS_BAD:
            value = d.draw(st.sampled_from(["0", "-1", "2.5"]))        # a valid large value would train long
        argv = [*_cli_base(command), flag, value]
        code, out, err = run_cli(argv)
        if value in ALWAYS_BAD:
            assert_one_line_error(argv, code, err, flag)
        elif code != 0:
            assert_one_line_error(argv, code, err)
    return run


def _cli_path_entrance(d):
    missing = os.path.join(_tmp(), "no_such_dir", "x.npz")
    unwritable = "/proc/forbidden_out"
    case = d.draw(st.sampled_from(["train --data", "train --out", "generate --checkpoint", "embed --model",
                                   "train --device"]))
    if case == "train --data":
        argv, flag = _cli_base("train") + ["--data", missing], "--data"
    elif case == "train --out":
        argv, flag = _cli_base("train") + ["--out", d.draw(st.sampled_from([unwritable, "/dev/null/x"]))], "--out"
    elif case == "generate --checkpoint":
        argv, flag = ["generate", "--checkpoint", d.draw(st.sampled_from([missing, _tmp(), "/dev/null"])),
                      "--prompt", "ab"], "--checkpoint"
    elif case == "embed --model":
        argv, flag = ["embed", "--model", missing, "a"], "--model"
    else:
        try:
            import cupy  # noqa: F401
            return
        except ImportError:
            argv, flag = _cli_base("train") + ["--device", "cuda"], "--device"
    code, _, err = run_cli(argv)
    assert_one_line_error(argv, code, err, flag)


ENTRANCES = {}
for _name, _run in [*_functional(), *_module_entrances(), *_model_entrances(), *_tokenizer_entrances(),
                    *_data_entrances(), *_checkpoint_entrances(), *_optim_entrances()]:
    ENTRANCES[_name] = _run
for _command in ("train", "generate", "embed", "gradcheck", "figures", "homework"):
    ENTRANCES[f"cli {_command} (bad numbers)"] = _cli_flag_entrance(_command)
ENTRANCES["cli (bad paths, cuda without CuPy)"] = _cli_path_entrance


@pytest.mark.parametrize("name", sorted(ENTRANCES))
@FAST
@given(data=st.data())
def test_entrance_refuses_with_a_named_error(name, data):
    run_in_scratch_dir(ENTRANCES[name], data)


def run_in_scratch_dir(entrance, data):
    """entrance(data) with the scratch folder as working directory (a junk path like "3" must
    not land in the checkout) and NumPy's floating-point warnings off (junk values overflow)."""
    cwd = os.getcwd()
    os.chdir(_tmp())
    try:
        with np.errstate(all="ignore"):
            entrance(data)
    finally:
        os.chdir(cwd)


def test_entrance_count():
    from test_entrances_models_and_files import ENTRANCES as FIRST
    assert len(ENTRANCES) >= 130
    assert not set(ENTRANCES) & set(FIRST)
    print(f"fuzzed entrances: {len(ENTRANCES)} here + {len(FIRST)} in test_entrances_models_and_files.py")
