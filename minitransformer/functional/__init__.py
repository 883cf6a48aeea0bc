"""The math: pure ``*_forward(...) -> (out, cache)`` / ``*_backward(dout, cache)`` pairs.

One file per concept. Nothing here owns state; the Modules in ``layers/`` keep
the parameters, gradients and caches.
"""
