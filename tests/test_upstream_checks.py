"""Every functional backward refuses an upstream gradient that is not the forward output's
shape (it would broadcast, or drop rows, silently) with an error naming the argument."""
import numpy as np
import pytest

from minitransformer.functional._kernels import fast
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
    yield "softmax (fast)", fast(softmax_backward), softmax_forward(x)[1], "dy", broadcastable
    yield "log_softmax", log_softmax_backward, log_softmax_forward(x)[1], "dz", broadcastable
    yield "layernorm", layernorm_backward, layernorm_forward(x, g, b)[1], "dy", broadcastable
    yield "layernorm (fast)", fast(layernorm_backward), layernorm_forward(x, g, b)[1], "dy", wide
    yield "rmsnorm", rmsnorm_backward, rmsnorm_forward(x, g)[1], "dy", broadcastable
    yield "rmsnorm (fast)", fast(rmsnorm_backward), rmsnorm_forward(x, g)[1], "dy", broadcastable
    yield "embedding V > 128", embedding_backward, embedding_forward(ids, np.ones((256, 4)))[1], "dout", \
        np.zeros((2, 2, 4))
    yield "rope", rope_backward, rope_forward(x[None])[1], "dy", np.zeros((1, 2, 3, 6))
    yield "dropout", dropout_backward, dropout_forward(x, 0.5, np.random.default_rng(1))[1], "dy", broadcastable


@pytest.mark.parametrize("name, backward, cache, argument, dout", list(_pairs()), ids=[p[0] for p in _pairs()])
def test_backward_refuses_a_dout_of_another_shape(name, backward, cache, argument, dout):
    with pytest.raises(ValueError, match=rf"^{argument}: expected .*shape"):
        backward(dout, cache)
