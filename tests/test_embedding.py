"""Embedding: the lookup, dW with repeated ids (both scatter strategies against a
plain loop, and by gradient check), dtype, errors."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from minitransformer.functional import embedding as emb
from minitransformer.functional.embedding import embedding_backward, embedding_forward
from minitransformer.gradcheck import check_module, check_pair
from minitransformer.layers.embedding import Embedding
from strategies import integer_ids, normal_array, seeds, shapes

TOL = 1e-7  # float64 central differences land near 1e-9 for a correct backward, near 1 for a bug

# Both sides of the threshold: V ≤ 128 takes the one-hot product, V > 128 the sort.
VOCAB_SIZES = [1, 3, 7, emb.ONE_HOT_MAX_V, emb.ONE_HOT_MAX_V + 1, 300]
vocab_sizes = st.sampled_from(VOCAB_SIZES)


def _loop_dW(ids, dout, V):
    """The definition, one position at a time: dW[ids_n] += dout_n."""
    dW = np.zeros((V, dout.shape[-1]))
    for n, i in enumerate(ids.reshape(-1)):
        dW[i] += dout.reshape(-1, dout.shape[-1])[n]
    return dW


@pytest.mark.parametrize("V", VOCAB_SIZES)           # both sides of the threshold for sure
@settings(max_examples=4)
@given(lead=shapes(min_dims=1, max_dims=3, max_side=6), C=st.integers(1, 4), seed=seeds)
def test_embedding_pair_gradient_with_repeated_ids(V, lead, C, seed):
    # Ids from a few distinct values, so repeats are the rule, not the exception.
    ids = integer_ids(seed, lead, min(V, 4)) * (V // min(V, 4))
    inputs = {"ids": ids, "W": normal_array(seed + 1, (V, C))}
    result = check_pair(embedding_forward, embedding_backward, inputs, wrt=("W",), seed=seed,
                        tol=TOL, max_coords=1500)   # every coordinate of W, zero rows included
    assert result.ok, str(result)


@given(V=st.sampled_from([5, 200]), seed=seeds)
def test_embedding_module_gradients_and_accumulation(V, seed):
    layer = Embedding(V, 3, rng=seed, init_std=1.0).astype(np.float64)
    ids = integer_ids(seed, (2, 5), 4)                       # ids < 4: repeated
    result = check_module(layer, ids, seed=seed, tol=TOL)
    assert result.ok, str(result)
    dout = normal_array(seed + 1, (2, 5, 3))
    layer.zero_grad()
    layer.forward(ids); assert layer.backward(dout) is None
    layer.forward(ids); layer.backward(dout)
    np.testing.assert_allclose(layer.grads["W"], 2 * _loop_dW(ids, dout, V), rtol=1e-12, atol=1e-15)


@given(lead=shapes(min_dims=0, max_dims=3, max_side=8), V=vocab_sizes, seed=seeds)
def test_lookup_and_both_scatters_match_the_definition(lead, V, seed):
    ids, W = integer_ids(seed, lead, V), normal_array(seed + 1, (V, 3))
    out, cache = embedding_forward(ids, W)
    assert out.shape == lead + (3,)
    for index in np.ndindex(*lead):
        np.testing.assert_array_equal(out[index], W[ids[index]])
    dout = normal_array(seed + 2, out.shape)
    expected = _loop_dW(ids, dout, V)
    np.testing.assert_allclose(embedding_backward(dout, cache), expected, rtol=1e-12, atol=1e-15)
    ids_flat, dout2 = ids.reshape(-1), dout.reshape(-1, 3)
    np.testing.assert_allclose(emb._one_hot_scatter(ids_flat, dout2, V), expected, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(emb._sorted_scatter(ids_flat, dout2, V), expected, rtol=1e-12, atol=1e-15)


def test_large_vocabulary_takes_the_sort_and_stays_exact():
    V, ids = 30522, np.array([[5, 30521, 5], [0, 5, 30521]])
    dout = normal_array(0, (2, 3, 2))
    _, cache = embedding_forward(ids, np.zeros((V, 2)))
    dW = embedding_backward(dout, cache)
    np.testing.assert_allclose(dW[5], dout[0, 0] + dout[0, 2] + dout[1, 1], rtol=1e-15)
    np.testing.assert_allclose(dW[30521], dout[0, 1] + dout[1, 2], rtol=1e-15)
    assert np.count_nonzero(np.abs(dW).sum(axis=1)) == 3


def test_float32_in_float32_out():
    W, ids = normal_array(0, (10, 4), dtype=np.float32), np.array([[1, 2, 2]], dtype=np.int32)
    out, cache = embedding_forward(ids, W)
    assert out.dtype == np.float32
    assert embedding_backward(out, cache).dtype == np.float32
    assert Embedding(300, 4, rng=0).forward(ids).dtype == np.float32
    # The same ids with V = 300 take the sorted scatter: float32 there too.
    assert embedding_backward(np.ones((1, 3, 4), np.float32), cache._replace(vocab_size=300)).dtype == np.float32


def test_errors_name_the_argument():
    W = np.zeros((5, 3))
    with pytest.raises(TypeError, match=r"ids: expected an integer array of token ids, got float64"):
        embedding_forward(np.array([1.0, 2.0]), W)
    with pytest.raises(TypeError, match=r"ids: expected an integer array"):
        embedding_forward(np.array([True]), W)
    with pytest.raises(ValueError, match=r"ids: expected ids in \[0, 5\) .*got values in \[0, 5\]"):
        embedding_forward(np.array([0, 5]), W)
    with pytest.raises(ValueError, match=r"ids: expected ids in \[0, 5\) .*got values in \[-1, 2\]"):
        embedding_forward(np.array([-1, 2]), W)
    with pytest.raises(ValueError, match=r"W: expected 2 dimensions \(V, C\)"):
        embedding_forward(np.array([0]), np.zeros(5))
    with pytest.raises(TypeError, match=r"W: expected a floating point array"):
        embedding_forward(np.array([0]), np.zeros((5, 3), np.int64))
    with pytest.raises(ValueError, match=r"vocab_size: expected an integer in \[1"):
        Embedding(0, 3)


def test_backward_without_forward_is_a_clear_error():
    with pytest.raises(RuntimeError, match="without a pending"):
        Embedding(4, 3, rng=0).backward(np.zeros((1, 3), np.float32))
