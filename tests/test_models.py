"""Whole models: gradient checks over the variant combinations, tying, determinism, errors.

Tolerance 1e-6 (the project's bar for whole models): float64 central differences
through a few layers land near 1e-8 for a correct backward; a wrong one near 1.
"""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from minitransformer.layers.activation import ACTIVATIONS
from minitransformer.gradcheck import check_module
from minitransformer.models import GPT, Encoder, EncoderConfig, GPTConfig, Seq2Seq, Seq2SeqConfig
from minitransformer.optim import AdamW
from minitransformer.functional.cross_entropy import cross_entropy_backward, cross_entropy_forward
from strategies import seeds

TOL = 1e-6
F64 = np.float64

CHOICES = {
    "position": ["learned", "sinusoidal", "rope", "alibi", "shaw", "t5", "none"],
    "activation": list(ACTIVATIONS),
    "norm": ["layernorm", "rmsnorm"],
    "norm_position": ["pre", "post"],
    "n_kv_head": [None, 1, 2],
}
# The "every variant" tests take every value of every choice for sure: 7 cases, one per
# position, cycling through the other lists (the norm and its position: all 4 pairs). Left
# to the draws, a few derandomized examples never drew some values at all (an audit of the
# draws found 'silu' and 't5' never drawn for GPT, 'gelu', 'silu', 'alibi', 'rope' and
# 'none' never for Seq2Seq).
EVERY_VARIANT = [{"position": position,
                  "activation": CHOICES["activation"][i % 6],
                  "norm": CHOICES["norm"][i % 2],
                  "norm_position": CHOICES["norm_position"][(i // 2) % 2],
                  "n_kv_head": CHOICES["n_kv_head"][i % 3]} for i, position in enumerate(CHOICES["position"])]
_variant_id = lambda v: "-".join(str(v[k]) for k in ("position", "activation", "norm", "norm_position", "n_kv_head"))  # noqa: E731
# init_std 0.4, not the training default 0.02: with tiny weights the attention is
# nearly uniform, the Q/K gradients are ~1e-4, and float64 round-off in the
# objective (~1e-9) would read as a 1e-5 relative error. Larger weights make the
# check well conditioned, so it measures the backward and not the noise.
TINY = dict(vocab_size=7, block_size=6, n_layer=2, n_head=2, d_model=8, d_ff=12, init_std=0.4)


@pytest.mark.parametrize("v", EVERY_VARIANT, ids=_variant_id)
@settings(max_examples=2)
@given(tie=st.booleans(), p_drop=st.sampled_from([0.0, 0.2]), seed=seeds)
def test_gpt_gradients_every_variant(v, tie, p_drop, seed):
    model = GPT(GPTConfig(**TINY, **v, tie_weights=tie, p_drop=p_drop), rng=seed % 1000, dtype=F64)
    ids = np.random.default_rng(seed).integers(0, 7, (2, 5))
    result = check_module(model, ids, seed=seed, max_coords=12, tol=TOL)
    assert result.ok, str(result)


@pytest.mark.parametrize("v", EVERY_VARIANT, ids=_variant_id)
@settings(max_examples=1)
@given(types=st.sampled_from([0, 2]), p_drop=st.sampled_from([0.0, 0.2]), seed=seeds)
def test_encoder_gradients_every_variant_and_head(v, types, p_drop, seed):
    cfg = EncoderConfig(**TINY, **v, type_vocab_size=types, n_classes=3, p_drop=p_drop)
    model = Encoder(cfg, rng=seed % 1000, dtype=F64)
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, 7, (2, 5))
    mask = np.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])
    for head in ("mlm", "cls", None):
        result = check_module(model, ids, None, mask, head, seed=seed, max_coords=8, tol=TOL)
        assert result.ok, f"head={head}\n{result}"


@pytest.mark.parametrize("v", EVERY_VARIANT, ids=_variant_id)
@settings(max_examples=1)
@given(shared=st.booleans(), p_drop=st.sampled_from([0.0, 0.2]), seed=seeds)
def test_seq2seq_gradients_every_variant(v, shared, p_drop, seed):
    cfg = Seq2SeqConfig(**TINY, **v, shared_embeddings=shared, p_drop=p_drop,
                        src_vocab_size=None if shared else 9)
    model = Seq2Seq(cfg, rng=seed % 1000, dtype=F64)
    rng = np.random.default_rng(seed)
    src = rng.integers(1, 7, (2, 4))
    src[1, 3] = 0                                              # a padded source position
    tgt = rng.integers(0, 7, (2, 5))
    result = check_module(model, src, tgt, seed=seed, max_coords=8, tol=TOL)
    assert result.ok, str(result)


