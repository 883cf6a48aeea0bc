"""Backend-agnostic: every layer's forward/backward and a training step of every model family
run on an array type that is not NumPy's (tests/strict_array.py) and refuses NumPy-only
calls, silent host copies and hidden float64 promotion.

Each case runs twice from the same seed: once on NumPy, once on StrictArray. The
strict run must (1) not raise (no NumPy-only call was reached), (2) return
StrictArrays of the same dtype (nothing fell back to a host array) and (3) give the
very same numbers: the same NumPy kernels run underneath, so equality is exact.
"""
import numpy as np
import pytest

from minitransformer.backend import get_xp
from minitransformer.functional.attention import attention_backward, attention_forward
from minitransformer.functional.repeat_kv import repeat_kv_backward, repeat_kv_forward
from minitransformer.functional.cross_entropy import cross_entropy_backward, cross_entropy_forward
from minitransformer.functional.dropout import dropout_backward, dropout_forward
from minitransformer.functional.masks import causal_mask, key_padding_mask
from minitransformer.functional.softmax import (log_softmax_backward, log_softmax_forward,
                                                softmax_backward, softmax_forward)
from minitransformer.layers import ALiBi, Causal, MultiHeadAttention, RoPE, SlidingWindow
from minitransformer.layers.activation import ACTIVATIONS, make_activation
from minitransformer.layers.kv_cache import KVCache
from minitransformer.layers.dropout import Dropout
from minitransformer.layers.embedding import Embedding
from minitransformer.layers.linear import Linear
from minitransformer.layers.norm import LayerNorm, RMSNorm
from minitransformer.layers.positions import LearnedPositionEmbedding
from minitransformer.models import GPT, Encoder, EncoderConfig, GPTConfig, Seq2Seq, Seq2SeqConfig
from minitransformer.optim import AdamW, clip_grad_norm
from minitransformer.training.loop import TrainConfig, train, train_step
from minitransformer.training.tasks import LanguageModelTask
from strict_array import STRICT, TRANSFERS, StrictArray, StrictError, from_strict, to_strict

F32, F64 = np.float32, np.float64


def _normal(shape, seed=0, dtype=F32):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def _same(ref, dev, what=""):
    """dev is a StrictArray (or None like ref) with ref's dtype and exactly ref's numbers."""
    if ref is None:
        assert dev is None, what
        return
    assert isinstance(dev, StrictArray), f"{what}: got {type(dev).__name__}, not a device array"
    assert dev.dtype == ref.dtype, f"{what}: dtype {dev.dtype}, expected {ref.dtype}"
    np.testing.assert_array_equal(from_strict(dev), ref, err_msg=what)


def _twins(make):
    """The same module twice from one constructor: on NumPy, and moved to strict arrays."""
    ref, dev = make(), make()
    dev._map_params(to_strict)
    return ref, dev


def _module_round_trip(make, *inputs, dy_seed=1, **options):
    """forward + backward on both twins; compares outputs, input gradients, parameter gradients."""
    ref, dev = _twins(make)
    y = ref.forward(*inputs, **options)
    y_dev = dev.forward(*(to_strict(x) for x in inputs), **{k: to_strict(v) for k, v in options.items()})
    _same(y, y_dev, "forward")
    dy = _normal(y.shape, dy_seed, y.dtype)
    dx, dx_dev = ref.backward(dy), dev.backward(to_strict(dy))
    for i, (a, b) in enumerate(zip(dx if isinstance(dx, tuple) else (dx,),
                                   dx_dev if isinstance(dx_dev, tuple) else (dx_dev,))):
        _same(a, b, f"input gradient {i}")
    for (name, _, g), (_, _, g_dev) in zip(ref.parameters(), dev.parameters()):
        _same(g, g_dev, f"grad {name}")


