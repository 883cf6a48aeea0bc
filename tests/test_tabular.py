"""The tabular Transformer: the feature tokenizer (gradients, tokens by hand, column offsets,
errors), the whole model's gradients, the generated rule, and a short training run above chance."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from minitransformer.functional.feature_tokenizer import (category_offsets, feature_tokenizer_backward,
                                                          feature_tokenizer_forward)
from minitransformer.gradcheck import check_module, check_pair
from minitransformer.layers.feature_tokenizer import FeatureTokenizer
from minitransformer.models import TabularConfig, TabularTransformer
from minitransformer.training.classification import classification_accuracy, tabular_task
from minitransformer.training.loop import TrainConfig, train
from minitransformer.training.tables import make_table
from strategies import integer_ids, normal_array, seeds

TOL = 1e-7  # float64 central differences land near 1e-9 for a correct backward, near 1 for a bug


def _rows(seed, B, n_num, cardinalities, C):
    """Inputs of the functional pair: numeric values, categories within each column, tables."""
    x_cat = np.stack([integer_ids(seed + k, (B,), V) for k, V in enumerate(cardinalities)], 1) \
        if cardinalities else np.zeros((B, 0), np.int64)
    return {"x_num": normal_array(seed, (B, n_num)), "x_cat": x_cat,
            "W_num": normal_array(seed + 1, (n_num, C)), "b_num": normal_array(seed + 2, (n_num, C)),
            "E": normal_array(seed + 3, (sum(cardinalities), C))}


@given(B=st.integers(1, 4), n_num=st.integers(1, 3), cardinalities=st.lists(st.integers(1, 4), min_size=1, max_size=3),
       C=st.integers(1, 4), seed=seeds)
def test_feature_tokenizer_pair_gradients_of_values_and_every_table(B, n_num, cardinalities, C, seed):
    inputs = _rows(seed, B, n_num, tuple(cardinalities), C)
    result = check_pair(feature_tokenizer_forward, feature_tokenizer_backward, inputs,
                        kwargs={"cardinalities": tuple(cardinalities)}, seed=seed, tol=TOL)
    assert result.ok, str(result)


def test_tokens_by_hand_numeric_value_times_w_plus_b_then_categories_by_offset():
    x_num = np.array([[2.0, -0.5]])
    W_num = np.array([[1.0, 10.0], [3.0, 0.0]])
    b_num = np.array([[0.5, 0.5], [-1.0, 2.0]])
    E = np.arange(10.0).reshape(5, 2)                    # column 0 owns rows 0-2, column 1 rows 3-4
    T, _ = feature_tokenizer_forward(x_num, np.array([[2, 1]]), W_num, b_num, E, (3, 2))
    np.testing.assert_array_equal(T[0], [[2.5, 20.5],    # 2 · (1, 10) + (0.5, 0.5)
                                         [-2.5, 2.0],    # -0.5 · (3, 0) + (-1, 2)
                                         [4.0, 5.0],     # column 0, value 2: row 0 + 2
                                         [8.0, 9.0]])    # column 1, value 1: row 3 + 1
    assert category_offsets((3, 2, 4)) == (0, 3, 5)


def test_the_same_value_in_two_columns_is_two_categories():
    E = normal_array(0, (4, 3))
    T, _ = feature_tokenizer_forward(np.zeros((1, 0)), np.array([[1, 1]]), np.zeros((0, 3)), np.zeros((0, 3)),
                                     E, (2, 2))
    np.testing.assert_array_equal(T[0], E[[1, 3]])


@given(numeric_only=st.booleans(), seed=seeds)
def test_a_table_of_one_kind_of_column_only(numeric_only, seed):
    layer = (FeatureTokenizer(2, (), 3, rng=seed, init_std=1.0) if numeric_only
             else FeatureTokenizer(0, (3, 2), 3, rng=seed, init_std=1.0)).astype(np.float64)
    assert set(layer.params) == ({"W_num", "b_num"} if numeric_only else {"E"})   # no empty tables
    x_num = normal_array(seed, (4, 2 if numeric_only else 0))
    x_cat = np.zeros((4, 0), np.int64) if numeric_only else np.array([[0, 1], [2, 0], [1, 1], [0, 0]])
    assert layer.forward(x_num, x_cat).shape == (4, 2, 3)
    layer.release_caches()
    # a categorical-only table has an empty x_num (B, 0): nothing to perturb there
    assert check_module(layer, x_num, x_cat, seed=seed, tol=TOL, check_inputs=numeric_only).ok


@given(seed=seeds)
def test_module_checks_and_accumulates(seed):
    layer = FeatureTokenizer(2, (3, 2), 4, rng=seed, init_std=1.0).astype(np.float64)
    x_num, x_cat = normal_array(seed, (5, 2)), np.array([[0, 1], [2, 1], [2, 0], [1, 1], [0, 0]])
    assert check_module(layer, x_num, x_cat, seed=seed, tol=TOL).ok
    dT = normal_array(seed + 1, (5, 4, 4))
    layer.zero_grad()
    for _ in range(2):
        layer.forward(x_num, x_cat)
        dx_num, dx_cat = layer.backward(dT)
    assert dx_cat is None
    np.testing.assert_allclose(layer.grads["b_num"], 2 * dT[:, :2].sum(axis=0), rtol=1e-12)


@settings(max_examples=5)         # a whole model: each example checks ~20 tensors
@given(p_drop=st.sampled_from([0.0, 0.2]), norm_position=st.sampled_from(["pre", "post"]), seed=seeds)
def test_whole_tabular_model_gradients(p_drop, norm_position, seed):
    config = TabularConfig(n_numeric=2, cardinalities=(3, 2), n_classes=3, n_layer=1, n_head=2, d_model=8,
                           p_drop=p_drop, norm_position=norm_position)
    model = TabularTransformer(config, rng=seed).astype(np.float64)
    x_cat = np.array([[0, 1], [2, 0], [1, 1]])
    result = check_module(model, normal_array(seed, (3, 2)), x_cat, seed=seed, tol=TOL, max_coords=8)
    assert result.ok, str(result)


def test_unseen_categories_and_wrong_shapes_name_the_argument():
    args = _rows(0, 2, 1, (3, 2), 4)
    with pytest.raises(ValueError, match=r"x_cat\[:, 1\]: expected ids in \[0, 2\).*got values in \[0, 2\]"):
        feature_tokenizer_forward(**{**args, "x_cat": np.array([[0, 2], [1, 0]])}, cardinalities=(3, 2))
    with pytest.raises(TypeError, match=r"x_cat\[:, 0\]: expected an integer array"):
        feature_tokenizer_forward(**{**args, "x_cat": np.zeros((2, 2))}, cardinalities=(3, 2))
    with pytest.raises(ValueError, match="x_cat: expected size 3 .*n_cat"):
        feature_tokenizer_forward(**args, cardinalities=(3, 2, 2))
    with pytest.raises(ValueError, match="x_cat: expected size 2 .*B, the rows of x_num"):
        feature_tokenizer_forward(**{**args, "x_cat": np.zeros((3, 2), int)}, cardinalities=(3, 2))
    with pytest.raises(ValueError, match="E: expected size 5"):
        feature_tokenizer_forward(**{**args, "E": np.zeros((4, 4))}, cardinalities=(3, 2))
    with pytest.raises(ValueError, match="W_num: expected size 1"):
        feature_tokenizer_forward(**{**args, "W_num": np.zeros((2, 4))}, cardinalities=(3, 2))
    with pytest.raises(ValueError, match=r"cardinalities\[1\]: expected an integer in \[1, inf\], got 0"):
        TabularConfig(cardinalities=(3, 0))
    with pytest.raises(ValueError, match="expected at least one feature"):
        TabularConfig(n_numeric=0, cardinalities=())
    model = TabularTransformer(TabularConfig(n_numeric=3, cardinalities=(4, 3), d_model=8, n_head=2, n_layer=1))
    with pytest.raises(ValueError, match=r"x_cat\[:, 0\]: expected ids in \[0, 4\)"):
        model.forward(np.zeros((1, 3), np.float32), np.array([[4, 0]]))
    with pytest.raises(ValueError, match="x_num: expected 2 dimensions"):
        model.forward(np.zeros(3, np.float32), np.array([[0, 0]]))


def test_the_generated_rule_mixes_numbers_and_categories():
    x_num, x_cat, labels = make_table(500, np.random.default_rng(0), flip=0.0)
    slope, shift = np.array([1.5, -1.5, 0.5, -0.5]), np.array([-0.8, 0.0, 0.8])   # the module docstring's rule
    score = x_num[:, 0] + slope[x_cat[:, 0]] * x_num[:, 1] + shift[x_cat[:, 1]]
    np.testing.assert_array_equal(labels, score > 0)
    noisy = make_table(2000, np.random.default_rng(0), flip=0.05)
    assert 0.4 < noisy[2].mean() < 0.6                   # balanced classes: chance is about 50%


def test_a_short_training_beats_chance():
    # a short run (the default CLI run trains a wider model longer)
    model, task, _ = tabular_task(batch_size=64, seed=0, n_val=500, n_layer=1, n_head=2, d_model=16)
    train(model, task, TrainConfig(steps=150, lr=3e-3, warmup_steps=10, eval_interval=150, eval_batches=1,
                                   final_eval_batches=1), log=lambda s: None)
    labels = task.val[-1]
    majority = max(labels.mean(), 1 - labels.mean())
    accuracy = classification_accuracy(model, task)
    assert accuracy > majority + 0.15


def test_tabular_model_runs_on_a_non_numpy_backend():
    """Two training steps on the strict array type (tests/strict_array.py): no NumPy-only call,
    no host copy, the same numbers as on NumPy (see tests/test_backend_agnostic.py)."""
    from test_backend_agnostic import F32, _module_round_trip, _two_steps
    x_num, x_cat = normal_array(0, (3, 2), dtype=np.float32), np.array([[0, 1], [2, 0], [1, 1]])
    _module_round_trip(lambda: FeatureTokenizer(2, (3, 2), 4, rng=0), x_num, x_cat)
    _module_round_trip(lambda: FeatureTokenizer(0, (3, 2), 4, rng=0), np.zeros((3, 0), np.float32), x_cat)
    config = TabularConfig(n_numeric=2, cardinalities=(3, 2), n_classes=2, n_layer=1, n_head=2, d_model=8,
                           p_drop=0.1)
    batches = [(x_num, x_cat, np.array([0, 1, 1]))] * 2
    _two_steps(lambda: TabularTransformer(config, rng=0),
               lambda model, b: (model.forward(b[0], b[1]), b[2]), batches, F32)
