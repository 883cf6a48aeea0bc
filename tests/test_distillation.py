"""Distillation's soft-target loss τ² KL(softmax(z_t/τ) ‖ softmax(z_s/τ)): its gradient, the KL
by hand, the hard-label limit (a one-hot teacher at τ = 1 is the cross-entropy), what τ² does
to the gradient's size, and Hinton's high-temperature limit (matching logits)."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

from minitransformer.functional.cross_entropy import cross_entropy_forward
from minitransformer.functional.distillation import distillation_backward, distillation_forward
from minitransformer.gradcheck import check_pair
from strategies import normal_array, seeds, shapes

TOL = 1e-7  # float64 central differences land near 1e-9 for a correct backward, near 1 for a bug


@given(lead=shapes(min_dims=1, max_dims=3, max_side=4), V=st.integers(1, 6), tau=st.sampled_from([0.5, 1.0, 2.0, 8.0]),
       scale=st.sampled_from([0.1, 1.0, 5.0]), seed=seeds)
def test_distillation_gradient_for_the_student_logits(lead, V, tau, scale, seed):
    inputs = {"student_logits": normal_array(seed, lead + (V,), scale),
              "teacher_logits": normal_array(seed + 1, lead + (V,), scale)}
    # The objective carries τ² · log q terms, so the central difference's round-off is τ² times the
    # default floor (eps · τ² / h ≈ 1e-10 τ²): the absolute floor scales with it.
    result = check_pair(lambda **kw: distillation_forward(**kw, tau=tau), distillation_backward, inputs,
                        wrt=["student_logits"], seed=seed, tol=TOL, atol=1e-10 * max(1.0, tau ** 2))
    assert result.ok, str(result)


def test_the_loss_is_tau_squared_times_the_mean_kl_by_hand():
    z_s, z_t, tau = normal_array(0, (3, 5)), normal_array(1, (3, 5)), 3.0
    kl = []
    for n in range(3):
        q_t = np.exp(z_t[n] / tau) / np.exp(z_t[n] / tau).sum()
        q_s = np.exp(z_s[n] / tau) / np.exp(z_s[n] / tau).sum()
        kl.append(sum(q_t[v] * np.log(q_t[v] / q_s[v]) for v in range(5)))
    loss, _ = distillation_forward(z_s, z_t, tau)
    assert float(loss) == pytest.approx(tau ** 2 * np.mean(kl), rel=1e-13)
    assert float(distillation_forward(z_t, z_t, tau)[0]) == pytest.approx(0.0, abs=1e-15)   # the teacher itself
    assert float(loss) > 0


def test_a_one_hot_teacher_at_tau_1_is_the_cross_entropy():
    z_s = normal_array(2, (4, 6))
    targets = np.array([0, 5, 2, 2])
    z_t = np.full((4, 6), -1e4)
    z_t[np.arange(4), targets] = 0.0                                # softmax(z_t) is one-hot
    loss, _ = distillation_forward(z_s, z_t, 1.0)
    assert float(loss) == pytest.approx(float(cross_entropy_forward(z_s, targets)[0]), rel=1e-12)


def test_tau_squared_keeps_the_gradient_the_same_size_at_every_temperature():
    z_s, z_t = normal_array(3, (8, 10)), normal_array(4, (8, 10))
    z_s -= z_s.mean(axis=1, keepdims=True)
    z_t -= z_t.mean(axis=1, keepdims=True)
    norm = {tau: np.linalg.norm(distillation_backward(1.0, distillation_forward(z_s, z_t, tau)[1]))
            for tau in (5.0, 10.0, 20.0)}
    assert norm[10.0] / norm[5.0] == pytest.approx(1.0, abs=0.05)    # without τ²: 1/4
    assert norm[20.0] / norm[10.0] == pytest.approx(1.0, abs=0.02)
    # Hinton et al.'s limit: at a high temperature the gradient is (z_s - z_t) / (V N), matching logits
    dz = distillation_backward(1.0, distillation_forward(z_s, z_t, 1000.0)[1])
    np.testing.assert_allclose(dz, (z_s - z_t) / (10 * 8), rtol=2e-2, atol=1e-6)


def test_distillation_entrances_name_the_argument():
    z = np.zeros((2, 3))
    with pytest.raises(ValueError, match="teacher_logits: expected shape"):
        distillation_forward(z, np.zeros((2, 4)))
    with pytest.raises(TypeError, match="teacher_logits: expected dtype float64"):
        distillation_forward(z, np.zeros((2, 3), np.float32))
    with pytest.raises(ValueError, match=r"tau: expected a number in \(0.0, inf\)"):
        distillation_forward(z, z, tau=0.0)
    with pytest.raises(TypeError, match="student_logits: expected a floating point array"):
        distillation_forward(np.zeros((2, 3), int), z)
    with pytest.raises(ValueError, match="dloss: expected a scalar"):
        distillation_backward(np.ones(2), distillation_forward(z, z)[1])