def test_tied_gradient_is_the_sum_of_both_paths():
    tied = GPT(GPTConfig(**TINY, tie_weights=True), rng=0, dtype=F64)
    untied = GPT(GPTConfig(**TINY, tie_weights=False), rng=0, dtype=F64)
    untied.head.params["W"][...] = untied.embed.tok.W           # same values, separate arrays
    ids = np.random.default_rng(0).integers(0, 7, (2, 5))
    g = np.random.default_rng(1).standard_normal((2, 5, 7))
    for m in (tied, untied):
        m.forward(ids)
        m.backward(g)
    np.testing.assert_allclose(tied.embed.tok.grads["W"],
                               untied.embed.tok.grads["W"] + untied.head.grads["W"], rtol=1e-12, atol=1e-15)
    assert tied.head.W is tied.embed.tok.W
    assert sum(1 for name, _, _ in tied.parameters() if name.endswith("tok.W") or name == "head.W") == 1


def _five_steps(seed):
    model = GPT(GPTConfig(**TINY, p_drop=0.1), rng=seed, dtype=F64)
    opt = AdamW(model.parameters(), 1e-2)
    rng = np.random.default_rng(seed)
    losses = []
    for _ in range(5):
        ids = rng.integers(0, 7, (3, 6))
        logits = model.forward(ids[:, :-1])
        loss, cache = cross_entropy_forward(logits, ids[:, 1:])
        model.backward(cross_entropy_backward(1.0, cache))
        opt.step()
        model.zero_grad()
        losses.append(float(loss))
    return losses


def test_five_optimizer_steps_are_deterministic():
    first, second = _five_steps(3), _five_steps(3)
    assert first == second
    assert first[-1] < first[0]                                 # and it learns something


def test_models_keep_float32():
    model = GPT(GPTConfig(**TINY), rng=0)
    logits = model.forward(np.zeros((1, 4), dtype=np.int64))
    assert logits.dtype == np.float32
    model.backward(np.ones_like(logits))
    assert all(g.dtype == np.float32 for _, _, g in model.parameters())


def test_token_ids_are_validated_at_the_entrance():
    model = GPT(GPTConfig(**TINY), rng=0)
    with pytest.raises(ValueError, match="ids: expected ids in \\[0, 7\\)"):
        model.forward(np.array([[1, 7]]))
    with pytest.raises(TypeError, match="ids: expected an integer array"):
        model.forward(np.array([[1.0, 2.0]]))
    with pytest.raises(ValueError, match="block_size=6"):
        model.forward(np.zeros((1, 7), dtype=np.int64))
    with pytest.raises(ValueError, match="ids: expected 2 dimensions"):
        model.forward(np.zeros(3, dtype=np.int64))


@pytest.mark.parametrize("field, value, message", [
    ("n_head", 3, "d_model: expected a multiple of n_head"),
    ("norm", "batchnorm", "norm: expected one of"),
    ("activation", "tanh", "activation: expected one of"),
    ("position", "absolute", "position: expected one of"),
    ("n_kv_head", 3, "n_kv_head: expected a divisor"),
    ("p_drop", 1.0, "p_drop: expected a probability"),
    ("n_layer", 0, r"n_layer: expected an integer in \[1, inf\]"),
])
def test_config_errors_name_the_field(field, value, message):
    with pytest.raises(ValueError, match=message):
        GPTConfig(**{**TINY, field: value})


def test_release_caches_frees_every_module_below():
    """After release_caches no module keeps a cache, so a backward is a clear error, not stale math."""
    model = GPT(GPTConfig(vocab_size=11, block_size=6, n_layer=2, n_head=2, d_model=8), rng=0)
    logits = model.forward(np.zeros((2, 6), dtype=np.int64))
    assert any(m._cache is not None for _, m in model.named_modules())
    model.release_caches()
    assert all(m._cache is None for _, m in model.named_modules())
    with pytest.raises(RuntimeError, match="without a pending"):
        model.backward(np.ones_like(logits))


# ------------------------------------------------ activation recomputation (set_recompute)
def _step_grads(model, *inputs):
    """Loss and every gradient of one forward/backward with a cross-entropy on random targets."""
    logits = model.forward(*inputs)
    targets = np.random.default_rng(5).integers(0, logits.shape[-1], logits.shape[:-1])
    loss, cache = cross_entropy_forward(logits, targets)
    model.backward(cross_entropy_backward(1.0, cache))
    grads = {name: g.copy() for name, _, g in model.parameters()}
    model.zero_grad()
    return float(loss), grads


