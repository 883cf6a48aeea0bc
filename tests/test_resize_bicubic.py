"""The bicubic resize of a learned position table (DINO's mode='bicubic'): Keys' cubic convolution
with a = −0.75, worked by hand from the kernel's definition; the invariants (constants kept, the
identity at the same size, the corners with align_corners); overshoot where linear never does; the
row/column tables resized alone equal the bicubic resize of the whole grid, written out here."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

from minitransformer.functional.resize_positions import resize_grid_positions, resize_table
from minitransformer.models import ViT, ViTConfig
from strategies import normal_array, seeds

A = -0.75


def w(x):
    """Keys' kernel, by its definition (Keys 1981), a = −0.75."""
    x = abs(x)
    if x <= 1:
        return (A + 2) * x ** 3 - (A + 3) * x ** 2 + 1
    return A * x ** 3 - 5 * A * x ** 2 + 8 * A * x - 4 * A if x < 2 else 0.0


def test_a_one_hot_row_upsampled_twice_by_hand():
    E = np.eye(5)[:, 2:3]                                   # rows 0..4, only row 2 is 1
    out = resize_table(E, 9, mode="cubic")[:, 0]            # align_corners: u_i = i / 2
    assert w(0.5) == 0.59375 and w(1.5) == -0.09375         # the kernel at t = ½
    np.testing.assert_allclose(out, [0, w(1.5), 0, w(0.5), 1, w(0.5), 0, w(1.5), 0], atol=1e-15)


def test_without_align_corners_u_is_not_clipped_and_the_border_row_repeats():
    E = np.array([[0.0], [1.0], [0.0], [0.0]])
    out = resize_table(E, 8, mode="cubic", align_corners=False)[:, 0]
    u0 = 0.5 * 4 / 8 - 0.5                                  # −0.25: k = −1, t = 0.75; rows −2, −1 read row 0
    t = u0 - np.floor(u0)
    expected0 = w(1 + t) * 0 + w(t) * 0 + w(1 - t) * E[0, 0] + w(2 - t) * E[1, 0]
    assert out[0] == pytest.approx(expected0, abs=1e-15) and expected0 == pytest.approx(w(1.25))


@given(n=st.integers(1, 6), n_new=st.integers(1, 9), align_corners=st.booleans(), seed=seeds)
def test_constants_stay_and_the_same_size_is_the_identity(n, n_new, align_corners, seed):
    c = normal_array(seed, (1, 3))
    np.testing.assert_allclose(resize_table(np.repeat(c, n, axis=0), n_new, align_corners=align_corners,
                                            mode="cubic"), np.repeat(c, n_new, axis=0), rtol=1e-13)
    E = normal_array(seed + 1, (n, 3))
    np.testing.assert_allclose(resize_table(E, n, align_corners=align_corners, mode="cubic"), E, atol=1e-14)
    if n_new > 1:
        corners = resize_table(E, n_new, mode="cubic")[[0, -1]]
        np.testing.assert_allclose(corners, E[[0, -1]], atol=1e-14)


def test_cubic_overshoots_a_step_where_linear_does_not():
    step = np.array([0, 0, 0, 1, 1, 1.0])[:, None]
    cubic, linear = resize_table(step, 12, mode="cubic"), resize_table(step, 12)
    assert cubic.min() < 0 and cubic.max() > 1
    assert linear.min() == 0 and linear.max() == 1


def bicubic_by_hand(G, rows, cols, align_corners):
    """A (Hp, Wp, C) grid resized bicubically, one output cell and sixteen neighbours at a time."""
    Hp, Wp, _ = G.shape

    def place(i, n, n_new):
        if align_corners:
            return i * (n - 1) / (n_new - 1) if n_new > 1 else 0.0
        return (i + 0.5) * n / n_new - 0.5

    out = np.zeros((rows, cols, G.shape[2]))
    for i in range(rows):
        for j in range(cols):
            u, v = place(i, Hp, rows), place(j, Wp, cols)
            k, l = int(np.floor(u)), int(np.floor(v))
            for m in range(-1, 3):
                for q in range(-1, 3):
                    r, s = min(max(k + m, 0), Hp - 1), min(max(l + q, 0), Wp - 1)
                    out[i, j] += w(m - (u - k)) * w(q - (v - l)) * G[r, s]
    return out


@given(Hp=st.integers(1, 4), Wp=st.integers(1, 4), rows=st.integers(1, 6), cols=st.integers(1, 6),
       align_corners=st.booleans(), seed=seeds)
def test_resized_tables_are_the_bicubic_resize_of_the_grid(Hp, Wp, rows, cols, align_corners, seed):
    E_row, E_col = normal_array(seed, (Hp, 3)), normal_array(seed + 1, (Wp, 3))
    grid = E_row[:, None, :] + E_col[None, :, :]                          # (Hp, Wp, C)
    new_row, new_col = resize_grid_positions(E_row, E_col, rows, cols, align_corners=align_corners, mode="cubic")
    np.testing.assert_allclose(new_row[:, None, :] + new_col[None, :, :],
                               bicubic_by_hand(grid, rows, cols, align_corners), rtol=1e-12, atol=1e-12)


def test_vit_resize_takes_the_mode_and_a_bad_mode_is_named():
    model = ViT(ViTConfig(image_size=8, patch_size=4, n_classes=2, n_layer=1, n_head=2, d_model=8), rng=0)
    E_row = model.pos.E_row.copy()
    model.resize(12, mode="cubic")
    np.testing.assert_allclose(model.pos.E_row, resize_table(E_row, 3, mode="cubic"), rtol=1e-6)
    with pytest.raises(ValueError, match="mode: expected one of"):
        resize_table(E_row, 3, mode="bicubic")


def test_the_cubic_resize_runs_on_a_non_numpy_backend():
    """The strict array type (tests/strict_array.py): no NumPy-only call, no hidden float64."""
    from strict_array import to_strict
    from test_backend_agnostic import _same
    for align_corners in (True, False):
        E = normal_array(2, (3, 8), dtype=np.float32)
        out = resize_table(E, 5, align_corners=align_corners, mode="cubic")
        assert out.dtype == np.float32
        _same(out, resize_table(to_strict(E), 5, align_corners=align_corners, mode="cubic"), "cubic table")
