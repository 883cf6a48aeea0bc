"""Optimizers: SGD (with momentum), Adam and AdamW, updating parameters in place.

An optimizer is built from ``model.parameters()``, the ``(dotted_name, param, grad)``
triples of the Module contract, and keeps all it knows in itself: the learning
rate ``lr``, the step count ``t`` and, per parameter name, its state buffers.
Nothing is global, and two optimizers never share state.

    opt = AdamW(model.parameters(), lr=3e-4)
    for step in range(1, n_steps + 1):          # steps count from 1, as the schedules do
        ...                                     # forward, backward: fills the grads
        opt.step(lr=schedule(step))             # the schedule sets each step's lr
        opt.zero_grad()

Build the optimizer AFTER ``model.to(device)`` / ``model.astype(dtype)``: those
replace the parameter arrays, and an optimizer updates the arrays it was given.

No allocation in the hot path: state buffers are allocated once, here, in the
parameter's dtype and on its device (float32 state for float32 parameters), and
an update is a short sequence of in-place ufuncs (``*=``, ``+=``, ``out=``) with
Python-float coefficients, which never promote a float32 array (a NumPy float64
scalar can, on some backends).

Checkpoints: ``state_dict()`` is a flat dict that ``checkpoint.save_checkpoint``
stores as it is: JSON-able values under plain keys ("type", "step", "lr" and the
hyperparameters) and NumPy copies of the buffers under "<buffer>/<param name>"
("m/blocks.0.attn.W_qkv"). ``load_state_dict`` checks that the hyperparameters
match the ones this optimizer was built with, then copies step, lr and buffers
back in place, so a resumed run continues bit for bit.
"""
from __future__ import annotations

import math

from ..backend import device_of, get_xp, to_device, to_numpy
from ..validate import check_float, check_int, check_number, check_real_finite, check_same_shape


def default_no_decay(name: str, param) -> bool:
    """True for the parameters AdamW does not decay by default.

    The rule: every 1-D parameter (biases, LayerNorm/RMSNorm gains and shifts) and
    every parameter whose dotted name contains "emb" or "pos" (token, position and
    token-type embeddings). Decay pulls weights towards 0: right for the matrices
    of linear maps, wrong for a gain whose neutral value is 1 or for embedding rows
    that only some batches touch. Pass your own ``no_decay(name, param)`` to change it.
    """
    return param.ndim <= 1 or "emb" in name or "pos" in name