def _families(p_drop, dtype):
    """(name, build(), inputs) for GPT, the BERT-like encoder (MLM head) and the encoder-decoder."""
    rng = np.random.default_rng(2)
    src = rng.integers(1, 7, (2, 4))
    src[1, 3] = 0
    return [
        ("gpt", lambda: GPT(GPTConfig(**TINY, p_drop=p_drop), rng=1, dtype=dtype),
         (rng.integers(0, 7, (2, 5)),)),
        ("encoder", lambda: Encoder(EncoderConfig(**TINY, p_drop=p_drop), rng=1, dtype=dtype),
         (rng.integers(0, 7, (2, 5)), None, None, "mlm")),
        ("seq2seq", lambda: Seq2Seq(Seq2SeqConfig(**TINY, p_drop=p_drop), rng=1, dtype=dtype),
         (src, rng.integers(0, 7, (2, 5)))),
    ]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_recompute_gives_the_same_loss_gradients_and_dropout_stream(dtype):
    """Recomputed blocks replay the same dropout masks: the same numbers as stored caches, two
    steps in a row (the dropout generators end where they would have), every family."""
    for name, build, inputs in _families(0.2, dtype):
        plain, recomputed = build(), build()
        from minitransformer.layers import set_recompute
        assert set_recompute(recomputed) == (4 if name == "seq2seq" else 2)
        for _ in range(2):
            loss_plain, grads_plain = _step_grads(plain, *inputs)
            loss_re, grads_re = _step_grads(recomputed, *inputs)
            assert loss_re == loss_plain, name
            for key in grads_plain:
                np.testing.assert_array_equal(grads_re[key], grads_plain[key], err_msg=f"{name} {key}")


def test_recompute_keeps_only_the_block_inputs_between_forward_and_backward():
    from minitransformer.layers import set_recompute
    model = GPT(GPTConfig(**TINY), rng=0)
    set_recompute(model)
    logits = model.forward(np.zeros((2, 6), dtype=np.int64))
    for block in model.blocks:
        assert all(m._cache is None for _, m in block.named_modules() if m is not block)
        assert block._cache.args[0].shape == (2, 6, 8)             # its input x (B, T, C)
    model.backward(np.ones_like(logits))
    assert all(m._cache is None for _, m in model.named_modules())
    with pytest.raises(RuntimeError, match="without a pending"):
        model.backward(np.ones_like(logits))                      # one backward per forward, as ever
    model.eval()                                                  # eval: no recomputation, nothing kept
    model.forward(np.zeros((2, 6), dtype=np.int64))
    assert all(not hasattr(block._cache, "args") for block in model.blocks)
    set_recompute(model, False)
    model.train()
    model.forward(np.zeros((2, 6), dtype=np.int64))
    assert model.blocks[0].attn.sublayer._cache is not None       # off again: caches are stored
    with pytest.raises(TypeError, match="on: expected True or False"):
        set_recompute(model, "yes")


@pytest.mark.parametrize("v", EVERY_VARIANT, ids=_variant_id)
@settings(max_examples=1)
@given(p_drop=st.sampled_from([0.0, 0.2]), seed=seeds)
def test_gpt_gradients_with_recompute(v, p_drop, seed):
    from minitransformer.layers import set_recompute
    model = GPT(GPTConfig(**TINY, **v, p_drop=p_drop), rng=seed % 1000, dtype=F64)
    set_recompute(model)
    ids = np.random.default_rng(seed).integers(0, 7, (2, 5))
    result = check_module(model, ids, seed=seed, max_coords=12, tol=TOL)
    assert result.ok, str(result)


def test_a_float32_training_step_keeps_every_cache_gradient_and_state_in_float32():
    """No float64 promotion on the fast path: every floating array the forward caches (walked
    through each Module's cache), the logits, every gradient and the AdamW state stay float32."""
    from minitransformer.training.loop import TrainConfig, make_optimizer

    def floating_arrays(obj, seen):
        if id(obj) in seen:
            return
        seen.add(id(obj))
        if isinstance(obj, np.ndarray):
            if obj.dtype.kind == "f":
                yield obj
        elif isinstance(obj, (tuple, list)):
            for item in obj:
                yield from floating_arrays(item, seen)
        elif isinstance(obj, dict):
            for item in obj.values():
                yield from floating_arrays(item, seen)

    for activation in ("gelu_tanh", "gelu", "swiglu"):
        model = GPT(GPTConfig(vocab_size=11, block_size=8, n_layer=2, n_head=2, d_model=16,
                              activation=activation, p_drop=0.1), rng=0)
        ids = np.random.default_rng(0).integers(0, 11, (3, 8))
        logits = model.forward(ids)
        cached = [a for _, m in model.named_modules() for a in floating_arrays(m._cache, set())]
        assert len(cached) > 20 and {a.dtype for a in cached} == {np.dtype(np.float32)}, activation
        loss, cache = cross_entropy_forward(logits, ids)
        assert logits.dtype == loss.dtype == np.float32
        model.backward(cross_entropy_backward(1.0, cache))
        opt = make_optimizer(model, TrainConfig())
        opt.step(1e-3)
        arrays = [p for _, p, _ in opt.params] + [g for _, _, g in opt.params]
        arrays += [a for buffers in opt.state.values() for a in buffers.values()]
        assert {a.dtype for a in arrays} == {np.dtype(np.float32)}, activation