# ------------------------------------------------------------------- the strict type
def test_the_strict_type_refuses_what_cupy_would_refuse():
    """The checker itself: each misuse the library must avoid raises here."""
    a = to_strict(_normal((2, 3)))
    with pytest.raises(StrictError, match="silent copy"):
        np.asarray(a)
    with pytest.raises(TypeError):
        np.exp(a)                                          # a NumPy ufunc on a device array
    with pytest.raises(StrictError, match="numpy.zeros_like"):
        np.zeros_like(a)
    with pytest.raises(StrictError, match="host numpy.ndarray"):
        a + np.ones(3, F32)                                # a host array in device arithmetic
    with pytest.raises(StrictError, match="NumPy float scalar"):
        a * np.float64(2.0)                                # promotes float32 on NumPy 2
    with pytest.raises(StrictError, match="hidden promotion"):
        a + to_strict(np.ones(3, F64))
    with pytest.raises(AttributeError, match="errstate"):
        get_xp(a).errstate                                 # NumPy-only: CuPy has no errstate
    assert get_xp(a) is STRICT and isinstance(a.sum(), StrictArray)   # 0-d, as on CuPy


# ------------------------------------------------------------------- layers, one by one
@pytest.mark.parametrize("dtype", [F32, F64])
def test_linear_and_norms(dtype):
    x = _normal((2, 3, 8), dtype=dtype)
    _module_round_trip(lambda: Linear(8, 6, rng=0, dtype=dtype), x)
    _module_round_trip(lambda: LayerNorm(8, dtype=dtype), x)
    _module_round_trip(lambda: RMSNorm(8, dtype=dtype), x)


@pytest.mark.parametrize("name", ACTIVATIONS)
@pytest.mark.parametrize("dtype", [F32, F64])
def test_activations(name, dtype):
    _module_round_trip(lambda: make_activation(name, dtype), _normal((2, 3, 8), 3, dtype) * 4)


def test_embedding_and_learned_positions():
    ids = np.random.default_rng(0).integers(0, 10, (2, 5))
    _module_round_trip(lambda: Embedding(10, 4, rng=0), ids)
    _module_round_trip(lambda: Embedding(300, 4, rng=0), ids * 29)   # V > 128: the sort path
    _module_round_trip(lambda: LearnedPositionEmbedding(8, 4, rng=0), 5)


def test_dropout_with_a_device_generator_makes_no_host_transfer():
    x = _normal((3, 4, 5))
    y, cache = dropout_forward(to_strict(x), 0.4, rng=STRICT.random.default_rng(0))
    before = TRANSFERS["host_to_device"]
    dx = dropout_backward(to_strict(x), cache)
    assert isinstance(y, StrictArray) and isinstance(dx, StrictArray) and y.dtype == F32
    assert TRANSFERS["host_to_device"] == before
    np.testing.assert_array_equal(from_strict(y) != 0, from_strict(cache.mask))   # kept entries


def test_dropout_module_with_its_numpy_generator():
    """A model's Dropout keeps a NumPy generator (checkpoints save its state); on a device
    its draws move over with one explicit asarray per call, which CuPy does the same way."""
    _module_round_trip(lambda: Dropout(0.3, rng=5), _normal((2, 3, 4)))


@pytest.mark.parametrize("axis", [-1, 1])
def test_softmax_pairs(axis):
    x = _normal((2, 5, 3))
    x[0, :, 0] = -np.inf                                   # a fully masked row along axis 1
    for forward, backward in ((softmax_forward, softmax_backward),
                              (log_softmax_forward, log_softmax_backward)):
        y, cache = forward(x, axis=axis)
        y_dev, cache_dev = forward(to_strict(x), axis=axis)
        _same(y, y_dev, forward.__name__)
        dy = _normal(x.shape, 1)
        _same(backward(dy, cache), backward(to_strict(dy), cache_dev), backward.__name__)


def test_attention_pair_with_mask_and_bias():
    q, k, v = _normal((2, 4, 3, 8), 0), _normal((2, 4, 5, 8), 1), _normal((2, 4, 5, 8), 2)
    bias = _normal((4, 3, 5), 3)
    mask = causal_mask(3, 5) & key_padding_mask(np.array([5, 2]), 5)
    out, cache = attention_forward(q, k, v, mask, bias)
    out_dev, cache_dev = attention_forward(*(to_strict(a) for a in (q, k, v, mask, bias)))
    _same(out, out_dev, "out")
    dout = _normal(out.shape, 4)
    for i, (a, b) in enumerate(zip(attention_backward(dout, cache),
                                   attention_backward(to_strict(dout), cache_dev))):
        _same(a, b, f"gradient {i}")


def test_repeat_kv_pair():
    x = _normal((2, 2, 5, 8))
    y, cache = repeat_kv_forward(x, 3)
    y_dev, cache_dev = repeat_kv_forward(to_strict(x), 3)
    _same(y, y_dev, "repeat_kv_forward")
    dy = _normal(y.shape, 1)
    _same(repeat_kv_backward(dy, cache), repeat_kv_backward(to_strict(dy), cache_dev), "repeat_kv_backward")


