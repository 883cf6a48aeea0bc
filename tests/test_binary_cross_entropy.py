"""ELECTRA's replaced-token-detection loss: the binary cross-entropy pair (its gradient, its value
written out with the math module, padding, extreme logits) and the loss through an encoder's rtd head.

Expected values are computed here from the definition −y log σ − (1 − y) log(1 − σ) with the math
module, never with the code under test."""
import math

import numpy as np
import pytest
from hypothesis import given, strategies as st

from minitransformer.functional.binary_cross_entropy import (binary_cross_entropy_backward,
                                                             binary_cross_entropy_forward)
from minitransformer.gradcheck import check_pair
from minitransformer.models import Encoder, EncoderConfig
from strategies import integer_ids, normal_array, seeds

TOL = 1e-7  # float64 central differences land near 1e-9 for a correct backward, near 1 for a bug


@given(B=st.integers(1, 3), S=st.integers(1, 5), scale=st.sampled_from([0.1, 1.0, 5.0]), seed=seeds)
def test_pair_gradient_with_padding(B, S, scale, seed):
    rng = np.random.default_rng(seed)
    inputs = {"logits": normal_array(seed, (B, S), scale), "labels": rng.integers(0, 2, (B, S)),
              "mask": rng.random((B, S)) < 0.7}
    result = check_pair(binary_cross_entropy_forward, binary_cross_entropy_backward, inputs, seed=seed, tol=TOL)
    assert result.ok, str(result)


def test_the_loss_and_its_gradient_by_hand():
    z = np.array([[2.0, -1.0, 0.5], [0.0, 3.0, -2.5]])
    y = np.array([[1, 0, 0], [1, 1, 0]])
    mask = np.array([[True, True, True], [True, False, True]])     # one padding token
    sigma = lambda t: 1 / (1 + math.exp(-t))
    kept = [(z[b, s], y[b, s]) for b in range(2) for s in range(3) if mask[b, s]]
    expected = sum(-(yy * math.log(sigma(zz)) + (1 - yy) * math.log(1 - sigma(zz))) for zz, yy in kept) / 5
    loss, cache = binary_cross_entropy_forward(z, y, mask)
    assert loss.shape == () and loss.dtype == np.float64
    assert float(loss) == pytest.approx(expected, rel=1e-14)
    dz = binary_cross_entropy_backward(2.0, cache)
    for b in range(2):
        for s in range(3):
            want = 2.0 * (sigma(z[b, s]) - y[b, s]) / 5 if mask[b, s] else 0.0
            assert dz[b, s] == pytest.approx(want, rel=1e-14, abs=1e-16)
    same, _ = binary_cross_entropy_forward(z, y.astype(bool), mask)  # boolean labels mean the same
    assert float(same) == float(loss)


def test_extreme_logits_stay_finite_and_an_empty_batch_costs_nothing():
    z = np.array([1e4, -1e4, 1e4, -1e4], np.float32)
    loss, cache = binary_cross_entropy_forward(z, np.array([1, 0, 0, 1]))
    assert loss.dtype == np.float32 and float(loss) == pytest.approx((0 + 0 + 1e4 + 1e4) / 4, rel=1e-6)
    np.testing.assert_array_equal(binary_cross_entropy_backward(1.0, cache), np.array([0, 0, 1, -1]) / 4)
    none, cache = binary_cross_entropy_forward(z, np.array([1, 0, 0, 1]), np.zeros(4, bool))
    assert float(none) == 0.0 and not binary_cross_entropy_backward(1.0, cache).any()


def test_bad_labels_and_masks_name_the_argument():
    z = np.zeros((2, 3))
    with pytest.raises(ValueError, match="labels: expected 0/1"):
        binary_cross_entropy_forward(z, np.full((2, 3), 2))
    with pytest.raises(TypeError, match="labels: expected booleans or integers"):
        binary_cross_entropy_forward(z, np.zeros((2, 3)))
    with pytest.raises(ValueError, match=r"labels: expected shape \(2, 3\)"):
        binary_cross_entropy_forward(z, np.zeros((3, 2), int))
    with pytest.raises(TypeError, match="mask: expected a boolean array"):
        binary_cross_entropy_forward(z, np.zeros((2, 3), int), np.ones((2, 3)))
    with pytest.raises(TypeError, match="logits: expected a floating point array"):
        binary_cross_entropy_forward(np.zeros((2, 3), int), np.zeros((2, 3), int))
    _, cache = binary_cross_entropy_forward(z, np.zeros((2, 3), int))
    with pytest.raises(ValueError, match="dloss: expected a scalar"):
        binary_cross_entropy_backward(np.ones(2), cache)


def test_the_discriminator_loss_through_the_encoder_matches_a_central_difference():
    """Loss ∘ Encoder(head="rtd"): the analytic directional derivative along a random direction
    of every parameter against (L(θ + h d) − L(θ − h d)) / 2h, in float64."""
    config = EncoderConfig(vocab_size=11, block_size=6, n_layer=1, n_head=2, d_model=8, rtd_head=True, p_drop=0.0)
    model = Encoder(config, rng=0).astype(np.float64)
    ids, labels = integer_ids(1, (2, 6), 11), integer_ids(2, (2, 6), 2)
    padding = np.array([[1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 0, 0]])

    def loss_at():
        logits = model.forward(ids, attention_mask=padding, head="rtd")   # (B, S)
        return binary_cross_entropy_forward(logits, labels, padding.astype(bool))

    model.zero_grad()
    loss, cache = loss_at()
    model.backward(binary_cross_entropy_backward(1.0, cache))
    params = [(p, g.copy()) for _, p, g in model.parameters()]
    directions = [normal_array(k, p.shape) for k, (p, _) in enumerate(params)]
    analytic = sum(float((g * d).sum()) for (_, g), d in zip(params, directions))
    h, values = 1e-6, []
    for sign in (1, -1):
        for (p, _), d in zip(params, directions):
            p += sign * h * d
        values.append(float(loss_at()[0]))
        for (p, _), d in zip(params, directions):
            p -= sign * h * d
    model.release_caches()
    assert analytic == pytest.approx((values[0] - values[1]) / (2 * h), rel=1e-6)
