"""The Module contract: a thin owner of parameters and gradients.

The math lives in ``functional/``; a Module only keeps the bookkeeping:

- ``params`` and ``grads``: dicts with the same keys; ``grads[k]`` has the shape
  and dtype of ``params[k]``. Attribute access reads them: ``self.W`` is
  ``self.params["W"]``.
- children: sub-modules registered with ``add_child``, reachable as attributes.
- ``forward(*inputs)`` calls a functional forward and keeps its cache;
  ``backward(dout)`` calls the functional backward, ACCUMULATES (``+=``) into
  ``grads`` and returns the gradient of each input in the order of forward's
  inputs. Accumulation is what makes weight tying and reuse correct;
  ``zero_grad()`` clears. The cache is consumed by backward, so a second backward
  (or one with no forward before it) raises a clear RuntimeError. A Module that
  saves its output with the cache (``_save(cache, out)``) and pops it with the
  upstream gradient (``_pop_cache(dout)``) has ``dout`` checked against the
  output's shape and dtype (``validate.check_upstream``) before anything is consumed.
- ``parameters()`` yields ``(dotted_name, param, grad)`` over the tree, the names
  ``state_dict`` uses; ``to(device)`` / ``astype(dtype)`` move and cast the tree.
- ``training``: True after ``train()``, False after ``eval()`` (dropout reads it).

Parameters are created in the constructor from an explicit generator, never on
the first call; nothing here touches a global random state.
"""
from __future__ import annotations

from typing import Iterator

from ..backend import get_xp, to_device, to_numpy
from ..validate import check_real_finite, check_upstream


_NOT_GIVEN = object()   # _pop_cache() without dout: nothing to check (None is a wrong dout)