def test_cross_entropy_with_ignored_targets_and_smoothing():
    logits = _normal((2, 4, 7))
    targets = np.array([[1, 2, -100, 6], [0, -100, 3, 3]])
    loss, cache = cross_entropy_forward(logits, targets, smoothing=0.1)
    loss_dev, cache_dev = cross_entropy_forward(to_strict(logits), to_strict(targets), smoothing=0.1)
    _same(np.asarray(loss), loss_dev, "loss")
    _same(cross_entropy_backward(1.0, cache), cross_entropy_backward(1.0, cache_dev), "dlogits")


ATTENTION_VARIANTS = {
    "causal": dict(pattern=Causal()),
    "gqa+rope": dict(pattern=Causal(), n_kv_head=1, positions=RoPE()),
    "rope half": dict(pattern=Causal(), n_kv_head=2, positions=RoPE("half")),
    "alibi+window": dict(pattern=SlidingWindow(2), positions=ALiBi()),
    "bidirectional": dict(),
}


@pytest.mark.parametrize("variant", sorted(ATTENTION_VARIANTS))
def test_multi_head_attention(variant):
    options = ATTENTION_VARIANTS[variant]
    _module_round_trip(lambda: MultiHeadAttention(8, 4, rng=0, **options), _normal((2, 5, 8)))


def test_multi_head_attention_with_padding():
    padding = np.array([[True] * 5, [True, True, True, False, False]])
    _module_round_trip(lambda: MultiHeadAttention(8, 2, rng=0), _normal((2, 5, 8)), key_padding_mask=padding)


def test_cross_attention():
    ref, dev = _twins(lambda: MultiHeadAttention(8, 2, cross=True, rng=0))
    x, memory = _normal((2, 3, 8), 0), _normal((2, 4, 8), 1)
    _same(ref.forward(x, memory), dev.forward(to_strict(x), to_strict(memory)), "y")
    dy = _normal((2, 3, 8), 2)
    for a, b in zip(ref.backward(dy), dev.backward(to_strict(dy))):
        _same(a, b, "dx / dmemory")


def test_kv_cache_decoding_with_rope_and_alibi():
    """Incremental decoding: the cache buffers and the offset masks live on the device too."""
    for options in (dict(positions=RoPE(), pattern=Causal()), dict(positions=ALiBi(), pattern=SlidingWindow(3))):
        ref, dev = _twins(lambda: MultiHeadAttention(8, 2, rng=0, **options))
        x = _normal((2, 4, 8))
        cache, cache_dev = KVCache(), KVCache()
        for start, stop in ((0, 2), (2, 3), (3, 4)):
            _same(ref.forward(x[:, start:stop], kv_cache=cache),
                  dev.forward(to_strict(x[:, start:stop]), kv_cache=cache_dev), f"step {start}")


# ------------------------------------------------------------------- whole training steps
class _StrictTask:
    """A task whose batches arrive on the 'device' (the strict arrays)."""

    def __init__(self, forward, device_side: bool):
        self._forward, self.device_side = forward, device_side

    def forward(self, model, batch, device="cpu"):
        if self.device_side:
            batch = tuple(to_strict(a) for a in batch)
        return self._forward(model, batch)


def _two_steps(make_model, forward, batches, dtype):
    """Two train_step calls (AdamW, clipping at 1.0) on NumPy and on strict arrays; compares
    the losses and every parameter after each step."""
    cfg = TrainConfig(lr=1e-2, betas=(0.9, 0.99), weight_decay=0.1, grad_clip=1.0)
    ref, dev = _twins(make_model)
    opt = AdamW(ref.parameters(), cfg.lr, betas=cfg.betas, weight_decay=cfg.weight_decay)
    opt_dev = AdamW(dev.parameters(), cfg.lr, betas=cfg.betas, weight_decay=cfg.weight_decay)
    for batch in batches:
        loss = train_step(ref, _StrictTask(forward, False), batch, opt, cfg.lr, cfg)
        loss_dev = train_step(dev, _StrictTask(forward, True), batch, opt_dev, cfg.lr, cfg)
        assert loss == loss_dev
        for (name, p, _), (_, p_dev, _) in zip(ref.parameters(), dev.parameters()):
            _same(p, p_dev, name)
            assert p.dtype == dtype


