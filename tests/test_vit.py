"""The Vision Transformer: patches (the reshape, its inverse, the embedding pair), the [CLS]
token, the row + column positions, the whole model's gradients, errors, and a short training
run that beats chance on the generated shapes."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from minitransformer.functional.cls_token import prepend_cls_backward, prepend_cls_forward
from minitransformer.functional.grid_positions import grid_positions_backward, grid_positions_forward
from minitransformer.functional.patches import (patch_embed_backward, patch_embed_forward, patchify,
                                                unpatchify)
from minitransformer.gradcheck import check_module, check_pair
from minitransformer.layers.cls_token import ClsToken
from minitransformer.layers.grid_positions import GridPositionEmbedding
from minitransformer.layers.patch_embedding import PatchEmbedding
from minitransformer.models import ViT, ViTConfig
from minitransformer.training.classification import classification_accuracy, vit_task
from minitransformer.training.loop import TrainConfig, train
from minitransformer.training.shapes import SHAPES, draw_shapes
from strategies import normal_array, seeds

TOL = 1e-7  # float64 central differences land near 1e-9 for a correct backward, near 1 for a bug


@st.composite
def image_batches(draw):
    """(images (B, H, W, C_in), p) with H, W multiples of p, as a seed and sizes."""
    p = draw(st.integers(1, 3))
    B, gh, gw, C_in = (draw(st.integers(1, n)) for n in (2, 3, 3, 3))
    return (B, gh * p, gw * p, C_in), p


@given(shape_p=image_batches(), C=st.integers(1, 5), seed=seeds)
def test_patch_embedding_pair_gradients_of_images_weight_and_bias(shape_p, C, seed):
    shape, p = shape_p
    inputs = {"images": normal_array(seed, shape), "W": normal_array(seed + 1, (p * p * shape[3], C)),
              "b": normal_array(seed + 2, (C,))}
    result = check_pair(patch_embed_forward, patch_embed_backward, inputs, kwargs={"patch_size": p},
                        seed=seed, tol=TOL)
    assert result.ok, str(result)


@given(shape_p=image_batches(), seed=seeds)
def test_unpatchify_inverts_patchify_and_N_is_the_grid(shape_p, seed):
    (B, H, W, C_in), p = shape_p
    images = normal_array(seed, (B, H, W, C_in))
    X = patchify(images, p)
    assert X.shape == (B, (H // p) * (W // p), p * p * C_in)
    np.testing.assert_array_equal(unpatchify(X, (H, W, C_in), p), images)   # a rearrangement: exact


def test_the_paper_224_image_in_16_pixel_patches_is_196_tokens_of_768():
    X = patchify(np.zeros((1, 224, 224, 3), np.float32), 16)
    assert X.shape == (1, 196, 768)                                       # 14 · 14 patches, 16 · 16 · 3 numbers


def test_a_4x4_image_in_2x2_patches_by_hand():
    image = np.arange(16.0).reshape(1, 4, 4, 1)                           # pixel (i, j) holds 4i + j
    expected = np.array([[0, 1, 4, 5],                                    # top-left patch, row by row
                         [2, 3, 6, 7],                                    # top-right
                         [8, 9, 12, 13],                                  # bottom-left
                         [10, 11, 14, 15]], dtype=float)                  # bottom-right
    np.testing.assert_array_equal(patchify(image, 2)[0], expected)


def test_channels_are_the_fastest_axis_of_a_patch():
    image = np.zeros((1, 2, 2, 2))
    image[0, :, :, 0] = [[1, 2], [3, 4]]
    image[0, :, :, 1] = [[10, 20], [30, 40]]
    np.testing.assert_array_equal(patchify(image, 2)[0, 0], [1, 10, 2, 20, 3, 30, 4, 40])


def test_patch_embedding_is_a_linear_map_of_each_flattened_patch():
    image = np.arange(16.0).reshape(1, 4, 4, 1)
    W, b = normal_array(0, (4, 3)), normal_array(1, (3,))
    Z, _ = patch_embed_forward(image, W, b, 2)
    np.testing.assert_allclose(Z[0, 3], np.array([10, 11, 14, 15]) @ W + b, rtol=1e-14)


@given(B=st.integers(1, 3), N=st.integers(1, 4), C=st.integers(1, 4), seed=seeds)
def test_cls_pair_gradients_and_position_zero(B, N, C, seed):
    inputs = {"x": normal_array(seed, (B, N, C)), "cls": normal_array(seed + 1, (C,))}
    result = check_pair(prepend_cls_forward, prepend_cls_backward, inputs, seed=seed, tol=TOL)
    assert result.ok, str(result)
    out, _ = prepend_cls_forward(**inputs)
    np.testing.assert_array_equal(out[:, 0], np.broadcast_to(inputs["cls"], (B, C)))
    np.testing.assert_array_equal(out[:, 1:], inputs["x"])


@given(Hp=st.integers(1, 4), Wp=st.integers(1, 4), C=st.integers(1, 4), seed=seeds)
def test_grid_positions_pair_gradients_and_row_plus_column(Hp, Wp, C, seed):
    inputs = {"E_row": normal_array(seed, (Hp, C)), "E_col": normal_array(seed + 1, (Wp, C)),
              "e_cls": normal_array(seed + 2, (C,))}
    result = check_pair(grid_positions_forward, grid_positions_backward, inputs, seed=seed, tol=TOL)
    assert result.ok, str(result)
    P, _ = grid_positions_forward(**inputs)
    assert P.shape == (1 + Hp * Wp, C)
    np.testing.assert_array_equal(P[0], inputs["e_cls"])
    for r in range(Hp):
        for s in range(Wp):                                               # patches row by row
            np.testing.assert_array_equal(P[1 + r * Wp + s], inputs["E_row"][r] + inputs["E_col"][s])


@given(seed=seeds)
def test_the_three_modules_check_and_accumulate(seed):
    images = normal_array(seed, (2, 4, 6, 2))
    patches = PatchEmbedding(2, 2, 3, rng=seed).astype(np.float64)
    assert check_module(patches, images, seed=seed, tol=TOL).ok
    assert check_module(ClsToken(3, rng=seed, init_std=1.0).astype(np.float64), normal_array(seed, (2, 5, 3)),
                        seed=seed, tol=TOL).ok
    positions = GridPositionEmbedding(2, 3, 4, rng=seed, init_std=1.0).astype(np.float64)
    assert check_module(positions, seed=seed, tol=TOL).ok
    dZ = normal_array(seed + 1, (2, 6, 3))
    patches.zero_grad()
    for _ in range(2):
        patches.forward(images)
        patches.backward(dZ)
    np.testing.assert_allclose(patches.grads["b"], 2 * dZ.sum(axis=(0, 1)), rtol=1e-12)


@settings(max_examples=5)         # a whole model: each example checks ~20 tensors
@given(p_drop=st.sampled_from([0.0, 0.2]), norm_position=st.sampled_from(["pre", "post"]), seed=seeds)
def test_whole_vit_gradients_images_and_every_parameter(p_drop, norm_position, seed):
    config = ViTConfig(image_size=4, patch_size=2, in_channels=2, n_classes=3, n_layer=1, n_head=2,
                       d_model=8, p_drop=p_drop, norm_position=norm_position)
    model = ViT(config, rng=seed).astype(np.float64)
    result = check_module(model, normal_array(seed, (2, 4, 4, 2)), seed=seed, tol=TOL, max_coords=8)
    assert result.ok, str(result)


def test_bad_images_and_configs_name_what_is_wrong():
    with pytest.raises(ValueError, match="images: expected a height and width divisible by patch_size=3"):
        patchify(np.zeros((1, 4, 6, 1)), 3)
    with pytest.raises(ValueError, match=r"images: expected 4 dimensions \(B, H, W, C_in\)"):
        patchify(np.zeros((4, 4)), 2)
    with pytest.raises(ValueError, match="W: expected size 8"):
        patch_embed_forward(np.zeros((1, 4, 4, 2)), np.zeros((4, 3)), None, 2)
    with pytest.raises(TypeError, match="images: expected a floating point array"):
        patch_embed_forward(np.zeros((1, 4, 4, 1), int), np.zeros((4, 3)), None, 2)
    with pytest.raises(ValueError, match="image_size: expected a multiple of patch_size=3, got 16"):
        ViTConfig(image_size=16, patch_size=3)
    with pytest.raises(ValueError, match="n_classes"):
        ViTConfig(n_classes=1)
    with pytest.raises(ValueError, match="d_model: expected a multiple of n_head"):
        ViTConfig(d_model=10, n_head=4)
    model = ViT(ViTConfig(image_size=8, patch_size=4, d_model=8, n_head=2, n_layer=1))
    with pytest.raises(ValueError, match=r"images: expected shape \(B, 8, 8, 1\)"):
        model.forward(np.zeros((2, 8, 8, 3), np.float32))
    with pytest.raises(TypeError, match="images: expected dtype float32"):
        model.forward(np.zeros((2, 8, 8, 1)))


def test_generated_shapes_are_seeded_and_cover_the_classes():
    a_images, a_labels = draw_shapes(60, np.random.default_rng(3))
    b_images, b_labels = draw_shapes(60, np.random.default_rng(3))
    np.testing.assert_array_equal(a_images, b_images)
    np.testing.assert_array_equal(a_labels, b_labels)
    assert a_images.shape == (60, 16, 16, 1) and a_images.dtype == np.float32
    assert set(a_labels.tolist()) == set(range(len(SHAPES))) and len(SHAPES) == 6
    clean, labels = draw_shapes(30, np.random.default_rng(4), noise=0.0)
    lit = (clean[..., 0] > 0.3).sum(axis=(1, 2))                          # every image shows its shape
    assert lit.min() >= 4


def test_a_short_training_beats_chance():
    # a short run; its accuracy is well above chance (the default CLI run trains a wider model longer)
    model, task, _ = vit_task(batch_size=32, seed=0, image_size=16, patch_size=4, n_val=300,
                              n_layer=1, n_head=2, d_model=32)
    train(model, task, TrainConfig(steps=150, lr=3e-3, warmup_steps=10, eval_interval=150, eval_batches=1,
                                   final_eval_batches=1), log=lambda s: None)
    accuracy = classification_accuracy(model, task)
    assert accuracy > 0.3 > 1.5 / len(SHAPES)                            # chance: 1/6


def test_vit_runs_on_a_non_numpy_backend():
    """Two training steps on the strict array type (tests/strict_array.py): no NumPy-only call,
    no host copy, the same numbers as on NumPy (see tests/test_backend_agnostic.py)."""
    from test_backend_agnostic import F32, F64, _module_round_trip, _two_steps
    images = normal_array(0, (2, 8, 8, 1), dtype=np.float32)
    _module_round_trip(lambda: PatchEmbedding(4, 1, 8, rng=0), images)
    _module_round_trip(lambda: ClsToken(8, rng=0), normal_array(1, (2, 4, 8), dtype=np.float32))
    _module_round_trip(lambda: GridPositionEmbedding(2, 2, 8, rng=0))
    config = ViTConfig(image_size=8, patch_size=4, n_classes=3, n_layer=1, n_head=2, d_model=8, p_drop=0.1)
    batches = [(images, np.array([0, 2]))] * 2
    for dtype in (F32, F64):
        _two_steps(lambda: ViT(config, rng=0, dtype=dtype),
                   lambda model, b: (model.forward(b[0].astype(model.patches.W.dtype)), b[1]), batches, dtype)


@pytest.mark.parametrize("family", ["vit", "tabular"])
def test_train_command_reports_accuracy_and_the_checkpoint_loads(family, tmp_path, capsys):
    import json

    import minitransformer
    from minitransformer.cli import main
    out = tmp_path / family
    assert main(["train", "--model", family, "--steps", "2", "--d-model", "16", "--n-layer", "1",
                 "--n-head", "2", "--out", str(out)]) == 0
    result = json.loads((out / "result.json").read_text())
    assert 0.0 <= result["accuracy"] <= 1.0 and result["n_heldout"] == 1000
    assert "held-out accuracy" in capsys.readouterr().out
    model, tokenizer = minitransformer.load(out / "checkpoint.npz")
    assert type(model).__name__ == {"vit": "ViT", "tabular": "TabularTransformer"}[family]
    assert tokenizer is None and not model.training
    assert main(["train", "--model", family, "--task", "mlm", "--out", str(out), "--overwrite"]) == 2
    assert f"--task: {family} trains on its own generated data" in capsys.readouterr().err