class Optimizer:
    """The bookkeeping every optimizer shares; a subclass writes ``_update``.

    ``params``: [(name, param, grad)], materialised; ``t``: steps taken so far;
    ``state[buffer][name]``: the per-parameter buffers that ``state_dict`` saves.
    """

    hyperparameters: tuple[str, ...] = ()       # attributes saved in, and checked by, the state

    def __init__(self, params, lr: float, buffers: tuple[str, ...] = ()):
        self.params = _materialise(params)
        self.lr = check_number("lr", lr, low=0.0, finite=True)
        self.t = 0
        self.state = {b: {name: get_xp(p).zeros_like(p) for name, p, _ in self.params} for b in buffers}
        self._scratch = _scratch_views(self.params)

    def step(self, lr: float | None = None, *, check_finite: bool = True) -> None:
        """One update of every parameter from its gradient.

        ``lr``: this step's learning rate (a schedule's value); it becomes the stored
        ``self.lr``. None: the stored one. A gradient holding inf or NaN is refused
        (ValueError naming it) before any parameter changes: the update would make them NaN.
        ``check_finite=False`` skips that pass, for a caller that knows the gradients are
        finite (the training loop has just found their global norm finite).
        """
        if check_finite:
            self._check_finite_gradients()
        if lr is not None:
            self.lr = check_number("lr", lr, low=0.0, finite=True)
        self.t += 1
        for name, p, g in self.params:
            self._update(name, p, g, self.lr)

    def _check_finite_gradients(self) -> None:
        """One sum per gradient, added on its device and read once (NaN and inf propagate into a
        sum); only when that is not finite, the gradients one by one, to name the culprit."""
        sums = [g.sum() for _, _, g in self.params]                    # 0-d each
        if math.isfinite(float(sum(sums[1:], sums[0]))):
            return
        for name, _, g in self.params:
            if not bool(get_xp(g).isfinite(g).all()):
                raise ValueError(f"step: the gradient of {name!r} holds inf or NaN; no parameter was "
                                 f"updated (clip_grad_norm returns the norm: stop when it is not finite)")

    def _update(self, name: str, p, g, lr: float) -> None:
        raise NotImplementedError(f"{type(self).__name__}._update")

    def zero_grad(self) -> None:
        for _, _, g in self.params:
            g[...] = 0

    # ---------------------------------------------------------------- checkpoints
    def state_dict(self) -> dict:
        """Step, lr, hyperparameters (JSON-able) and every buffer as a NumPy copy."""
        state = {"type": type(self).__name__, "step": self.t, "lr": self.lr}
        state.update({h: _jsonable(getattr(self, h)) for h in self.hyperparameters})
        for buffer, arrays in self.state.items():
            for name, a in arrays.items():
                # A copy: on the CPU to_numpy is a view, and later steps must not
                # change a state that was already saved.
                state[f"{buffer}/{name}"] = to_numpy(a).copy()
        return state

    def load_state_dict(self, state: dict) -> None:
        """Restore step, lr and buffers in place; everything is checked before anything changes.

        ``state['step']`` must be an integer >= 0 (a float or negative step would shift Adam's
        bias correction silently), ``state['lr']`` a finite number >= 0, every buffer a finite
        real array of its parameter's shape.
        """
        if not isinstance(state, dict):
            raise TypeError(f"state: expected a dict (an optimizer's state_dict()), got {type(state).__name__}")
        for key in ("type", "step", "lr"):
            if key not in state:
                raise ValueError(f"state: expected the key {key!r} of an optimizer's state_dict(), "
                                 f"got keys {sorted(map(str, state))}")
        kind = str(state.get("type"))
        if kind != type(self).__name__:
            raise ValueError(f"state['type']: expected {type(self).__name__!r}, got {kind!r}")
        for h in self.hyperparameters:
            try:
                saved = _jsonable(state[h]) if h in state else None
            except (TypeError, ValueError):
                raise ValueError(f"state[{h!r}]: expected {getattr(self, h)!r}, as this optimizer was "
                                 f"built, got {state[h]!r}") from None
            if saved != _jsonable(getattr(self, h)):
                raise ValueError(f"state[{h!r}]: expected {getattr(self, h)!r}, as this optimizer was "
                                 f"built, got {saved!r}; build it with the saved hyperparameters")
        expected = {f"{b}/{name}" for b in self.state for name, _, _ in self.params}
        given = {key for key in state if "/" in key}
        if expected != given:
            raise ValueError(f"state: missing buffers {sorted(expected - given)}, "
                           f"unexpected {sorted(given - expected)}")
        for key in sorted(expected):
            buffer, name = key.split("/", 1)
            check_real_finite(f"state[{key!r}]", state[key])
            check_same_shape(f"state[{key!r}]", state[key], self.state[buffer][name].shape)
        step = state["step"]
        if getattr(step, "ndim", None) == 0:               # a 0-d array from an .npz
            step = step.item()
        lr = state["lr"]
        if getattr(lr, "ndim", None) == 0:
            lr = lr.item()
        t = check_int("state['step']", step, low=0)
        lr = check_number("state['lr']", lr, low=0.0, finite=True)
        for key in sorted(expected):
            buffer, name = key.split("/", 1)
            a = self.state[buffer][name]
            a[...] = get_xp(a).asarray(to_device(state[key], device_of(a)), dtype=a.dtype)
        self.t, self.lr = t, lr

    def __repr__(self) -> str:
        hyper = ", ".join(f"{h}={getattr(self, h)!r}" for h in self.hyperparameters)
        return (f"{type(self).__name__}(lr={self.lr!r}{', ' if hyper else ''}{hyper}; "
                f"{len(self.params)} parameters, step {self.t})")


class SGD(Optimizer):
    """Stochastic gradient descent with heavy-ball momentum and L2 weight decay.

        d = g + λ p               (λ = weight_decay: the gradient of (λ/2)‖p‖², on every parameter)
        b = μ b + d               (μ = momentum; b starts at 0, so b = d at the first step)
        p = p - lr · b            (p = p - lr · d when μ = 0: no buffer is kept)
    """

    hyperparameters = ("momentum", "weight_decay")

    def __init__(self, params, lr: float, momentum: float = 0.0, weight_decay: float = 0.0):
        self.momentum = check_number("momentum", momentum, low=0.0, high=1.0, high_open=True)
        self.weight_decay = check_number("weight_decay", weight_decay, low=0.0, finite=True)
        super().__init__(params, lr, buffers=("b",) if self.momentum > 0 else ())

    def _update(self, name, p, g, lr):
        xp, tmp = get_xp(p), self._scratch[name]
        d = g                                               # the direction, (λ p +) g
        if self.weight_decay > 0:
            d = xp.multiply(p, self.weight_decay, out=tmp)  # λ p
            d += g                                          # d = g + λ p
        if self.momentum > 0:
            b = self.state["b"][name]
            b *= self.momentum
            b += d                                          # b = μ b + d
            d = b
        xp.multiply(d, lr, out=tmp)                         # lr · b; tmp may be d itself (elementwise: safe)
        p -= tmp