SMALL = dict(vocab_size=11, block_size=6, n_layer=2, n_head=2, d_model=8, d_ff=16)
GPT_VARIANTS = [
    dict(),                                                         # GPT-2: pre-norm, tanh GELU, learned
    dict(norm="rmsnorm", activation="swiglu", position="rope", n_kv_head=1, window=3),
    dict(norm_position="post", activation="geglu", position="alibi", p_drop=0.2, tie_weights=False),
    dict(activation="relu", position="sinusoidal", p_drop=0.1),
    dict(position="shaw", relative_clip=2, n_kv_head=1),
    dict(position="t5", relative_buckets=6, relative_max_distance=4, window=3),
    dict(ffn="moe", n_experts=3, top_k=2, capacity_factor=0.7, activation="swiglu"),   # a mixture of experts
]


@pytest.mark.parametrize("options", GPT_VARIANTS)
@pytest.mark.parametrize("dtype", [F32, F64])
def test_gpt_training_steps(options, dtype):
    rng = np.random.default_rng(0)
    batches = [(rng.integers(0, 11, (2, 6)), rng.integers(0, 11, (2, 6))) for _ in range(2)]
    _two_steps(lambda: GPT(GPTConfig(**SMALL, **options), rng=0, dtype=dtype),
               lambda model, b: (model.forward(b[0]), b[1]), batches, dtype)


def test_gpt_generation_with_a_decoder_cache():
    ref, dev = _twins(lambda: GPT(GPTConfig(**SMALL, position="rope"), rng=0))
    ids = np.random.default_rng(1).integers(0, 11, (2, 5))
    cache, cache_dev = ref.new_cache(), dev.new_cache()
    for start, stop in ((0, 3), (3, 4), (4, 5)):
        _same(ref.forward(ids[:, start:stop], cache=cache),
              dev.forward(to_strict(ids[:, start:stop]), cache=cache_dev), f"logits {start}")


def test_encoder_mlm_training_steps():
    cfg = EncoderConfig(**SMALL, type_vocab_size=2, p_drop=0.1)
    rng = np.random.default_rng(0)
    mask = np.array([[1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 0, 0]])
    labels = np.where(rng.random((2, 6)) < 0.4, rng.integers(0, 11, (2, 6)), -100)
    batches = [(rng.integers(0, 11, (2, 6)), rng.integers(0, 2, (2, 6)), mask, labels)] * 2
    _two_steps(lambda: Encoder(cfg, rng=0),
               lambda model, b: (model.forward(b[0], b[1], b[2], head="mlm"), b[3]), batches, F32)


def test_seq2seq_training_steps():
    cfg = Seq2SeqConfig(**SMALL, p_drop=0.1)
    rng = np.random.default_rng(0)
    src = np.array([[3, 4, 5, 6, 0, 0], [7, 8, 9, 10, 3, 4]])             # 0 = padding
    tgt = rng.integers(1, 11, (2, 5))
    batches = [(src, tgt[:, :-1], tgt[:, 1:])] * 2
    _two_steps(lambda: Seq2Seq(cfg, rng=0),
               lambda model, b: (model.forward(b[0], b[1]), b[2]), batches, F32)


def test_clipping_returns_a_python_float_on_device_arrays():
    grads = [to_strict(_normal((3, 4), 0) * 10), to_strict(_normal((5,), 1))]
    total = clip_grad_norm(grads, 1.0)
    assert isinstance(total, float) and total > 1.0
    assert all(isinstance(g, StrictArray) for g in grads)


class _StrictLMTask(_StrictTask):
    """_StrictTask with the batches and token count ``train`` draws."""

    def batch(self, split, rng):
        return rng.integers(0, 11, (2, 6)), rng.integers(0, 11, (2, 6))

    def tokens(self, batch):
        return batch[0].size


def test_train_runs_on_device_arrays():
    """train() with device arrays takes the steps NumPy takes: the same losses."""
    ref, dev = _twins(lambda: GPT(GPTConfig(**SMALL), rng=0))
    forward = lambda model, b: (model.forward(b[0]), b[1])             # noqa: E731
    cfg = TrainConfig(steps=3, eval_interval=100)
    quiet = lambda *args: None                                          # noqa: E731
    result = train(ref, _StrictLMTask(forward, False), cfg, log=quiet)
    result_dev = train(dev, _StrictLMTask(forward, True), cfg, device="cuda", log=quiet)
    assert [step for step, _ in result_dev.history] == [1, 2, 3]
    assert result_dev.history == result.history


