"""Parameters shared across the blocks of a stack: ALBERT's cross-layer sharing and T5's
one relative-position table per stack.

    share_parameters(blocks)                                   ALBERT (Lan et al. 2020, section 3.1)
    share_parameters(blocks, lambda name: name.endswith("rel_bias"))    T5 (Raffel et al. 2020, 2.1)

Block l > 0 keeps its own Modules (and so its own caches: each block is run once per
forward, as usual) but its selected parameters become the very arrays of block 0
(``Module.tie``), gradients included: each use accumulates (+=) into the one gradient,
the sum over the layers that the chain rule asks for. ``num_parameters`` counts a
shared array once.
"""
from __future__ import annotations


def share_parameters(blocks, select=lambda name: True) -> None:
    """Tie every parameter of blocks[1:] whose dotted name ``select`` accepts to block 0's."""
    blocks = list(blocks)
    for block in blocks[1:]:
        for (path, module), (_, owner) in zip(block.named_modules(), blocks[0].named_modules()):
            for name in list(module.params):
                if select(f"{path}.{name}" if path else name):
                    module.tie(name, owner, name)
