"""The wing's FusedAdamW is an AdamW: the same state and checkpoints, the plain update on NumPy.

Its fused CuPy kernel itself runs on a GPU only: benchmarks/gpu_check.py's timing part
ties it to the plain update there (losses to float32 rounding).
"""
import numpy as np

from minitransformer.fast.cuda_adamw import FusedAdamW, fused_like
from minitransformer.models import GPT, GPTConfig
from minitransformer.optim import AdamW

SMALL = dict(vocab_size=11, block_size=6, n_layer=1, n_head=2, d_model=8, d_ff=16)


def _two_models():
    return GPT(GPTConfig(**SMALL), rng=0), GPT(GPTConfig(**SMALL), rng=0)


def _fill_grads(model, seed):
    rng = np.random.default_rng(seed)
    for _, p, g in model.parameters():
        g[...] = rng.standard_normal(p.shape).astype(p.dtype)


def test_on_numpy_it_updates_as_adamw_bit_for_bit():
    a, b = _two_models()
    plain, fused = AdamW(a.parameters(), 1e-2, weight_decay=0.1), FusedAdamW(b.parameters(), 1e-2, weight_decay=0.1)
    for seed in range(3):
        _fill_grads(a, seed), _fill_grads(b, seed)
        plain.step(), fused.step()
    for (name, p, _), (_, q, _) in zip(a.parameters(), b.parameters()):
        np.testing.assert_array_equal(p, q, err_msg=name)


def test_its_checkpoints_are_adamw_checkpoints_both_ways():
    a, b = _two_models()
    plain = AdamW(a.parameters(), 1e-2)
    _fill_grads(a, 0)
    plain.step()
    fused = fused_like(plain)                                     # AdamW's state, moved over
    assert fused.t == 1 and fused.state_dict()["type"] == "AdamW"
    for key, value in plain.state_dict().items():
        np.testing.assert_array_equal(fused.state_dict()[key], value)
    AdamW(b.parameters(), 1e-2).load_state_dict(fused.state_dict())    # and back