def test_a_cupy_array_dispatches_to_cupy_even_without_the_array_api_protocol(monkeypatch):
    """CuPy 14's ndarray has no ``__array_namespace__`` (seen on an H100): get_xp must still
    answer the cupy module, or every xp.zeros(...) in a forward makes a host array."""
    from minitransformer import backend

    class FakeCupyArray:                      # no __array_namespace__, like cupy.ndarray there
        pass

    fake_cupy = type("FakeCupy", (), {"ndarray": FakeCupyArray})()
    monkeypatch.setattr(backend, "_cupy", fake_cupy)
    assert backend.get_xp(None, 1.0, FakeCupyArray()) is fake_cupy
    assert backend.get_xp(np.zeros(2)) is np


def test_the_speed_wing_keeps_its_numpy_kernels_off_a_gpu_and_fuses_adamw_there(monkeypatch):
    """The wing's kernel twins are NumPy kernels (CuPy has no fmax.reduce, for one): fast.train
    on a GPU runs the plain forms, with the fused AdamW; on the CPU the twins and plain AdamW."""
    from minitransformer import fast
    from minitransformer.fast import trainer
    from minitransformer.fast.cuda_adamw import FusedAdamW
    seen = {}
    monkeypatch.setattr(trainer, "plain_train", lambda model, task, cfg, *, optimizer, device, **kw:
                        seen.setdefault(device, (fast.is_enabled(), type(optimizer))))
    model = GPT(GPTConfig(**SMALL), rng=0)
    task = LanguageModelTask(np.arange(400) % SMALL["vocab_size"], np.arange(100) % SMALL["vocab_size"],
                             block_size=6, batch_size=2)
    for device in ("cuda", "cpu"):
        trainer.train(model, task, TrainConfig(steps=1), device=device, data_parallel=1, malloc=False,
                      log=lambda *a: None)
    assert seen["cuda"] == (False, FusedAdamW) and seen["cpu"][0] is True
    assert seen["cpu"][1] is not FusedAdamW and not fast.is_enabled()          # off again after the run


# ------------------------------------------------------------------- waits for the device
def _syncs_of_one_step(n_layer):
    """Copies to the host (float/int/bool/item/tolist of a device array) in one GPT train_step."""
    model = GPT(GPTConfig(**{**SMALL, "n_layer": n_layer}), rng=0)
    model._map_params(to_strict)
    cfg = TrainConfig()
    opt = AdamW(model.parameters(), cfg.lr)
    task = _StrictTask(lambda m, b: (m.forward(b[0]), b[1]), device_side=True)
    rng = np.random.default_rng(0)
    batch = rng.integers(0, 11, (2, 6)), rng.integers(0, 11, (2, 6))
    train_step(model, task, batch, opt, cfg.lr, cfg)                   # the first step creates AdamW's state
    before = TRANSFERS["device_to_host"]
    train_step(model, task, batch, opt, cfg.lr, cfg)
    return TRANSFERS["device_to_host"] - before


def test_a_training_step_waits_for_the_device_a_few_times_not_once_per_parameter():
    """Each copy to the host makes the CPU wait for the GPU's queue. Per step, at most:
    the ids' range (one per embedding check, two checks), the targets' range, the count
    of kept targets, the loss, the global gradient norm (one number for all arrays), the
    weights' finiteness: 7; and, where the fast LayerNorm twin runs, one per LayerNorm
    forward (its overflow test of the statistics): 2L + 1. Not one per parameter array
    (2 + 12 per block here)."""
    for n_layer in (1, 3):
        assert _syncs_of_one_step(n_layer) <= 7 + 2 * n_layer + 1


def test_the_strict_type_has_only_cupys_ufunc_reductions():
    a = to_strict(_normal((2, 3)))
    xp = get_xp(a)
    with pytest.raises(StrictError, match="fmax.reduce"):
        xp.fmax.reduce(a, axis=-1)                         # NotImplementedError on CuPy
    assert from_strict(xp.add.reduce(a, axis=-1)).shape == (2,)