class Module:
    def __init__(self):
        # object.__setattr__ because __getattr__ below looks into these dicts
        object.__setattr__(self, "params", {})
        object.__setattr__(self, "grads", {})
        object.__setattr__(self, "children", {})
        self.training = True
        self._cache = None
        self._out_spec = None         # (shape, dtype) of the pending forward's output, if saved

    # ------------------------------------------------------------ registration
    def add_param(self, name: str, value):
        """Register a parameter and its zero gradient; returns the parameter."""
        xp = get_xp(value)
        self.params[name] = value
        self.grads[name] = xp.zeros_like(value)
        return value

    def add_child(self, name: str, module: "Module") -> "Module":
        self.children[name] = module
        return module

    def __getattr__(self, name):
        # Only called when normal lookup fails: parameters and children by name.
        for table in ("params", "children"):
            entries = self.__dict__.get(table, {})
            if name in entries:
                return entries[name]
        raise AttributeError(f"{type(self).__name__} has no attribute, parameter or child {name!r}")

    # ----------------------------------------------------------- forward/backward
    def forward(self, *inputs):
        raise NotImplementedError(f"{type(self).__name__}.forward")

    def backward(self, dout):
        raise NotImplementedError(f"{type(self).__name__}.backward")

    def __call__(self, *inputs, **kwargs):
        return self.forward(*inputs, **kwargs)

    def _save(self, cache, out=None) -> None:
        """Keep the forward's cache; with ``out``, its shape and dtype, to check ``dout`` against."""
        self._cache = cache
        self._out_spec = None if out is None else (tuple(out.shape), out.dtype)

    def _pop_cache(self, dout=_NOT_GIVEN, name: str = "dout"):
        """The cache of the pending forward; consumed, so memory is freed early.

        With ``dout`` (and an output saved by ``_save``), the upstream gradient is checked
        first: ValueError/TypeError naming ``name`` unless it has the output's shape and dtype.
        """
        if self._cache is None:
            raise RuntimeError(f"{type(self).__name__}.backward() called without a pending "
                               "forward(): call forward() first (each forward allows one backward)")
        spec = self.__dict__.get("_out_spec")
        if dout is not _NOT_GIVEN and spec is not None:
            check_upstream(name, dout, *spec)
        cache, self._cache = self._cache, None
        return cache

    def _accumulate(self, name: str, g) -> None:
        self.grads[name] += g

    # ------------------------------------------------------------------- the tree
    def named_modules(self, prefix: str = "") -> Iterator[tuple[str, "Module"]]:
        yield prefix, self
        for child_name, child in self.children.items():
            yield from child.named_modules(f"{prefix}.{child_name}" if prefix else child_name)

    def parameters(self, prefix: str = "") -> Iterator[tuple[str, object, object]]:
        """Yield ``(dotted_name, param, grad)`` for every parameter in the tree.

        A parameter shared by two modules (weight tying) is yielded once, under
        the first name met, so an optimizer updates it once.
        """
        seen = set()
        for mod_name, module in self.named_modules(prefix):
            for name, p in module.params.items():
                if id(p) in seen:
                    continue
                seen.add(id(p))
                yield (f"{mod_name}.{name}" if mod_name else name), p, module.grads[name]

    def num_parameters(self) -> int:
        return sum(int(p.size) for _, p, _ in self.parameters())

    def zero_grad(self) -> None:
        for _, module in self.named_modules():
            for g in module.grads.values():
                g[...] = 0

    def release_caches(self) -> None:
        """Drop the forward caches of this module and every module below it.

        For a forward that no backward will follow (evaluation, generation, plots):
        the caches hold every activation, so they are freed at once instead of at
        the next forward.
        """
        for _, module in self.named_modules():
            module._cache = None

    def train(self, mode: bool = True) -> "Module":
        for _, module in self.named_modules():
            module.training = mode
        return self

    def eval(self) -> "Module":
        return self.train(False)

    # ------------------------------------------------------------ state and moves
    def state_dict(self) -> dict:
        """Parameters as NumPy arrays under their dotted names."""
        return {name: to_numpy(p) for name, p, _ in self.parameters()}

    def load_state_dict(self, state: dict, strict: bool = True) -> None:
        """Copy ``state`` into the parameters in place (optimizer references stay valid).

        Every entry is checked before any parameter changes: a real array (TypeError naming
        ``state[name]`` for complex or object arrays), finite (ValueError for NaN or inf, and
        for values that overflow the parameter's dtype), of the parameter's shape.
        """
        if not isinstance(state, dict):
            raise TypeError(f"state: expected a dict of arrays (a state_dict()), got {type(state).__name__}")
        own = {name: p for name, p, _ in self.parameters()}
        missing = sorted(set(own) - set(state))
        unexpected = sorted(set(state) - set(own))
        if strict and (missing or unexpected):
            raise ValueError(f"state: missing parameters {missing}, unexpected {unexpected}")
        cast = {}                   # checked first: nothing changes unless every entry is good
        for name, p in own.items():
            if name not in state:
                continue
            value = state[name]
            check_real_finite(f"state[{name!r}]", value)
            if tuple(value.shape) != tuple(p.shape):
                raise ValueError(f"state[{name!r}]: expected shape {tuple(p.shape)}, "
                                 f"got {tuple(value.shape)}")
            xp = get_xp(p)
            with _quiet_overflow():
                cast[name] = xp.asarray(to_device(value, _device_name(p)), dtype=p.dtype)
            if not bool(xp.isfinite(cast[name]).all()):
                raise ValueError(f"state[{name!r}]: values overflow the parameter's dtype {p.dtype} "
                                 f"(inf after the cast)")
        for name, value in cast.items():
            own[name][...] = value

    def _map_params(self, fn) -> None:
        """Replace every parameter by ``fn(param)`` and its gradient by zeros.

        Arrays shared between modules (a tied weight and its gradient) stay shared.
        """
        new_params, new_grads = {}, {}
        for _, module in self.named_modules():
            for name in list(module.params):
                p, g = module.params[name], module.grads[name]
                if id(p) not in new_params:
                    new_params[id(p)] = fn(p)
                if id(g) not in new_grads:
                    new_grads[id(g)] = get_xp(new_params[id(p)]).zeros_like(new_params[id(p)])
                module.params[name] = new_params[id(p)]
                module.grads[name] = new_grads[id(g)]
            module._cache = None
            module._after_move(fn)

    def tie(self, name: str, owner: "Module", owner_name: str) -> None:
        """Make ``self.params[name]`` the very array ``owner.params[owner_name]``.

        The gradient array is shared too, so both uses accumulate into one
        gradient: the gradient of a tied weight is the sum over its paths.
        """
        self.params[name] = owner.params[owner_name]
        self.grads[name] = owner.grads[owner_name]

    def _after_move(self, fn) -> None:
        """Hook for modules that hold non-parameter arrays (tables, masks)."""

    def to(self, device: str) -> "Module":
        self._map_params(lambda a: to_device(a, device))
        return self

    def astype(self, dtype) -> "Module":
        from ..validate import check_dtype
        dtype = check_dtype("dtype", dtype)
        self._map_params(lambda a: a.astype(dtype))
        return self

    def __repr__(self) -> str:
        shapes = ", ".join(f"{k}={tuple(v.shape)}" for k, v in self.params.items())
        kids = ", ".join(self.children)
        return f"{type(self).__name__}({shapes}{'; ' if shapes and kids else ''}{kids})"


def _quiet_overflow():
    import numpy
    return numpy.errstate(over="ignore", invalid="ignore")


def _device_name(a) -> str:
    from ..backend import device_of
    return device_of(a)


class ModuleList(Module):
    """An ordered list of child modules named "0", "1", ... (dotted names blocks.0.W)."""

    def __init__(self, modules=()):
        super().__init__()
        for i, m in enumerate(modules):
            self.add_child(str(i), m)

    def __len__(self) -> int:
        return len(self.children)

    def __iter__(self):
        return iter(self.children.values())

    def __getitem__(self, i: int) -> Module:
        return list(self.children.values())[i]
