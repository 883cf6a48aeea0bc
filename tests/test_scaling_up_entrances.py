"""Lecture 12's pieces and the smaller survey items under junk: the mixture of experts (its router
pieces, the pair, the Module, the config), distillation, SwiGLU with β, the bicubic resize, BLEU,
Chinchilla's law and the power-law fit, the text-to-text tasks. Same mechanism as
tests/test_entrances_pairs_modules_cli.py (its helpers are reused): one or two arguments replaced
by junk, and only a ValueError/TypeError naming a replaced argument may come out."""
import os

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from minitransformer.functional.distillation import distillation_backward, distillation_forward
from minitransformer.functional.gated import swiglu_beta_backward, swiglu_beta_forward
from minitransformer.functional.moe import moe_backward, moe_forward
from minitransformer.functional.resize_positions import resize_table
from minitransformer.functional.router import (capacity_mask, expert_capacity, load_balancing_forward,
                                               top_k_backward, top_k_forward)
from minitransformer.layers.activation import SwiGLUBeta
from minitransformer.layers.moe import MoEFeedForward
from minitransformer.metrics import corpus_bleu
from minitransformer.models import GPTConfig
from minitransformer.models.scaling import chinchilla_loss, compute_optimal, fit_power_law
from minitransformer.training.tasks import TextToTextTasks
from test_entrances_pairs_modules_cli import (FAST, _module_forward, backward_entrance, entrance, f32, ids,
                                             run_in_scratch_dir)


def _moe_args():
    return {"x": f32(4, 3), "W_r": f32(3, 2), "W_in": f32(2, 3, 5), "b_in": f32(2, 5), "W_out": f32(2, 5, 3),
            "b_out": f32(2, 3), "top_k": 1, "capacity_factor": 1.0, "activation": "gelu"}


ENTRANCES = {
    "top_k_forward": entrance(top_k_forward, lambda: {"p": f32(4, 3), "k": 2}),
    "top_k_backward": backward_entrance(top_k_forward, top_k_backward, lambda: {"p": f32(4, 3), "k": 2}, "dgate"),
    "expert_capacity": entrance(expert_capacity, lambda: {"n_tokens": 8, "n_experts": 4, "k": 2,
                                                          "capacity_factor": 1.25}),
    "capacity_mask": entrance(capacity_mask, lambda: {"expert": ids(4, 2, high=3), "n_experts": 3, "capacity": 2}),
    "load_balancing_forward": entrance(load_balancing_forward, lambda: {"p": f32(4, 3), "expert": ids(4, 1, high=3)}),
    "moe_forward": entrance(moe_forward, _moe_args, extra=["k"]),
    "moe_backward": backward_entrance(moe_forward, moe_backward, _moe_args, "dy"),
    "MoEFeedForward()": entrance(MoEFeedForward, lambda: {"d_model": 4, "d_ff": 3, "n_experts": 2, "top_k": 1,
                                                          "capacity_factor": 1.0, "activation": "relu",
                                                          "aux_weight": 0.01, "rng": 0}),
    "MoEFeedForward.forward": _module_forward(MoEFeedForward, {"d_model": 4, "d_ff": 3, "n_experts": 2}, "x",
                                              lambda: (f32(2, 3, 4),)),
    "GPTConfig(ffn)": entrance(lambda **k: GPTConfig(**k), lambda: {"ffn": "moe", "n_experts": 4, "top_k": 2,
                                                                      "capacity_factor": 1.25, "moe_aux_weight": 0.01}),
    "distillation_forward": entrance(distillation_forward, lambda: {"student_logits": f32(2, 5),
                                                                    "teacher_logits": f32(2, 5, seed=1), "tau": 2.0}),
    "distillation_backward": backward_entrance(distillation_forward, distillation_backward,
                                               lambda: {"student_logits": f32(2, 5), "teacher_logits": f32(2, 5)},
                                               "dloss"),
    "swiglu_beta_forward": entrance(swiglu_beta_forward, lambda: {"h": f32(2, 4), "beta": f32(1)}),
    "swiglu_beta_backward": backward_entrance(swiglu_beta_forward, swiglu_beta_backward,
                                              lambda: {"h": f32(2, 4), "beta": f32(1)}, "dy"),
    "SwiGLUBeta()": entrance(SwiGLUBeta, lambda: {"beta": 1.0}),
    "resize_table(cubic)": entrance(resize_table, lambda: {"E": f32(3, 4), "n_new": 5, "align_corners": False,
                                                           "mode": "cubic"}),
    "corpus_bleu": entrance(corpus_bleu, lambda: {"list_of_references": [[["a", "b", "c"]]],
                                                  "hypotheses": [["a", "b", "d"]], "max_n": 2}),
    "compute_optimal": entrance(compute_optimal, lambda: {"C": 1e21}),
    "chinchilla_loss": entrance(chinchilla_loss, lambda: {"N": 1e9, "D": 2e10}),
    "fit_power_law": entrance(fit_power_law, lambda: {"compute": [1e10, 1e11, 1e12], "loss": [3.0, 2.5, 2.1]}),
    "TextToTextTasks()": entrance(TextToTextTasks, lambda: {"tasks": ("reverse", "sort"), "vocab": 8,
                                                            "length_range": (2, 4), "batch_size": 4, "n_val": 3},
                                  extra=["length_range", "vocab", "n", "task"]),
}


@pytest.mark.parametrize("name", sorted(ENTRANCES))
@settings(FAST, max_examples=int(os.environ.get("FUZZ_EXAMPLES", FAST.max_examples)))
@given(data=st.data())
def test_scaling_up_entrance_refuses_junk_with_a_named_error(name, data):
    run_in_scratch_dir(ENTRANCES[name], data)


def test_no_scaling_up_entrance_is_fuzzed_twice():
    from test_entrances_models_and_files import ENTRANCES as MODELS
    from test_entrances_pairs_modules_cli import ENTRANCES as PAIRS
    from test_survey_entrances import ENTRANCES as SURVEY
    assert len(ENTRANCES) == 21 and not set(ENTRANCES) & (set(MODELS) | set(PAIRS) | set(SURVEY))
