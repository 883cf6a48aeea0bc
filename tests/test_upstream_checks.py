"""Every functional backward refuses an upstream gradient that is not the forward output's
shape (it would broadcast, or drop rows, silently) with an error naming the argument."""
import re

import numpy as np
import pytest

from minitransformer.fast.kernels import twin_of
from minitransformer.functional.dropout import dropout_backward, dropout_forward
from minitransformer.functional.embedding import embedding_backward, embedding_forward
from minitransformer.functional.linear import linear_backward, linear_forward
from minitransformer.functional.norm import (layernorm_backward, layernorm_forward, rmsnorm_backward,
                                             rmsnorm_forward)
from minitransformer.functional.rope import rope_backward, rope_forward
from minitransformer.functional.softmax import (log_softmax_backward, log_softmax_forward, softmax_backward,
                                                softmax_forward)

rng = np.random.default_rng(0)
x = rng.standard_normal((2, 3, 4))                              # (B, T, C)
g, b = np.ones(4), np.zeros(4)


def _pairs():
    """(name, backward, cache, argument name, a dout of the wrong shape)."""
    wide = np.zeros((2, 3, 5))
    broadcastable = np.zeros((1, 3, 4))
    ids = np.array([[1, 200, 3], [4, 5, 6]])
    yield "linear", linear_backward, linear_forward(x, np.ones((4, 5)))[1], "dy", np.zeros((2, 3, 1))
    yield "softmax", softmax_backward, softmax_forward(x)[1], "dy", broadcastable
    yield "softmax (fast)", twin_of(softmax_backward), softmax_forward(x)[1], "dy", broadcastable
    yield "log_softmax", log_softmax_backward, log_softmax_forward(x)[1], "dz", broadcastable
    yield "layernorm", layernorm_backward, layernorm_forward(x, g, b)[1], "dy", broadcastable
    yield "layernorm (fast)", twin_of(layernorm_backward), layernorm_forward(x, g, b)[1], "dy", wide
    yield "rmsnorm", rmsnorm_backward, rmsnorm_forward(x, g)[1], "dy", broadcastable
    yield "rmsnorm (fast)", twin_of(rmsnorm_backward), rmsnorm_forward(x, g)[1], "dy", broadcastable
    yield "embedding V > 128", embedding_backward, embedding_forward(ids, np.ones((256, 4)))[1], "dout", \
        np.zeros((2, 2, 4))
    yield "rope", rope_backward, rope_forward(x[None])[1], "dy", np.zeros((1, 2, 3, 6))
    yield "dropout", dropout_backward, dropout_forward(x, 0.5, np.random.default_rng(1))[1], "dy", broadcastable


@pytest.mark.parametrize("name, backward, cache, argument, dout", list(_pairs()), ids=[p[0] for p in _pairs()])
def test_backward_refuses_a_dout_of_another_shape(name, backward, cache, argument, dout):
    with pytest.raises(ValueError, match=rf"^{argument}: expected .*shape"):
        backward(dout, cache)


# ------------------------------------------ activations, gated units, attention, cross-entropy
from minitransformer.functional.activations import (gelu_backward, gelu_forward, relu_backward,  # noqa: E402
                                                    relu_forward, silu_backward, silu_forward)
from minitransformer.functional.attention import attention_backward, attention_forward  # noqa: E402
from minitransformer.functional.cross_entropy import (cross_entropy_backward,  # noqa: E402
                                                      cross_entropy_forward)
from minitransformer.functional.gated import (geglu_backward, geglu_forward, swiglu_backward,  # noqa: E402
                                              swiglu_forward)

x32 = x.astype(np.float32)
q = rng.standard_normal((1, 2, 3, 4)).astype(np.float32)       # (B, H, T, D)


def _typed_pairs():
    """(name, backward, cache, argument, a dout of the right shape), forward run in float32."""
    yield "gelu", gelu_backward, gelu_forward(x32)[1], "dy", x32
    yield "gelu tanh", gelu_backward, gelu_forward(x32, "tanh")[1], "dy", x32
    yield "gelu (fast)", twin_of(gelu_backward), twin_of(gelu_forward)(x32, "tanh")[1], "dy", x32
    yield "silu", silu_backward, silu_forward(x32)[1], "dy", x32
    yield "geglu", geglu_backward, geglu_forward(x32)[1], "dy", x32[..., :2]
    yield "swiglu", swiglu_backward, swiglu_forward(x32)[1], "dy", x32[..., :2]
    yield "attention", attention_backward, attention_forward(q, q, q)[1], "dout", q
    yield "attention (fast)", twin_of(attention_backward), twin_of(attention_forward)(q, q, q)[1], "dout", q


