"""Edge cases of the entrances: nothing silently wrong, every bad input a clear error (one test per case)."""
import json
import os

import numpy as np
import pytest

from minitransformer import backend
from minitransformer.functional.alibi import MAX_HEADS, alibi_slopes
from minitransformer.generation.generate import filter_logits, generate, sample_tokens
from minitransformer.layers.embedding import Embedding
from minitransformer.layers.ffn import FeedForward
from minitransformer.layers.linear import Linear
from minitransformer.layers.lm_head import LMHead
from minitransformer.models import GPT, Encoder, Seq2Seq
from minitransformer.models.config import EncoderConfig, GPTConfig, Seq2SeqConfig
from minitransformer.optim import schedules
from minitransformer.optim.optimizers import SGD, Adam, AdamW
from minitransformer.pretrained.safetensors import load_safetensors
from minitransformer.tokenizers.bpe import ByteBPETokenizer
from minitransformer.validate import check_upstream

TINY = dict(vocab_size=11, block_size=8, n_layer=1, n_head=2, d_model=8)


class _AlmostOne(np.random.Generator):
    """A Generator whose uniform draws are exactly 1.0: what rounding of u = r · Σp can give."""

    def random(self, size=None, *args, **kwargs):
        return np.ones(size)


# ---------------------------------------------------------------- sampling
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("V", [1, 3, 7, 50])
def test_sample_tokens_never_returns_an_id_outside_the_vocabulary(V, dtype):
    probs = np.full((4, V), 1.0 / V, dtype=dtype)           # all-equal logits
    ids = sample_tokens(probs, _AlmostOne(np.random.PCG64(0)))
    assert ids.tolist() == [V - 1] * 4
    rng = np.random.default_rng(0)
    for _ in range(50):
        ids = sample_tokens(probs, rng)
        assert ((0 <= ids) & (ids < V)).all()


def test_sample_tokens_never_draws_a_zero_probability_tail():
    probs = np.array([[0.5, 0.5, 0.0, 0.0]], dtype=np.float32)
    assert sample_tokens(probs, _AlmostOne(np.random.PCG64(0))).tolist() == [1]


@pytest.mark.parametrize("top_p", [0, 0.0, -0.5])
def test_top_p_zero_or_negative_is_refused_not_all_masked(top_p):
    with pytest.raises(ValueError, match="top_p"):
        filter_logits(np.zeros((1, 5)), top_p=top_p)
    model = GPT(GPTConfig(**TINY))
    with pytest.raises(ValueError, match="top_p"):
        generate(model, np.zeros((1, 2), np.int64), 2, strategy="sample", top_p=top_p,
                 rng=np.random.default_rng(0))


def test_filter_logits_refuses_top_k_zero():
    with pytest.raises(ValueError, match="top_k"):
        filter_logits(np.zeros((1, 5)), top_k=0)


@pytest.mark.parametrize("rng", [0, None, "0", np.random.RandomState(0)])
def test_rng_not_a_generator_is_a_type_error_naming_rng(rng):
    with pytest.raises(TypeError, match="rng"):
        sample_tokens(np.full((1, 3), 1 / 3), rng)
    model = GPT(GPTConfig(**TINY))
    with pytest.raises(TypeError, match="rng"):
        generate(model, np.zeros((1, 2), np.int64), 2, strategy="sample", rng=rng)


def test_generating_from_a_nan_model_is_an_error_not_token_zero_forever():
    model = GPT(GPTConfig(**TINY))
    model.head.W[...] = np.nan                       # tied: the embedding too
    for strategy in ("greedy", "beam"):
        with pytest.raises(ValueError, match="not finite"):
            generate(model, np.zeros((1, 2), np.int64), 3, strategy=strategy)


# ---------------------------------------------------------------- layers: x
BAD_X = [np.ones((2, 4), np.int64), np.ones((2, 4), bool), np.ones((2, 4), np.complex128),
         np.ones((2, 4), object), np.ones((2, 4), np.float64)]   # the last: float64 into float32 weights


@pytest.mark.parametrize("x", BAD_X, ids=lambda x: str(x.dtype))
@pytest.mark.parametrize("make, name", [(lambda: Linear(4, 3, rng=0), "x"), (lambda: LMHead(4, 5, rng=0), "h"),
                                        (lambda: FeedForward(4, 8, rng=0), "x")], ids=["Linear", "LMHead", "FeedForward"])
def test_layers_refuse_non_floating_or_mismatched_input_naming_their_input(make, name, x):
    with pytest.raises(TypeError, match=rf"^{name}: expected"):
        make().forward(x)


