"""All of a model's parameters in one flat array, and how to find such runs of arrays.

    theta, grad_theta = flatten_parameters(model)   # every parameter a view of theta, every gradient of grad_theta

    θ = [p_1.ravel(), p_2.ravel(), ..., p_n.ravel()]          (P,)   P = Σ_i size(p_i)
    p_i = θ[o_i : o_i + size(p_i)].reshape(shape(p_i))        o_i = Σ_{j<i} size(p_j)

in ``model.parameters()`` order, and the gradients the same way in a second array.
Nothing else changes: the same values, names and shapes, a tied weight stays one
array, the layers read and write their parameters as before.

Why. The optimizer, the gradient norm and data parallelism's gradient sum are the
same few elementwise passes over every parameter. Over n separate arrays that is n
NumPy calls a pass, each paying its set-up (about a microsecond); over one array it
is one call. For the default GPT (52 parameter arrays, 0.8 M numbers) the AdamW
update alone goes from about 2.2 to 1.6 ms a step (benchmarks/RESULTS.md).
``contiguous_runs`` finds the arrays that lie side by side in memory, so the
optimizer and data parallelism take the one-call route wherever it exists, and the
per-array route elsewhere, with the same arithmetic on every number.

Call it before building the optimizer: an optimizer keeps the arrays it was given
(``training.loop.make_optimizer`` calls it for the CPU's NumPy arrays).
"""
from __future__ import annotations

import numpy

from ..backend import get_xp


def flatten_parameters(model, empty=None):
    """(theta, grad_theta): the parameters of ``model`` copied into one flat array ``theta`` (P,),
    the gradients into ``grad_theta`` (P,), each module's entries replaced by views of them.

    ``empty(size, dtype)``: allocates the flat arrays (default: the parameters' array module's
    ``empty``). Every parameter must have one dtype and array module (ValueError otherwise).
    The forward caches are dropped (they may hold the old arrays)."""
    triples = list(model.parameters())
    if not triples:
        raise ValueError("model: expected at least one parameter to flatten, got none")
    kinds = {(type(p).__module__.split(".")[0], numpy.dtype(p.dtype)) for _, p, _ in triples}
    if len(kinds) != 1:
        raise ValueError(f"model: expected parameters of one dtype and array module to flatten, "
                         f"got {sorted((m, str(d)) for m, d in kinds)}")
    p0 = triples[0][1]
    empty = empty or get_xp(p0).empty
    P = sum(int(p.size) for _, p, _ in triples)
    theta, grad_theta = empty(P, p0.dtype), empty(P, p0.dtype)     # (P,), (P,)
    params = views_of(theta, [p for _, p, _ in triples])             # [p_i] views, shapes of the p_i
    grads = views_of(grad_theta, [g for _, _, g in triples])
    for p_new, g_new, (_, p, g) in zip(params, grads, triples):
        p_new[...] = p
        g_new[...] = g
    new = {id(p): p_new for p_new, (_, p, _) in zip(params, triples)}
    new.update({id(g): g_new for g_new, (_, _, g) in zip(grads, triples)})
    for _, module in model.named_modules():                          # a tied array: one id, one view
        module.params.update({k: new[id(p)] for k, p in module.params.items()})
        module.grads.update({k: new[id(g)] for k, g in module.grads.items()})
        module._cache = None
    return theta, grad_theta


def views_of(flat, like) -> list:
    """[flat[o_i : o_i + size_i].reshape(shape_i)]: views of ``flat`` (1-D) with the shapes of the
    arrays ``like``, side by side in their order (o_i = the sizes before i)."""
    views, offset = [], 0
    for a in like:
        views.append(flat[offset:offset + a.size].reshape(a.shape))
        offset += a.size
    return views


def contiguous_runs(*lists) -> list[tuple[int, int, list]]:
    """[(i, j, [run of each list])]: ``lists`` (equally long lists of arrays) cut into runs i:j
    where, in every list, the arrays i..j-1 lie side by side in memory in one flat NumPy array;
    each run as one flat view of it. Arrays that lie anywhere else are runs of one (the array itself).

    The run of ``flatten_parameters``'s arrays is the whole list: one array for all."""
    n = len(lists[0])
    runs, i = [], 0
    while i < n:
        j = i + 1
        while j < n and all(_next_to(a[j - 1], a[j]) for a in lists):
            j += 1
        runs.append((i, j, [_flat_span(a[i:j]) for a in lists]))
        i = j
    return runs


def _flat_base(a):
    """The 1-D C-contiguous NumPy array that ``a`` (C-contiguous) is a view of, or None."""
    if not isinstance(a, numpy.ndarray) or not a.flags.c_contiguous:
        return None                                          # other array modules: one array a run
    base = a.base
    if (not isinstance(base, numpy.ndarray) or base.ndim != 1 or not base.flags.c_contiguous
            or base.dtype != a.dtype):
        return None
    return base


def _next_to(a, b) -> bool:
    """Whether ``b`` starts where ``a`` ends, both views of one flat array."""
    base = _flat_base(a)
    return (base is not None and _flat_base(b) is base
            and a.ctypes.data + a.nbytes == b.ctypes.data)


def _flat_span(arrays):
    """One flat view over ``arrays`` (neighbours in one flat array), or the single array itself."""
    if len(arrays) == 1:
        return arrays[0]
    base = _flat_base(arrays[0])
    start = (arrays[0].ctypes.data - base.ctypes.data) // base.itemsize
    stop = (arrays[-1].ctypes.data + arrays[-1].nbytes - base.ctypes.data) // base.itemsize
    return base[start:stop]
