"""The one-screen GPT (models/gpt_reference.py) is the GPT of models/gpt.py, to float64 round-off:
the same loss and the same gradient for every parameter, on Hypothesis-drawn sizes and data."""
import numpy as np
from hypothesis import given, settings, strategies as st

from minitransformer.functional.cross_entropy import cross_entropy_backward, cross_entropy_forward
from minitransformer.models import GPT, GPTConfig
from minitransformer.models.gpt_reference import gpt_loss_and_gradients


@settings(max_examples=10, deadline=None)
@given(n_layer=st.integers(1, 3), n_head=st.sampled_from([1, 2, 4]), D=st.sampled_from([2, 4]),
       T=st.integers(1, 8), B=st.integers(1, 3), seed=st.integers(0, 2**16))
def test_reference_equals_the_modules(n_layer, n_head, D, T, B, seed):
    config = GPTConfig(vocab_size=13, block_size=8, n_layer=n_layer, n_head=n_head, d_model=n_head * D,
                       init_std=0.3)
    model = GPT(config, rng=seed, dtype=np.float64)
    rng = np.random.default_rng(seed)
    ids, targets = rng.integers(0, 13, (B, T)), rng.integers(0, 13, (B, T))
    loss, cache = cross_entropy_forward(model.forward(ids), targets)
    model.backward(cross_entropy_backward(1.0, cache))
    grads = {name: grad for name, _, grad in model.parameters()}

    ref_loss, ref_grads = gpt_loss_and_gradients(model.state_dict(), ids, targets, config)

    assert abs(float(ref_loss) - float(loss)) <= 1e-12 * abs(float(loss))
    assert ref_grads.keys() == grads.keys()
    for name, g in grads.items():
        scale = max(np.abs(g).max(), 1e-300)
        assert np.abs(ref_grads[name] - g).max() <= 1e-10 * scale, name
