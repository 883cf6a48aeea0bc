"""The one hook through which the speed wing swaps a kernel in: ``twin(plain)``.

A Module calls ``twin(layernorm_forward)(x, gamma, beta, eps)``. With the speed
wing off (the default from Python) that is ``layernorm_forward`` itself: the
plain form in this folder, the code a student reads. ``minitransformer.fast.enable()``
(the command line calls it) writes into ``TWINS`` a twin for some plain forms:
the same arguments, result and cache, computed with fewer passes over memory.
The core never imports the wing; the wing fills this table, and
tests/test_kernels.py ties every twin to its plain form.
"""
from __future__ import annotations

TWINS: dict = {}   # plain function -> its twin; empty unless minitransformer.fast.enable() ran


def twin(plain):
    """The registered twin of the plain functional routine ``plain``, or ``plain`` itself."""
    return TWINS.get(plain, plain)