# ---------------------------------------------------------------- loading weights
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_load_state_dict_refuses_non_finite_weights_naming_the_parameter(bad):
    lin = Linear(3, 2, rng=0)
    state = lin.state_dict()
    before = lin.W.copy()
    state["W"] = state["W"].copy()
    state["W"][0, 0] = bad
    with pytest.raises(ValueError, match=r"state\['W'\]: expected finite"):
        lin.load_state_dict(state)
    np.testing.assert_array_equal(lin.W, before)


def test_load_state_dict_refuses_complex_object_and_overflow():
    lin = Linear(3, 2, rng=0)
    for value, err in [(np.ones((3, 2), complex), TypeError), (np.ones((3, 2), object), TypeError),
                       (np.full((3, 2), 1e300), ValueError)]:
        with pytest.raises(err, match=r"state\['W'\]"):
            lin.load_state_dict({"W": value, "b": np.zeros(2, np.float32)})


def test_from_pretrained_weights_refuse_nan(tmp_path):
    from minitransformer.pretrained.bert import _check_values
    with pytest.raises(ValueError, match="layer.0.weight: expected finite"):
        _check_values(np.array([1.0, np.nan], np.float32), np.float32, "f: layer.0.weight")
    with pytest.raises(ValueError, match="overflow"):
        _check_values(np.array([1e300]), np.float32, "f: w")
    with pytest.raises(ValueError, match="real numbers"):
        _check_values(np.array([1j]), np.float32, "f: w")


# ---------------------------------------------------------------- numbers
def _params():
    return list(Linear(2, 2, rng=0).parameters())


@pytest.mark.parametrize("make", [
    lambda: SGD(_params(), lr=float("inf")), lambda: Adam(_params(), lr=float("inf")),
    lambda: AdamW(_params(), lr=1e-3, weight_decay=float("inf")),
    lambda: Adam(_params(), lr=1e-3, eps=float("inf")),
    lambda: schedules.constant_schedule(float("inf")),
    lambda: schedules.warmup_cosine_schedule(float("inf"), 1, 10),
    lambda: schedules.noam_schedule(8, 4, factor=float("inf"))])
def test_infinite_learning_rates_are_refused(make):
    with pytest.raises(ValueError, match="lr|weight_decay|eps|factor"):
        make()


def _adam():
    lin = Linear(2, 2, rng=0, dtype=np.float64)
    opt = Adam(list(lin.parameters()), lr=1e-3)
    opt.step()
    return opt


@pytest.mark.parametrize("step, err", [(1.5, TypeError), (2.0, TypeError), (-1, ValueError), ("3", TypeError)])
def test_optimizer_state_step_must_be_a_non_negative_int(step, err):
    opt = _adam()
    state = opt.state_dict()
    state["step"] = step
    with pytest.raises(err, match=r"state\['step'\]"):
        opt.load_state_dict(state)
    assert opt.t == 1


def test_optimizer_state_refuses_nan_buffers_and_inf_lr():
    opt = _adam()
    state = opt.state_dict()
    state["lr"] = float("inf")
    with pytest.raises(ValueError, match=r"state\['lr'\]"):
        opt.load_state_dict(state)
    state = opt.state_dict()
    key = next(k for k in state if "/" in k)
    state[key] = np.full_like(state[key], np.nan)
    with pytest.raises(ValueError, match="expected finite"):
        opt.load_state_dict(state)


@pytest.mark.parametrize("field", ["init_std", "eps"])
@pytest.mark.parametrize("cls", [GPTConfig, EncoderConfig, Seq2SeqConfig])
def test_config_refuses_infinite_init_std_and_eps(cls, field):
    with pytest.raises(ValueError, match=field):
        cls(**TINY, **{field: float("inf")})


def test_config_refuses_non_bool_flags():
    with pytest.raises(TypeError, match="tie_weights"):
        GPTConfig(**TINY, tie_weights="False")
    with pytest.raises(TypeError, match="bias"):
        GPTConfig(**TINY, bias=None)


def test_alibi_refuses_absurd_head_counts():
    assert len(alibi_slopes(MAX_HEADS)) == MAX_HEADS
    with pytest.raises(ValueError, match=r"H: expected an integer in \[1, 65536\]"):
        alibi_slopes(10 ** 12)


# ---------------------------------------------------------------- files
def _deep(n=100_000):
    return "[" * n + "]" * n


def test_deeply_nested_tokenizer_json_is_a_value_error_naming_the_file(tmp_path):
    path = tmp_path / "tok.json"
    path.write_text(_deep())
    with pytest.raises(ValueError, match="tok.json"):
        ByteBPETokenizer.load(path)


