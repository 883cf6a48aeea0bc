"""Helpers and the newer functions at their entrances: losses and Swish at the ends of their
dtypes, cost helpers and caches that took anything, and messages that named no argument
(one test per class; docs/reliability.md).
"""
import json
import re

import numpy as np
import pytest
from hypothesis import given, strategies as st

from minitransformer.functional.activations import silu_backward, silu_forward, swish_backward, swish_forward
from minitransformer.functional.binary_cross_entropy import (binary_cross_entropy_backward,
                                                             binary_cross_entropy_forward)
from minitransformer.functional.cross_entropy import cross_entropy_backward, cross_entropy_forward
from minitransformer.models import GPT, Encoder, EncoderConfig, GPTConfig, Seq2Seq, Seq2SeqConfig

TINY = dict(vocab_size=11, block_size=8, n_layer=1, n_head=2, d_model=8)


# ---------------------------------------------------------------- 7. numerics at the extremes
def _ce(dtype, loss_each, n):
    """Cross-entropy of n tokens, each of loss ``loss_each``: logits [loss_each, 0], target 1."""
    logits = np.zeros((n, 2), dtype)
    logits[:, 0] = loss_each
    return cross_entropy_forward, cross_entropy_backward, (logits, np.ones(n, np.int64))


def _bce(dtype, z, labels):
    return binary_cross_entropy_forward, binary_cross_entropy_backward, (np.asarray(z, dtype), np.asarray(labels))


@pytest.mark.parametrize("make, mean", [
    (lambda: _ce(np.float16, 1000, 100), 1000.0),                    # the sum, 1e5, is past float16's 65504
    (lambda: _bce(np.float16, [-1000] * 100, [1] * 100), 1000.0),
    (lambda: _bce(np.float16, [60000, -60000] * 50, [0, 1] * 50), 60000.0),
    (lambda: _bce(np.float32, [3e38] * 10, [0] * 10), 3e38),           # the sum, 3e39, is past float32's 3.4e38
    (lambda: _bce(np.float32, [-3e38, 3e38] * 5, [1, 0] * 5), 3e38),
    (lambda: _ce(np.float32, 3e38, 10), 3e38),
], ids=["ce-float16", "bce-float16", "bce-float16-both-labels", "bce-float32-3e38", "bce-float32-pm3e38",
        "ce-float32-3e38"])
def test_a_loss_whose_mean_fits_its_dtype_is_finite_where_its_sum_is_not(make, mean):
    forward, backward, inputs = make()
    loss, cache = forward(*inputs)
    assert loss.dtype == inputs[0].dtype and loss.shape == ()
    assert np.isfinite(loss) and float(loss) == pytest.approx(mean, rel=1e-3)
    dlogits = backward(1.0, cache)
    assert dlogits.dtype == inputs[0].dtype and np.isfinite(dlogits).all()


def _extreme_floats(dtype):
    finfo = np.finfo(dtype)
    return st.one_of(st.floats(-float(finfo.max), float(finfo.max), width=finfo.bits),
                     st.sampled_from([0.0, float(finfo.max), -float(finfo.max), 1e4, -1e4, 6550.0, 255.0]))


@given(dtype=st.sampled_from([np.float16, np.float32]), data=st.data(),
       beta=st.sampled_from([0.5, 1.0, 2.0, 10.0]))
def test_swish_backward_is_finite_wherever_silus_is(dtype, data, beta):
    x = np.array(data.draw(st.lists(_extreme_floats(dtype), min_size=1, max_size=16)), dtype)
    with np.errstate(over="ignore"):                           # βx may overflow to ±inf: σ takes it
        y, cache = swish_forward(x, np.array([beta], dtype))
        dx, dbeta = swish_backward(np.ones_like(y), cache)
    silu_dx = silu_backward(np.ones_like(x), silu_forward(x)[1])
    assert np.isfinite(y).all() and np.isfinite(dbeta).all()
    assert np.isfinite(dx[np.isfinite(silu_dx)]).all()
    if beta == 1.0:                                            # Swish with β = 1 is SiLU, to the bit
        np.testing.assert_array_equal(dx, silu_dx)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("temperature", [1e-300, 1e-45, 1e-8])