class Adam(Optimizer):
    """Adam (Kingma & Ba, 2015), with the bias correction of the paper.

        m = β1 m + (1 - β1) g                     first moment, m starts at 0
        v = β2 v + (1 - β2) g²                    second moment, v starts at 0
        m̂ = m / (1 - β1^t),  v̂ = v / (1 - β2^t)   undo the pull towards the zero start
        p = p - lr · m̂ / (√v̂ + ε)
    """

    hyperparameters = ("betas", "eps")

    def __init__(self, params, lr: float, betas=(0.9, 0.999), eps: float = 1e-8):
        if not isinstance(betas, (tuple, list)) or len(betas) != 2:
            raise ValueError(f"betas: expected a pair (beta1, beta2), got {betas!r}")
        self.betas = tuple(check_number(f"betas[{i}]", b, low=0.0, high=1.0, high_open=True)
                           for i, b in enumerate(betas))
        self.eps = check_number("eps", eps, low=0.0, low_open=True, finite=True)
        super().__init__(params, lr, buffers=("m", "v"))

    def _update(self, name, p, g, lr):
        xp, tmp = get_xp(p), self._scratch[name]
        m, v = self.state["m"][name], self.state["v"][name]
        beta1, beta2 = self.betas
        m *= beta1
        m += xp.multiply(g, 1.0 - beta1, out=tmp)           # m = β1 m + (1 - β1) g
        v *= beta2
        xp.multiply(g, g, out=tmp)                          # g²
        tmp *= 1.0 - beta2
        v += tmp                                            # v = β2 v + (1 - β2) g²
        # The bias corrections moved onto scalars (the order the paper suggests at the
        # end of its section 2), which saves a pass over v; multiplying through by
        # √(1 - β2^t) shows it is the same update:
        #   lr · m̂ / (√v̂ + ε) = α_t · m / (√v + ε̂)
        #   with α_t = lr · √(1 - β2^t) / (1 - β1^t) and ε̂ = ε · √(1 - β2^t)
        root_bias2 = math.sqrt(1.0 - beta2 ** self.t)
        xp.sqrt(v, out=tmp)
        tmp += self.eps * root_bias2                        # √v + ε̂
        xp.divide(m, tmp, out=tmp)                          # m / (√v + ε̂)
        tmp *= lr * root_bias2 / (1.0 - beta1 ** self.t)    # α_t · m / (√v + ε̂)
        p -= tmp


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov & Hutter, 2019).

        p = p - lr · λ · p        (λ = weight_decay), then the Adam update above.

    The decay acts on the weights directly, not through g, so Adam's per-coordinate
    scaling does not weaken it where gradients are large. It skips the parameters
    for which ``no_decay(name, param)`` is True (``default_no_decay``: 1-D parameters
    and embeddings); that choice is made once, here.
    """

    hyperparameters = ("betas", "eps", "weight_decay")

    def __init__(self, params, lr: float, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.01, no_decay=default_no_decay):
        self.weight_decay = check_number("weight_decay", weight_decay, low=0.0, finite=True)
        super().__init__(params, lr, betas=betas, eps=eps)
        self.decayed = {name: not no_decay(name, p) for name, p, _ in self.params}

    def _update(self, name, p, g, lr):
        if self.weight_decay > 0 and self.decayed[name]:
            p *= 1.0 - lr * self.weight_decay                # p = p - lr · λ · p
        super()._update(name, p, g, lr)


# ------------------------------------------------------------------------ helpers
def _materialise(params) -> list:
    """The (name, param, grad) triples as a list, checked once."""
    if callable(getattr(params, "parameters", None)):
        raise TypeError(f"params: expected the iterable model.parameters(), got the "
                        f"{type(params).__name__} itself; pass model.parameters()")
    try:
        triples = list(params)
    except TypeError:
        raise TypeError(f"params: expected an iterable of (name, param, grad) triples (model.parameters()), "
                        f"got {type(params).__name__}") from None
    if not triples:
        raise ValueError("params: expected at least one (name, param, grad) triple, got none "
                         "(an exhausted generator? call model.parameters() again)")
    names = set()
    for i, item in enumerate(triples):
        if not (isinstance(item, tuple) and len(item) == 3):
            raise TypeError(f"params[{i}]: expected a (name, param, grad) triple, got {type(item).__name__}")
        name, p, g = item
        check_float(f"param {name!r}", p)
        check_same_shape(f"grad of {name!r}", g, p.shape)
        if g.dtype != p.dtype:
            raise TypeError(f"grad of {name!r}: expected dtype {p.dtype} (the parameter's), got {g.dtype}")
        if name in names:
            raise ValueError(f"params: expected distinct names, got {name!r} twice")
        names.add(name)
    return triples


def _scratch_views(params) -> dict:
    """Per parameter, a view in its shape of one scratch buffer per (backend, dtype).

    Updates run one parameter after the other, so they can share one buffer as
    large as the largest parameter; the views are made once, here, not per step.
    """
    sizes = {}
    for _, p, _ in params:
        key = (get_xp(p), p.dtype)
        sizes[key] = max(sizes.get(key, 0), p.size)
    flat = {key: key[0].empty(size, dtype=key[1]) for key, size in sizes.items()}
    return {name: flat[(get_xp(p), p.dtype)][:p.size].reshape(p.shape) for name, p, _ in params}


def _jsonable(value):
    """Hyperparameters as JSON stores them (tuples become lists, numbers plain floats)."""
    if hasattr(value, "tolist"):
        value = value.tolist()
    if isinstance(value, (tuple, list)):
        return [float(x) for x in value]
    return float(value)
