"""The lecture figures. Every helper returns ``(fig, data)``: a matplotlib Figure
(built without pyplot, so it runs headless) and a dict of the arrays it drew, so a
test can check the picture's numbers against the formula. With ``path`` it also
saves a PNG. The math always comes from the library: a GELU curve calls
gelu_forward, a mask figure calls causal_mask.

    training.py      loss_curve, lr_schedules, label_smoothing
    positions.py     sinusoidal_encoding, rope_figure
    alibi.py         alibi_figure
    gqa.py           gqa_figure (MHA / GQA / MQA: head sharing, KV-cache size)
    costs.py         costs_figure (the presets' KV cache per sequence, attention's share of the FLOPs)
    activations.py   activation_curves, gelu_difference
    masks.py         causal_table, key_padding_figure, attention_patterns
    attention.py     attention_map, attention_grid
    gradients.py     prenorm_vs_postnorm, gradcheck_errors
    context.py       interpolation_figure, sinks_figure (curves measured past the context)
    pretrained.py    the attention maps of a real pretrained model (all-MiniLM-L6-v2)

Layers, blocks and heads are numbered from 0 in every figure, as model.blocks[l]
and the head axis of the arrays are indexed.

``python -m minitransformer figures`` writes them all (cli/figures.py).
"""
