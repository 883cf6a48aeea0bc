"""The survey pieces' entrances under junk: register tokens, resizing the position grid, ViT.resize,
ELECTRA's binary cross-entropy, the residual stream. Same mechanism as
tests/test_entrances_pairs_modules_cli.py (its helpers are reused): one or two arguments replaced by
junk, and only a ValueError/TypeError naming a replaced argument may come out."""
import os

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from minitransformer.functional.binary_cross_entropy import (binary_cross_entropy_backward,
                                                             binary_cross_entropy_forward)
from minitransformer.functional.registers import append_registers_backward, append_registers_forward
from minitransformer.functional.resize_positions import resize_grid_positions, resize_table
from minitransformer.layers.registers import RegisterTokens
from minitransformer.models import GPT, GPTConfig, ViT, ViTConfig
from minitransformer.plots.residual import residual_stream
from test_entrances_pairs_modules_cli import FAST, backward_entrance, entrance, f32, ids, run_in_scratch_dir

VIT = ViTConfig(image_size=8, patch_size=4, n_classes=3, n_layer=1, n_head=2, d_model=8, n_registers=2)
GPT_CONFIG = GPTConfig(vocab_size=5, block_size=8, n_layer=1, n_head=2, d_model=8)


def _vit_resize(image_size, align_corners):
    return ViT(VIT, rng=0).resize(image_size, align_corners=align_corners)


ENTRANCES = {
    "append_registers_forward": entrance(append_registers_forward, lambda: {"x": f32(2, 3, 4), "registers": f32(2, 4)}),
    "append_registers_backward": backward_entrance(append_registers_forward, append_registers_backward,
                                                   lambda: {"x": f32(2, 3, 4), "registers": f32(2, 4)}, "dout"),
    "RegisterTokens()": entrance(RegisterTokens, lambda: {"n_registers": 2, "d_model": 4, "rng": 0, "init_std": 0.02}),
    "resize_table": entrance(resize_table, lambda: {"E": f32(3, 4), "n_new": 5, "align_corners": True}),
    "resize_grid_positions": entrance(resize_grid_positions, lambda: {
        "E_row": f32(2, 4), "E_col": f32(3, 4), "grid_height": 4, "grid_width": 5, "align_corners": False}),
    "ViT.resize": entrance(_vit_resize, lambda: {"image_size": 12, "align_corners": True}),
    "ViTConfig(n_registers)": entrance(lambda n_registers: ViTConfig(n_registers=n_registers),
                                       lambda: {"n_registers": 3}),
    "binary_cross_entropy_forward": entrance(binary_cross_entropy_forward, lambda: {
        "logits": f32(2, 3), "labels": ids(2, 3, high=2), "mask": ids(2, 3, high=2) > 0}),
    "binary_cross_entropy_backward": backward_entrance(binary_cross_entropy_forward, binary_cross_entropy_backward,
                                                       lambda: {"logits": f32(2, 3), "labels": ids(2, 3, high=2)},
                                                       "dloss"),
    "residual_stream": entrance(lambda model, ids, targets: residual_stream(model, ids, targets), lambda: {
        "model": GPT(GPT_CONFIG, rng=0), "ids": ids(2, 8), "targets": ids(2, 8)}),
}


@pytest.mark.parametrize("name", sorted(ENTRANCES))
@settings(FAST, max_examples=int(os.environ.get("FUZZ_EXAMPLES", FAST.max_examples)))
@given(data=st.data())
def test_survey_entrance_refuses_junk_with_a_named_error(name, data):
    run_in_scratch_dir(ENTRANCES[name], data)


def test_no_survey_entrance_is_fuzzed_twice():
    from test_entrances_models_and_files import ENTRANCES as MODELS
    from test_entrances_pairs_modules_cli import ENTRANCES as PAIRS
    assert len(ENTRANCES) == 10 and not set(ENTRANCES) & (set(MODELS) | set(PAIRS))
