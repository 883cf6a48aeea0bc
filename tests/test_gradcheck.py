"""The gradient checker itself: its absolute floor for tiny gradients, and that it still catches a bug."""
import numpy as np

from minitransformer.gradcheck import DEFAULT_ATOL, check_pair


def _tiny_forward(x, y):
    return 1e-13 * x + y, None          # y (1e-3) puts round-off of ~1e-13 into the numerical dL/dx


def _tiny_backward(g, cache):
    return (1e-13 * g,)


def test_tiny_gradients_are_ok_under_the_absolute_floor():
    rng = np.random.default_rng(0)
    inputs = {"x": rng.normal(size=(4, 5)), "y": 1e-3 * rng.normal(size=(4, 5))}
    relative_only = check_pair(_tiny_forward, _tiny_backward, inputs, wrt=["x"], atol=0.0)
    assert not relative_only.ok and relative_only.max_rel_error > 1e-3      # round-off as large as the gradient
    floored = check_pair(_tiny_forward, _tiny_backward, inputs, wrt=["x"])
    assert floored.ok and floored.rows[0].max_abs_error < DEFAULT_ATOL
    assert "or max abs err <= 1.0e-10" in str(floored)


def test_a_wrong_backward_is_still_not_ok():
    rng = np.random.default_rng(0)
    inputs = {"x": rng.normal(size=(4, 5))}
    wrong = check_pair(lambda x: (x * x, x), lambda g, x: (g * x,), inputs)     # 2 g x is right
    assert not wrong.ok and "NOT OK" in str(wrong)
