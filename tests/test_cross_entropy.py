"""Cross-entropy: gradient checks (ignored targets, label smoothing), the value
against a hand softmax, the smoothing formula, all-ignored batches, finiteness for
huge logits, dtype, errors."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

from minitransformer.functional.cross_entropy import cross_entropy_backward, cross_entropy_forward
from minitransformer.gradcheck import check_module, check_pair
from minitransformer.training.loss import CrossEntropyLoss
from strategies import big_scales, integer_ids, normal_array, seeds, shapes

TOL = 1e-7  # float64 central differences land near 1e-9 for a correct backward, near 1 for a bug

smoothings = st.sampled_from([0.0, 0.1, 0.5, 1.0])
# Logit scales for gradient checks. Not 1e-3: with ε = 1 the target q is uniform and
# tiny logits make p ≈ q, so the gradient (~1e-4) sinks under the round-off of a loss
# ≈ log V (1e-16 · log V / h ≈ 1e-10). Huge logits are the finiteness test's job.
logit_scales = st.sampled_from([0.1, 1.0, 3.0])


def _targets(seed, lead, V, ignore_index=-100, frac_ignored=0.3):
    """Random class indices with about frac_ignored of them set to ignore_index."""
    t = integer_ids(seed, lead, V)
    t[np.random.default_rng(seed + 1).random(lead) < frac_ignored] = ignore_index
    return t


def _hand_log_softmax(z):
    """log(exp(z) / Σ exp(z)) written out; for the modest logits of the value tests only."""
    e = np.exp(z)
    return np.log(e / e.sum(axis=-1, keepdims=True))


# ----------------------------------------------------------------- gradient checks
# V >= 2: with one class the loss is identically 0, and the checker would compare round-off.
# Step h = 1e-5 instead of 1e-6: the mean over N rows makes each gradient entry ~1/N
# while the loss stays ~log V, so round-off (1e-16 · log V / h) is what limits the check;
# log-sum-exp is smooth (O(1) third derivatives), so the larger step costs only ~h² = 1e-10.
@given(lead=shapes(min_dims=1, max_dims=3, max_side=3), V=st.integers(2, 6), smoothing=smoothings,
       scale=logit_scales, seed=seeds)
def test_cross_entropy_pair_gradients(lead, V, smoothing, scale, seed):
    inputs = {"logits": normal_array(seed + 1, lead + (V,), scale), "targets": _targets(seed + 2, lead, V)}
    result = check_pair(cross_entropy_forward, cross_entropy_backward, inputs, wrt=("logits",),
                        kwargs={"smoothing": smoothing}, seed=seed, tol=TOL, h=1e-5)
    assert result.ok, str(result)


@given(V=st.integers(2, 6), smoothing=smoothings, seed=seeds)
def test_cross_entropy_module_gradients(V, smoothing, seed):
    loss_fn = CrossEntropyLoss(ignore_index=0, smoothing=smoothing)   # class 0 doubles as padding
    result = check_module(loss_fn, normal_array(seed + 1, (2, 3, V)), integer_ids(seed + 2, (2, 3), V),
                          seed=seed, tol=TOL, h=1e-5)             # h: see the pair test above
    assert result.ok, str(result)


# ------------------------------------------------------------------ what it means
@given(lead=shapes(min_dims=1, max_dims=2), V=st.integers(1, 6), seed=seeds)
def test_loss_is_mean_of_minus_log_softmax_at_kept_targets(lead, V, seed):
    z, t = normal_array(seed, lead + (V,), 3.0), _targets(seed + 1, lead, V)
    kept = t != -100
    logp = _hand_log_softmax(z)
    expected = -np.mean(logp[kept, t[kept]]) if kept.any() else 0.0
    loss, _ = cross_entropy_forward(z, t)
    np.testing.assert_allclose(loss, expected, rtol=1e-12, atol=1e-15)


@given(V=st.integers(1, 6), smoothing=smoothings, seed=seeds)
def test_label_smoothing_is_cross_entropy_with_the_smoothed_target(V, smoothing, seed):
    # q = (1-ε) onehot(y) + ε/V and ℓ = -Σ_c q_c log p_c, averaged over the rows.
    z, t = normal_array(seed, (4, V)), integer_ids(seed + 1, (4,), V)
    q = (1 - smoothing) * np.eye(V)[t] + smoothing / V
    expected = np.mean(-(q * _hand_log_softmax(z)).sum(axis=-1))
    loss, cache = cross_entropy_forward(z, t, smoothing=smoothing)
    np.testing.assert_allclose(loss, expected, rtol=1e-12)
    # ... and the gradient is (softmax - q) / N.
    p = np.exp(_hand_log_softmax(z))
    np.testing.assert_allclose(cross_entropy_backward(1.0, cache), (p - q) / 4, rtol=1e-10, atol=1e-15)


def test_ignored_rows_get_zero_gradient_and_the_mean_skips_them():
    z, t = normal_array(0, (5, 4)), np.array([1, -100, 3, -100, 0])
    loss, cache = cross_entropy_forward(z, t, smoothing=0.2)
    loss_kept, _ = cross_entropy_forward(z[t != -100], t[t != -100], smoothing=0.2)
    np.testing.assert_allclose(loss, loss_kept, rtol=1e-14)
    dz = cross_entropy_backward(2.0, cache)
    np.testing.assert_array_equal(dz[t == -100], 0.0)
    np.testing.assert_allclose(dz[t != -100].sum(axis=-1), 0.0, atol=1e-15)  # p and q both sum to 1


@pytest.mark.parametrize("smoothing", [0.0, 0.3])
def test_all_ignored_batch_gives_zero_loss_and_zero_gradient(smoothing):
    z, t = normal_array(0, (2, 3, 5)), np.full((2, 3), -100)
    z[0, 0, 0] = -np.inf                                 # even a -inf logit on an ignored row: no NaN
    loss, cache = cross_entropy_forward(z, t, smoothing=smoothing)
    assert loss.shape == () and float(loss) == 0.0
    dz = cross_entropy_backward(1.0, cache)
    assert dz.shape == z.shape and np.all(dz == 0.0)


@given(scale=big_scales, dtype=st.sampled_from([np.float32, np.float64]), smoothing=smoothings, seed=seeds)
def test_finite_for_huge_logits(scale, dtype, smoothing, seed):
    z, t = normal_array(seed, (3, 4, 7), scale, dtype), integer_ids(seed + 1, (3, 4), 7)
    loss, cache = cross_entropy_forward(z, t, smoothing=smoothing)
    dz = cross_entropy_backward(1.0, cache)
    assert np.isfinite(loss) and np.all(np.isfinite(dz))
    assert loss.dtype == dtype and dz.dtype == dtype
    # The float32 loss agrees with the float64 one to float32 precision (relative 1e-5).
    loss64, _ = cross_entropy_forward(z.astype(np.float64), t, smoothing=smoothing)
    np.testing.assert_allclose(loss, loss64, rtol=1e-5)


def test_float32_in_float32_out_even_with_a_float64_dloss():
    z, t = normal_array(0, (2, 3, 5), dtype=np.float32), integer_ids(1, (2, 3), 5)
    loss, cache = cross_entropy_forward(z, t, smoothing=0.1)
    assert loss.dtype == np.float32 and loss.shape == ()
    assert cross_entropy_backward(np.float64(1.0), cache).dtype == np.float32
    loss_fn = CrossEntropyLoss()
    assert isinstance(loss_fn.forward(z, t), float)
    assert loss_fn.backward().dtype == np.float32


# -------------------------------------------------------------------------- errors
def test_errors_name_the_argument():
    z = np.zeros((2, 3, 5))
    with pytest.raises(TypeError, match=r"targets: expected an integer array of class indices, got float64"):
        cross_entropy_forward(z, np.zeros((2, 3)))
    with pytest.raises(ValueError, match=r"targets: expected shape \(2, 3\), got \(3, 2\)"):
        cross_entropy_forward(z, np.zeros((3, 2), np.int64))
    with pytest.raises(ValueError, match=r"targets: expected shape \(2, 3\), got \(2, 3, 5\)"):
        cross_entropy_forward(z, np.zeros((2, 3, 5), np.int64))
    with pytest.raises(ValueError, match=r"targets: expected class indices in \[0, 5\) or ignore_index -100, got 5"):
        cross_entropy_forward(z, np.array([[0, 1, 2], [3, 4, 5]]))
    with pytest.raises(ValueError, match=r"targets: .* got -1"):
        cross_entropy_forward(z, np.array([[0, 1, 2], [3, 4, -1]]))
    with pytest.raises(ValueError, match=r"logits: expected at least 1 dimensions"):
        cross_entropy_forward(np.float64(1.0), np.int64(0))
    with pytest.raises(TypeError, match=r"logits: expected a floating point array"):
        cross_entropy_forward(np.zeros((2, 5), np.int64), np.zeros(2, np.int64))
    with pytest.raises(ValueError, match=r"smoothing: expected a number in \[0.0, 1.0\]"):
        cross_entropy_forward(z, np.zeros((2, 3), np.int64), smoothing=1.5)
    with pytest.raises(TypeError, match=r"ignore_index: expected an integer"):
        CrossEntropyLoss(ignore_index=-100.0)


def test_backward_without_forward_is_a_clear_error():
    with pytest.raises(RuntimeError, match="without a pending"):
        CrossEntropyLoss().backward()


def test_targets_shape_error_says_where_the_expected_shape_comes_from():
    """Found by the fuzz tests: with a wrong logits shape the error named only targets."""
    with pytest.raises(ValueError, match=r"targets: expected shape \(2,\), got \(2, 3\) "
                                         r"\(expected: logits' shape \(2, 5\) without its last axis\)"):
        cross_entropy_forward(np.zeros((2, 5)), np.zeros((2, 3), np.int64))
