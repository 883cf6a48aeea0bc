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


# ------------------------------------------------------------------ the math under it: gradcheck/numerical.py
def test_central_differences_give_the_closed_form_gradient_and_leave_x_as_it_was():
    """f(x) = sin(x) ⊙ x², L = Σ f ⊙ df: dL/dx = df ⊙ (x² cos x + 2x sin x), to ~1e-10 at h = 1e-5
    (truncation O(h²), round-off O(eps/h)); coords: those entries only, 0 elsewhere."""
    from minitransformer.gradcheck.numerical import numerical_gradient
    rng = np.random.default_rng(0)
    x, df = rng.normal(size=(3, 4)), rng.normal(size=(3, 4))
    before = x.copy()
    dx = numerical_gradient(lambda v: np.sin(v) * v ** 2, x, df, h=1e-5)
    exact = df * (x ** 2 * np.cos(x) + 2 * x * np.sin(x))
    assert np.abs(dx - exact).max() < 1e-8 * np.abs(exact).max()
    assert np.array_equal(x, before)                                    # put back exactly
    some = numerical_gradient(lambda v: np.sin(v) * v ** 2, x, df, h=1e-5, coords=[0, 5, 11])
    assert np.allclose(some.reshape(-1)[[0, 5, 11]], exact.reshape(-1)[[0, 5, 11]], rtol=1e-7)
    assert not np.delete(some.reshape(-1), [0, 5, 11]).any()
    total = numerical_gradient(lambda v: float(np.sum(v ** 3)), x, 0.5, h=1e-5)   # f a number, df a number
    assert np.allclose(total, 0.5 * 3 * x ** 2, rtol=1e-7)


def test_the_relative_error_is_per_tensor_over_the_larger_scale():
    from minitransformer.gradcheck.numerical import relative_error
    a = np.array([[1.0, -4.0], [1e-12, 2.0]])
    n = a + np.array([[0.0, 0.0], [1e-9, -0.5]])
    assert relative_error(a, n) == relative_error(n, a) == 0.5 / 4.0  # an entry near 0 does not inflate it
    assert relative_error(2 * a, a) == 0.5                            # the larger of the two scales divides
    assert relative_error(np.zeros(3), np.zeros(3)) == 0.0            # tiny keeps 0/0 at 0
    assert relative_error(np.zeros(0), np.zeros(0)) == 0.0


def test_the_checkers_work_with_central_differences_that_perturb_a_copy(monkeypatch):
    """numerical_gradient's contract: x + h e_i in place or in a copy. check_pair and check_module pass
    f the value it is given, and put a Module's parameters back: a checker written either way works."""
    import minitransformer.gradcheck as G
    from minitransformer.gradcheck import check_module
    from minitransformer.layers.linear import Linear

    def on_copies(f, x, df, h=1e-6, coords=None):
        dx = np.zeros(x.shape)
        for i in range(x.size) if coords is None else coords:
            plus, minus = x.copy(), x.copy()
            plus.reshape(-1)[i] += h
            minus.reshape(-1)[i] -= h
            dx.reshape(-1)[i] = float(np.sum((f(plus) - f(minus)) * df)) / (2 * h)
        return dx
    monkeypatch.setattr(G, "numerical_gradient", on_copies)
    rng = np.random.default_rng(1)
    layer = Linear(4, 3, rng=rng, dtype=np.float64)
    weights = {name: p.copy() for name, p, _ in layer.parameters()}
    assert check_module(layer, rng.normal(size=(2, 4))).ok
    assert all(np.array_equal(p, weights[name]) for name, p, _ in layer.parameters())
    inputs = {"x": rng.normal(size=(2, 5))}
    assert check_pair(lambda x: (x * x, x), lambda g, x: (2 * g * x,), inputs).ok