def test_a_temperature_below_the_dtype_samples_the_argmax_as_its_limit(dtype, temperature):
    from minitransformer.functional.softmax import softmax_forward
    from minitransformer.generation.generate import filter_logits
    logits = np.array([[1.0, 3.0, -60000.0, 2.0]], dtype)
    z = filter_logits(logits, temperature)                      # a τ that rounds to 0 in float16/float32
    p = softmax_forward(z)[0]
    assert not np.isnan(z).any() and z[0, 1] == 0 and p[0].tolist() == [0.0, 1.0, 0.0, 0.0]


@pytest.mark.parametrize("beta", [np.inf, -np.inf, np.nan])
def test_swish_refuses_a_beta_that_is_not_finite_as_its_module_does(beta):
    from minitransformer.layers.activation import Swish
    x = np.zeros((2, 3))
    with pytest.raises(ValueError, match=r"^beta: expected finite values"):
        swish_forward(x, np.array([beta]))
    with pytest.raises(ValueError, match=r"^beta: expected a"):
        Swish(beta=float(beta))


# ---------------------------------------------------------------- 8. helpers that accepted anything
def _edited(**fields):
    config = GPTConfig(**TINY)
    for name, value in fields.items():
        setattr(config, name, value)                           # after construction: not checked then
    return config


def _helper_cases():
    from minitransformer.generation import SinkDecoderCache, rolling_cache
    from minitransformer.models.costs import flops_per_token, kv_cache_bytes, matmul_parameters
    rope = dict(TINY, position="rope")
    return [
        (lambda: flops_per_token(GPTConfig(**TINY), 8, training="False"), TypeError, r"^training: expected True"),
        (lambda: flops_per_token(GPTConfig(**TINY), 8, training=1), TypeError, r"^training: expected True"),
        (lambda: kv_cache_bytes(_edited(n_layer=-12)), ValueError, r"^n_layer: expected an integer in \[1"),
        (lambda: kv_cache_bytes(_edited(n_kv_head=0)), ValueError, r"^n_kv_head: "),
        (lambda: flops_per_token(_edited(d_model=0), 8), ValueError, r"^d_model: "),
        (lambda: matmul_parameters(_edited(n_head="2")), TypeError, r"^n_head: "),
        (lambda: rolling_cache(None, 1, 2), TypeError, r"^model: expected a decoder-only model \(a GPT\), got NoneType"),
        (lambda: rolling_cache(Encoder(EncoderConfig(**rope)), 1, 2), TypeError, r"^model: .* got Encoder"),
        (lambda: rolling_cache(Seq2Seq(Seq2SeqConfig(**rope)), 1, 2), TypeError, r"^model: .* got Seq2Seq"),
        (lambda: rolling_cache(Seq2Seq(Seq2SeqConfig(**rope)).decoder, 1, 2), ValueError,
         r"^model: .* cross-attending decoder"),
        (lambda: SinkDecoderCache(0, 1, 2), ValueError, r"^n_layer: expected an integer in \[1"),
        (lambda: SinkDecoderCache(-1, 1, 2), ValueError, r"^n_layer: "),
        (lambda: SinkDecoderCache("2", 1, 2), TypeError, r"^n_layer: expected an integer"),
    ]


@pytest.mark.parametrize("case", range(len(_helper_cases())))
def test_cost_helpers_and_caches_refuse_what_they_used_to_accept(case):
    call, error, message = _helper_cases()[case]
    with pytest.raises(error, match=message):
        call()