TYPED = list(_typed_pairs())


@pytest.mark.parametrize("name, backward, cache, argument, dout", TYPED, ids=[p[0] for p in TYPED])
def test_backward_refuses_a_dout_of_another_shape_or_dtype(name, backward, cache, argument, dout):
    with pytest.raises(ValueError, match=rf"^{argument}: expected shape {re.escape(str(dout.shape))} \(the forward output.s\)"):
        backward(dout[..., :1], cache)
    with pytest.raises(ValueError, match=rf"^{argument}: expected shape"):
        backward(dout[None], cache)                            # broadcastable: refused too
    with pytest.raises(TypeError, match=rf"^{argument}: expected dtype float32 \(the forward output's\), got float64"):
        backward(dout.astype(np.float64), cache)
    with pytest.raises(TypeError, match=rf"^{argument}: expected an array"):
        backward(dout.tolist(), cache)
    assert backward(dout, cache) is not None                   # the cache survived the refusals


@pytest.mark.parametrize("backward, forward", [(relu_backward, relu_forward),
                                               (dropout_backward, lambda a: dropout_forward(a, 0.5, rng))])
def test_backward_whose_cache_keeps_no_dtype_refuses_shape_and_non_float(backward, forward):
    cache = forward(x32)[1]
    with pytest.raises(ValueError, match=r"^dy: expected shape"):
        backward(x32[None], cache)
    with pytest.raises(TypeError, match=r"^dy: expected a floating point array, got int64"):
        backward(np.ones(x32.shape, np.int64), cache)


@pytest.mark.parametrize("make", ["ReLU", "GELU", "SiLU", "GEGLU", "SwiGLU", "Dropout"])
def test_activation_and_dropout_modules_check_dout_dtype(make):
    from minitransformer.layers import activation, dropout
    module = getattr(activation, make)() if make != "Dropout" else dropout.Dropout(0.5, rng=0)
    y = module.forward(x32)
    with pytest.raises(TypeError, match=r"^dy: expected dtype float32"):
        module.backward(y.astype(np.float64))
    with pytest.raises(ValueError, match=r"^dy: expected shape"):
        module.backward(y[None])
    assert module.backward(np.ones_like(y)).dtype == np.float32


def test_position_embedding_backward_checks_dp():
    from minitransformer.layers.positions import LearnedPositionEmbedding
    pos = LearnedPositionEmbedding(8, 4, rng=0)
    P = pos.forward(3)
    with pytest.raises(TypeError, match=r"^dP: expected dtype float32"):
        pos.backward(P.astype(np.float64))


@pytest.mark.parametrize("backward", [cross_entropy_backward, twin_of(cross_entropy_backward)])
def test_cross_entropy_backward_checks_dloss(backward):
    logits = rng.standard_normal((2, 3, 5)).astype(np.float32)
    cache = cross_entropy_forward(logits, np.ones((2, 3), np.int64))[1]
    with pytest.raises(ValueError, match=r"^dloss: expected a scalar \(shape \(\), the loss's\), got shape \(2,\)"):
        backward(np.ones(2), cache)
    for bad, err in [(None, TypeError), ("1", TypeError), (1j, TypeError), (np.array(1j), TypeError),
                     (True, TypeError), (float("nan"), ValueError), (float("inf"), ValueError)]:
        with pytest.raises(err, match=r"^dloss: expected"):
            backward(bad, cache)
    ok = [backward(d, cache) for d in (1, 1.0, np.float64(1.0), np.array(1.0, np.float32))]
    assert all(g.dtype == np.float32 and np.array_equal(g, ok[0]) for g in ok)


def test_rope_and_jacobian_softmax_backward_check_dtype():
    from minitransformer.functional.softmax import softmax_backward_jacobian
    cache = rope_forward(q)[1]
    with pytest.raises(TypeError, match=r"^dy: expected dtype float32"):
        rope_backward(q.astype(np.float64), cache)
    cache = softmax_forward(x32)[1]
    with pytest.raises(TypeError, match=r"^dy: expected dtype float32"):
        softmax_backward_jacobian(x, cache)
    with pytest.raises(ValueError, match=r"^dy: expected shape"):
        softmax_backward_jacobian(x32[None], cache)