def test_deeply_nested_safetensors_header_is_a_value_error_naming_the_file(tmp_path):
    header = ('{"a":' + _deep() + "}").encode()
    path = tmp_path / "w.safetensors"
    path.write_bytes(len(header).to_bytes(8, "little") + header)
    with pytest.raises(ValueError, match="w.safetensors"):
        load_safetensors(path)


def test_deeply_nested_bert_config_is_a_value_error_naming_the_file(tmp_path):
    from minitransformer.pretrained.bert import _read_json
    path = tmp_path / "config.json"
    path.write_text(_deep())
    with pytest.raises(ValueError, match="config.json"):
        _read_json(path)


def test_interrupted_tokenizer_save_leaves_no_temp_file(tmp_path, monkeypatch):
    tok = ByteBPETokenizer.train("hello hello world", 260)
    path = tmp_path / "tok.json"
    tok.save(path)
    good = path.read_text()

    def boom(*args, **kwargs):
        raise KeyboardInterrupt
    monkeypatch.setattr(json, "dump", boom)
    with pytest.raises(KeyboardInterrupt):
        tok.save(path)
    assert os.listdir(tmp_path) == ["tok.json"]
    assert path.read_text() == good


# ---------------------------------------------------------------- models
@pytest.mark.parametrize("shape", [(0, 3), (2, 0), (0, 0)])
def test_models_refuse_empty_batches_naming_ids(shape):
    ids = np.zeros(shape, np.int64)
    with pytest.raises(ValueError, match=r"^ids: expected at least one row and one token"):
        GPT(GPTConfig(**TINY)).forward(ids)
    with pytest.raises(ValueError, match=r"^ids: expected at least one row and one token"):
        Encoder(EncoderConfig(**TINY)).forward(ids)
    s2s = Seq2Seq(Seq2SeqConfig(**TINY))
    with pytest.raises(ValueError, match=r"^src: expected at least one row"):
        s2s.forward(ids, np.ones((max(shape[0], 1), 2), np.int64))
    with pytest.raises(ValueError, match=r"^tgt_in: expected at least one row"):
        s2s.forward(np.ones((max(shape[0], 1), 2), np.int64), ids)


def _models():
    ids = np.ones((2, 3), np.int64)
    return [("GPT", GPT(GPTConfig(**TINY)), (ids,)),
            ("Encoder", Encoder(EncoderConfig(**TINY)), (ids,)),
            ("Seq2Seq", Seq2Seq(Seq2SeqConfig(**TINY)), (ids, ids)),
            ("Linear", Linear(4, 3, rng=0), (np.ones((2, 4), np.float32),)),
            ("LMHead", LMHead(4, 5, rng=0), (np.ones((2, 4), np.float32),)),
            ("FeedForward", FeedForward(4, 8, rng=0), (np.ones((2, 4), np.float32),)),
            ("Embedding", Embedding(5, 4, rng=0), (np.ones((2, 3), np.int64),))]


@pytest.mark.parametrize("i", range(7))
def test_backward_checks_dout_against_the_forward_output(i):
    name, module, inputs = _models()[i]
    out = module.forward(*inputs)
    with pytest.raises(ValueError, match=r"^dout: expected shape"):
        module.backward(np.ones(out.shape + (1,), out.dtype))
    with pytest.raises(TypeError, match=r"^dout: expected dtype float32"):
        module.backward(out.astype(np.float64))
    with pytest.raises(TypeError, match=r"^dout: expected an array"):
        module.backward(out.tolist())
    module.backward(np.ones_like(out))               # the cache survived the refusals


def test_check_upstream_wording():
    with pytest.raises(ValueError, match=r"dout: expected shape \(2, 3\) \(the forward output's\), got \(3, 2\)"):
        check_upstream("dout", np.ones((3, 2)), (2, 3), np.float64)


# ---------------------------------------------------------------- device
def test_cuda_without_cupy_is_one_clear_error(monkeypatch):
    monkeypatch.setattr(backend, "_cupy", None)
    with pytest.raises(ValueError, match=r"device: 'cuda'.*pip install -e \"\.\[gpu\]\""):
        backend.to_device(np.ones(2), "cuda")


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_from_pretrained_refuses_a_non_finite_tensor_naming_it(tmp_path, bad):
    from minitransformer.pretrained.bert import from_pretrained
    from test_pretrained import fake_tensors, write_checkpoint
    tensors = fake_tensors()
    name = next(k for k in sorted(tensors) if k.endswith("weight") and tensors[k].ndim == 2)
    tensors[name] = tensors[name].copy()
    tensors[name][0, 0] = bad
    with pytest.raises(ValueError, match=rf"model.safetensors: {name}: expected finite"):
        from_pretrained(write_checkpoint(tmp_path / "nan", tensors))
