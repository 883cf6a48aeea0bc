"""ViT register tokens (the pair, the Module, the whole model's gradients, the count) and resizing
the learned position grid to another image size (the interpolation's meaning, ViT.resize).

Expected values are written out by definition here (slices, the closed form of a linear table,
a by-hand bilinear formula), never with the code under test."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from minitransformer.functional.grid_positions import grid_positions_forward
from minitransformer.functional.registers import append_registers_backward, append_registers_forward
from minitransformer.functional.resize_positions import resize_grid_positions, resize_table
from minitransformer.gradcheck import check_module, check_pair
from minitransformer.layers.registers import RegisterTokens
from minitransformer.models import ViT, ViTConfig
from minitransformer.models.presets import count_parameters
from strategies import normal_array, seeds

TOL = 1e-7  # float64 central differences land near 1e-9 for a correct backward, near 1 for a bug
SMALL = dict(image_size=4, patch_size=2, in_channels=2, n_classes=3, n_layer=1, n_head=2, d_model=8)


# ------------------------------------------------------------------ register tokens
@given(B=st.integers(1, 3), N=st.integers(1, 4), R=st.integers(1, 3), C=st.integers(1, 4), seed=seeds)
def test_registers_pair_gradients_and_the_appended_rows(B, N, R, C, seed):
    inputs = {"x": normal_array(seed, (B, N, C)), "registers": normal_array(seed + 1, (R, C))}
    result = check_pair(append_registers_forward, append_registers_backward, inputs, seed=seed, tol=TOL)
    assert result.ok, str(result)
    out, _ = append_registers_forward(**inputs)
    assert out.shape == (B, N + R, C)
    np.testing.assert_array_equal(out[:, :N], inputs["x"])
    for b in range(B):                                                    # the same registers in every row
        np.testing.assert_array_equal(out[b, N:], inputs["registers"])
    none, cache = append_registers_forward(inputs["x"], inputs["registers"][:0])   # R = 0: x itself
    np.testing.assert_array_equal(none, inputs["x"])
    assert append_registers_backward(none, cache)[1].shape == (0, C)


@given(seed=seeds)
def test_register_module_checks_and_accumulates(seed):
    layer = RegisterTokens(3, 4, rng=seed, init_std=1.0).astype(np.float64)
    x = normal_array(seed, (2, 5, 4))
    assert check_module(layer, x, seed=seed, tol=TOL).ok
    dout = normal_array(seed + 1, (2, 8, 4))
    layer.zero_grad()
    for _ in range(2):
        layer.forward(x)
        layer.backward(dout)
    np.testing.assert_allclose(layer.grads["registers"], 2 * (dout[0, 5:] + dout[1, 5:]), rtol=1e-12)


@settings(max_examples=4)         # a whole model: each example checks ~20 tensors
@given(n_registers=st.integers(1, 3), p_drop=st.sampled_from([0.0, 0.2]), seed=seeds)
def test_whole_vit_with_registers_gradients_images_and_every_parameter(n_registers, p_drop, seed):
    model = ViT(ViTConfig(**SMALL, p_drop=p_drop, n_registers=n_registers), rng=seed).astype(np.float64)
    result = check_module(model, normal_array(seed, (2, 4, 4, 2)), seed=seed, tol=TOL, max_coords=8)
    assert result.ok, str(result)
    assert any(name == "registers.registers" for name, _, _ in model.parameters())


def test_registers_pass_through_the_encoder_and_their_place_does_not_matter():
    model = ViT(ViTConfig(**SMALL, n_registers=2), rng=3).astype(np.float64).eval()
    model.registers.params["registers"][...] = normal_array(4, (2, 8))   # far from the small initial values
    images = normal_array(5, (2, 4, 4, 2))
    logits = model.forward(images)
    x = model.cls.forward(model.patches.forward(images)) + model.pos.forward()    # (B, 1 + N, C)
    R = np.broadcast_to(model.registers.registers, (2, 2, 8))
    after_cls = np.concatenate([x[:, :1], R, x[:, 1:]], axis=1)          # DINOv2's place: right after [CLS]
    np.testing.assert_allclose(model.encoder.forward(after_cls), logits, rtol=1e-12, atol=1e-14)
    without = model.encoder.forward(x)                                    # the same tokens, no registers
    assert np.abs(without - logits).max() > 1e-6 * np.abs(logits).max()   # far beyond rounding: attention reads them


def test_registers_leave_the_other_weights_as_without_them_and_count_r_times_c():
    plain, with_registers = ViT(ViTConfig(**SMALL), rng=7), ViT(ViTConfig(**SMALL, n_registers=4), rng=7)
    plain_state, state = plain.state_dict(), with_registers.state_dict()
    assert set(state) - set(plain_state) == {"registers.registers"} and state["registers.registers"].shape == (4, 8)
    for name, value in plain_state.items():
        np.testing.assert_array_equal(state[name], value)
    config = ViTConfig(**SMALL, n_registers=4)
    assert count_parameters(config) == count_parameters(ViTConfig(**SMALL)) + 4 * 8
    assert count_parameters(config) == with_registers.num_parameters()
    assert config.n_tokens == 1 + 4 + 4                                   # [CLS], 2 × 2 patches, 4 registers
    with pytest.raises(ValueError, match="n_registers"):
        ViTConfig(n_registers=-1)
    with pytest.raises(ValueError, match=r"registers: expected size 8 \(C, the width of x\)"):
        append_registers_forward(np.zeros((1, 2, 8)), np.zeros((3, 5)))
    with pytest.raises(TypeError, match="registers: expected dtype float64"):
        append_registers_forward(np.zeros((1, 2, 8)), np.zeros((3, 8), np.float32))


# ------------------------------------------------------------------ resizing the position grid
tables = st.tuples(st.integers(1, 6), st.integers(1, 4), seeds)          # n rows, C, seed


@given(table=tables, align_corners=st.booleans())
def test_resizing_to_the_same_size_is_the_identity(table, align_corners):
    n, C, seed = table
    E = normal_array(seed, (n, C))
    np.testing.assert_array_equal(resize_table(E, n, align_corners=align_corners), E)


@given(n=st.integers(2, 6), n_new=st.integers(2, 9), C=st.integers(1, 3), seed=seeds)
def test_a_linear_table_stays_linear(n, n_new, C, seed):
    a, b = normal_array(seed, (C,)), normal_array(seed + 1, (C,))
    E = a + np.arange(n)[:, None] * b                                     # E[r] = a + r b
    i = np.arange(n_new)[:, None]
    corners = a + i * (n - 1) / (n_new - 1) * b                           # read at u_i = i (n-1)/(n'-1)
    centres = a + np.clip((i + 0.5) * n / n_new - 0.5, 0, n - 1) * b     # read at the patch centres
    np.testing.assert_allclose(resize_table(E, n_new, align_corners=True), corners, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(resize_table(E, n_new, align_corners=False), centres, rtol=1e-12, atol=1e-12)


@given(table=tables, n_new=st.integers(2, 9))
def test_align_corners_keeps_the_first_and_last_rows_exactly(table, n_new):
    n, C, seed = table
    E = normal_array(seed, (n, C)).astype(np.float32)
    E_new = resize_table(E, n_new)
    assert E_new.dtype == np.float32 and E_new.shape == (n_new, C)
    np.testing.assert_array_equal(E_new[0], E[0])
    np.testing.assert_array_equal(E_new[-1], E[-1])


def test_halving_without_align_corners_averages_pairs_and_one_row_is_copied():
    E = normal_array(0, (4, 3))
    np.testing.assert_allclose(resize_table(E, 2, align_corners=False), [(E[0] + E[1]) / 2, (E[2] + E[3]) / 2],
                               rtol=1e-15)
    np.testing.assert_array_equal(resize_table(E[:1], 5), np.repeat(E[:1], 5, axis=0))
    three = resize_table(E[:3], 5)                                        # midpoints between the rows
    np.testing.assert_allclose(three[1], (E[0] + E[1]) / 2, rtol=1e-15)
    np.testing.assert_array_equal(three[2], E[1])


def bilinear_by_hand(G, rows, cols):
    """A (Hp, Wp, C) grid resized with align_corners=True, one output cell at a time."""
    Hp, Wp, _ = G.shape
    out = np.empty((rows, cols, G.shape[2]))
    for i in range(rows):
        for j in range(cols):
            u = i * (Hp - 1) / (rows - 1) if rows > 1 else 0.0
            v = j * (Wp - 1) / (cols - 1) if cols > 1 else 0.0
            r0, s0 = min(int(u), max(Hp - 2, 0)), min(int(v), max(Wp - 2, 0))
            r1, s1 = min(r0 + 1, Hp - 1), min(s0 + 1, Wp - 1)
            t, w = u - r0, v - s0
            out[i, j] = ((1 - t) * (1 - w) * G[r0, s0] + (1 - t) * w * G[r0, s1]
                         + t * (1 - w) * G[r1, s0] + t * w * G[r1, s1])
    return out


@given(Hp=st.integers(1, 4), Wp=st.integers(1, 4), rows=st.integers(1, 6), cols=st.integers(1, 6), seed=seeds)
def test_resized_row_and_column_tables_are_the_bilinear_resize_of_the_grid(Hp, Wp, rows, cols, seed):
    E_row, E_col = normal_array(seed, (Hp, 3)), normal_array(seed + 1, (Wp, 3))
    grid = E_row[:, None, :] + E_col[None, :, :]                          # (Hp, Wp, C)
    new_row, new_col = resize_grid_positions(E_row, E_col, rows, cols)
    np.testing.assert_allclose(new_row[:, None, :] + new_col[None, :, :], bilinear_by_hand(grid, rows, cols),
                               rtol=1e-12, atol=1e-12)


def test_resize_errors_name_the_argument():
    E = np.zeros((3, 4))
    with pytest.raises(ValueError, match=r"E: expected 2 dimensions \(n, C\)"):
        resize_table(np.zeros(3), 2)
    with pytest.raises(ValueError, match="n_new"):
        resize_table(E, 0)
    with pytest.raises(TypeError, match="align_corners: expected True or False"):
        resize_table(E, 2, align_corners="yes")
    with pytest.raises(ValueError, match="E_row: expected at least one row"):
        resize_grid_positions(np.zeros((0, 4)), E, 2, 2)
    with pytest.raises(TypeError, match="E_col: expected dtype float64"):
        resize_grid_positions(E, E.astype(np.float32), 2, 2)
    with pytest.raises(ValueError, match="grid_width"):
        resize_grid_positions(E, E, 2, 0)
    with pytest.raises(ValueError, match="n_new: expected at most"):       # not a MemoryError
        resize_table(E, 2 ** 40)
    with pytest.raises(ValueError, match="image_size: expected at most"):
        ViT(ViTConfig(image_size=8, patch_size=4, d_model=8, n_head=2)).resize(2 ** 40)


def test_a_vit_built_at_16_pixels_runs_on_24_pixel_images_after_resize():
    config = ViTConfig(image_size=16, patch_size=4, n_classes=3, n_layer=1, n_head=2, d_model=8, n_registers=1)
    model = ViT(config, rng=0)
    before = model.state_dict()
    assert model.resize(24) is model and model.config.image_size == 24 and model.config.grid == 6
    after = model.state_dict()
    for name in ("pos.E_row", "pos.E_col"):
        assert before[name].shape == (4, 8) and after[name].shape == (6, 8)
        np.testing.assert_array_equal(after[name][[0, -1]], before[name][[0, -1]])   # corners kept
    for name in set(before) - {"pos.E_row", "pos.E_col"}:
        np.testing.assert_array_equal(after[name], before[name])
    grid_16 = grid_positions_forward(before["pos.E_row"], before["pos.E_col"], before["pos.e_cls"])[0]
    grid_24 = model.pos.forward()                                         # (1 + 36, C)
    np.testing.assert_array_equal(grid_24[[0, 1, 6, 31, 36]], grid_16[[0, 1, 4, 13, 16]])   # [CLS], corners
    assert count_parameters(model.config) == model.num_parameters()
    images = normal_array(1, (2, 24, 24, 1), dtype=np.float32)
    logits = model.forward(images)
    assert logits.shape == (2, 3) and np.isfinite(logits).all()
    assert model.backward(np.ones_like(logits)).shape == images.shape
    assert model.pos.grads["E_row"].shape == (6, 8) and np.abs(model.pos.grads["E_row"]).sum() > 0
    with pytest.raises(ValueError, match=r"images: expected shape \(B, 24, 24, 1\)"):
        model.forward(np.zeros((2, 16, 16, 1), np.float32))
    with pytest.raises(ValueError, match="image_size: expected a multiple of patch_size=4, got 22"):
        model.resize(22)
    assert model.config.image_size == 24                                  # a refused resize changes nothing


def test_registers_resize_and_the_rtd_loss_run_on_a_non_numpy_backend():
    """The strict array type of tests/strict_array.py (see tests/test_backend_agnostic.py): no
    NumPy-only call, no host copy, no hidden float64, the very same numbers as on NumPy."""
    from minitransformer.functional.binary_cross_entropy import (binary_cross_entropy_backward,
                                                                 binary_cross_entropy_forward)
    from strict_array import to_strict
    from test_backend_agnostic import F32, _module_round_trip, _same, _two_steps
    _module_round_trip(lambda: RegisterTokens(2, 8, rng=0), normal_array(1, (2, 4, 8), dtype=np.float32))
    for align_corners in (True, False):
        E = normal_array(2, (3, 8), dtype=np.float32)
        _same(resize_table(E, 5, align_corners=align_corners),
              resize_table(to_strict(E), 5, align_corners=align_corners), "resized table")
    logits, labels = normal_array(3, (2, 5), dtype=np.float32), np.array([[0, 1, 0, 0, 1], [1, 0, 0, 0, 0]])
    mask = np.array([[True] * 5, [True, True, True, False, False]])
    loss, cache = binary_cross_entropy_forward(logits, labels, mask)
    loss_dev, cache_dev = binary_cross_entropy_forward(to_strict(logits), to_strict(labels), to_strict(mask))
    _same(np.asarray(loss), loss_dev, "loss")
    _same(binary_cross_entropy_backward(1.0, cache), binary_cross_entropy_backward(1.0, cache_dev), "dlogits")
    config = ViTConfig(image_size=8, patch_size=4, n_classes=3, n_layer=1, n_head=2, d_model=8, n_registers=2)
    batches = [(normal_array(0, (2, 12, 12, 1), dtype=np.float32), np.array([0, 2]))] * 2
    _two_steps(lambda: ViT(config, rng=0).resize(12), lambda model, b: (model.forward(b[0]), b[1]), batches, F32)