# ---------------------------------------------------------------- 10. messages that named no argument
def _bert(tmp_path, config=None, sentence=None, tokenizer=None, raw_config=None):
    """A tiny BERT directory (test_pretrained's), with a config, sentence or tokenizer file changed."""
    from test_pretrained import TINY as BERT, fake_tensors, write_checkpoint
    directory = write_checkpoint(tmp_path / "bert", fake_tensors(), {**BERT, **(config or {})}, sentence)
    if tokenizer is not None:
        (directory / "tokenizer_config.json").write_text(json.dumps(tokenizer))
    if raw_config is not None:
        (directory / "config.json").write_bytes(raw_config)
    return directory


def _named_cases(tmp_path):
    from minitransformer.fast.cuda_adamw import fused_like
    from minitransformer.fast.data_parallel import DataParallel
    from minitransformer.fast.trainer import train as fast_train
    from minitransformer.functional.masks import combine_masks
    from minitransformer.layers.attention import MultiHeadAttention
    from minitransformer.layers.blocks import DecoderBlock
    from minitransformer.models.presets import notable_models, notable_models_markdown
    from minitransformer.optim import SGD, Adam
    from minitransformer.pretrained.bert import from_pretrained
    from minitransformer.tokenizers.bpe import ByteBPETokenizer
    from minitransformer.tokenizers.word import WordTokenizer
    from minitransformer.training.config import TrainConfig
    from minitransformer.generation.generate import filter_logits
    from minitransformer.layers.activation import Swish
    from minitransformer.training.loop import train
    from minitransformer.training.resume import check_run_state
    model = GPT(GPTConfig(**TINY), rng=0)
    mha = MultiHeadAttention(8, 2, rng=0)
    block = DecoderBlock(GPTConfig(**TINY).block_spec(causal=True), rng=0)
    x = lambda *shape: np.zeros(shape, np.float32)
    return [
        (lambda: notable_models("gpt2-small"), TypeError, r"^names: expected a list of preset names \(e\.g\. \['gpt2-small'\]\)"),
        (lambda: notable_models_markdown("gpt2-small"), TypeError, r"^names: "),
        (lambda: notable_models(5), TypeError, r"^names: expected a list"),
        (lambda: notable_models(["gpt2-small", "gpt5"]), ValueError, r"^names\[1\]: expected one of"),
        (lambda: WordTokenizer(None), TypeError, r"^words: expected a list"),
        (lambda: WordTokenizer("<unk>"), TypeError, r"^words: expected a list"),
        (lambda: DataParallel(None), TypeError, r"^model: expected a Module"),
        (lambda: DataParallel(model, 2, forget=5), TypeError, r"^forget: expected a list"),
        (lambda: fast_train(None, None, TrainConfig(steps=1)), TypeError, r"^model: expected a Module"),
        (lambda: fast_train(model, {}, TrainConfig(steps=1)), TypeError, r"^task: expected a task"),
        (lambda: train(model, None, TrainConfig(steps=1)), TypeError, r"^task: expected a task"),
        (lambda: train(model, _lm_task(), {"steps": 1}), TypeError, r"^cfg: expected a TrainConfig"),
        (lambda: fused_like(SGD(model.parameters(), 0.1)), TypeError, r"^optimizer: expected an AdamW.* got SGD"),
        (lambda: fused_like(Adam(model.parameters(), 0.1)), TypeError, r"^optimizer: expected an AdamW.* got Adam"),
        (lambda: mha.forward(x(0, 3, 8)), ValueError, r"^x: expected at least one row and one position"),
        (lambda: mha.forward(x(2, 0, 8)), ValueError, r"^x: expected at least one row and one position"),
        (lambda: block.forward(x(0, 3, 8)), ValueError, r"^x: expected at least one row and one position"),
        (lambda: block.forward(x(2, 0, 8)), ValueError, r"^x: expected at least one row and one position"),
        (lambda: MultiHeadAttention(8, 2, cross=True, rng=0).forward(x(2, 3, 8), x(2, 0, 8)), ValueError,
         r"^memory: expected at least one position"),
        (lambda: combine_masks(np.ones((3, 3), bool), np.ones((4, 4), bool)), ValueError,
         r"^masks\[1\]: shape \(4, 4\) does not broadcast with the masks before it, \(3, 3\)"),
        (lambda: combine_masks(None, np.ones((3, 3)), None), TypeError, r"^masks\[1\]: expected a boolean array"),
        (lambda: combine_masks([[True]]), TypeError, r"^masks\[0\]: expected a boolean array"),
        (lambda: ByteBPETokenizer(merges=5), TypeError, r"^merges: expected a list"),
        (lambda: from_pretrained(_bert(tmp_path / "a", raw_config=b"\xff\xfe{}")), ValueError,
         r"config\.json: not UTF-8 text: byte 0xff at offset 0"),
        (lambda: from_pretrained(_bert(tmp_path / "b", sentence={"max_seq_length": "abc"})), ValueError,
         r"sentence_bert_config\.json: max_seq_length: expected a positive integer, got 'abc'"),
        (lambda: from_pretrained(_bert(tmp_path / "c", sentence={"max_seq_length": None})), ValueError,
         r"sentence_bert_config\.json: max_seq_length: expected a positive integer, got None"),
        (lambda: from_pretrained(_bert(tmp_path / "d", tokenizer={"do_lower_case": "yes"})), ValueError,
         r"tokenizer_config\.json: do_lower_case: expected true or false, got 'yes'"),
        (lambda: from_pretrained(_bert(tmp_path / "e", config={"layer_norm_eps": "x"})), ValueError,
         r"config\.json: layer_norm_eps: expected a number, got 'x'"),
        (lambda: from_pretrained(_bert(tmp_path / "f", config={"hidden_size": "8"})), ValueError,
         r"config\.json: hidden_size: expected an integer"),
        # train()'s options: an empty path is not None, "no" is not False
        (lambda: train(model, _lm_task(), TrainConfig(steps=1), checkpoint_path=""), ValueError, r"^checkpoint_path: "),
        (lambda: train(model, _lm_task(), TrainConfig(steps=1), resume="yes", checkpoint_path="c.npz"), TypeError,
         r"^resume: expected True or False"),
        (lambda: train(model, _lm_task(), TrainConfig(steps=1), allow_config_change="no"), TypeError,
         r"^allow_config_change: "),
        (lambda: train(model, _lm_task(), TrainConfig(steps=1), stop_after=-1), ValueError, r"^stop_after: "),
        (lambda: train(model, _lm_task(), TrainConfig(steps=1), log=None), TypeError, r"^log: "),
        (lambda: train(model, _lm_task(), TrainConfig(steps=1), meta=5), TypeError, r"^meta: "),
        (lambda: train(model, _lm_task(), TrainConfig(steps=1), optimizer=5), TypeError, r"^optimizer: "),
        (lambda: check_run_state(None, "c.npz"), ValueError, r"^resume: c\.npz: expected the checkpoint's metadata"),
        (lambda: filter_logits(np.array([[np.nan, 1.0]])), ValueError, r"^logits: expected finite numbers or -inf"),
        (lambda: filter_logits(np.array([[np.inf, 1.0]])), ValueError, r"^logits: expected finite numbers or -inf"),
        (lambda: filter_logits(np.full((1, 2), -np.inf)), ValueError, r"^logits: .* at least one finite in every row"),
        (lambda: Swish().forward(np.ones((2, 3))), TypeError, r"^x: expected dtype float32"),
    ]


def _lm_task():
    from minitransformer.training.tasks import LanguageModelTask
    ids = np.arange(40) % 11
    return LanguageModelTask(ids[:30], ids[30:], 4, 2)


def test_every_refusal_names_its_argument(tmp_path):
    for k, (call, error, message) in enumerate(_named_cases(tmp_path)):
        with pytest.raises(error) as refused:
            call()
        assert re.search(message, str(refused.value)), (k, str(refused.value))
