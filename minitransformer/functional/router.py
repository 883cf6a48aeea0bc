"""The router of a sparse mixture of experts: top-k gating, expert capacity, load balancing.

A mixture-of-experts FFN (functional/moe.py) has E feed-forward experts and sends each
token to k of them (Shazeer et al. 2017; Switch Transformer, Fedus et al. 2022, k = 1).
The router scores the N tokens of a batch against the experts and decides:

    s = X W_r                                  (N, E) router logits          (in moe.py)
    p = softmax(s)                             (N, E) router probabilities
    e_{n,1..k}  = the k largest p_{n,:}        (N, k) expert ids, best first (ties: the lower id)
    g_{n,j}     = p_{n, e_{n,j}}               (N, k) the gates: token n's output from its j-th
                                                      expert is scaled by g_{n,j}

The gates are the probabilities themselves, as in Switch, not renormalised over the k
chosen (Mixtral renormalises; with k = 1 its one gate is always 1 and the task loss
would teach the router nothing).

Capacity. For fixed-size expert batches each expert has c slots:

    c = ⌈capacity_factor · N · k / E⌉          (N · k / E: the slots of a perfectly even split)

and the assignments (n, j) take them in order of choice rank j first (every token's
first choice before any second choice, as GShard does), then of token index n. An
assignment past its expert's c slots is DROPPED: that expert does not see the token,
and its share of the token's output is 0. A token whose every choice is dropped gets
0 from the FFN, so the residual connection around it passes the token on unchanged.

Load balancing (Switch Transformer, eq. 4). Left alone, a router sends most tokens to
a few experts; the auxiliary loss pushes towards an even split:

    f_e = #{(n, j) : e_{n,j} = e} / (N k)      the fraction of assignments expert e got
    P_e = (1/N) Σ_n p_{n,e}                    the mean router probability of expert e
    aux = E · Σ_e f_e P_e                      = 1 when both are uniform (f_e = P_e = 1/E);
                                                 E when every token goes to one expert with p = 1

f counts the router's choices before capacity (dropped ones included).

What is differentiable. p and g are smooth functions of s (a softmax, then a gather).
The choice e, the counts f and the capacity mask are piecewise constant in s: their
derivative is 0 almost everywhere and undefined where two probabilities tie, so the
backward treats them as constants. The router learns WHICH expert through the gates
(dL/dg_{n,j} says whether a larger weight on that expert helps) and through P in the
auxiliary loss:

    dp_{n,e} = Σ_j [e_{n,j} = e] dg_{n,j}      reverses the gather g = p[n, e_{n,j}]
    dp_{n,e} += daux · E · f_e / N             reverses aux = E Σ_e f_e P_e  (f constant)
"""
from __future__ import annotations

import math
from typing import NamedTuple

from ..backend import get_xp
from ..validate import check_float, check_int, check_ndim, check_number, check_size, check_upstream


def check_top_k(k, n_experts: int, source: str) -> int:
    """k as an int in [1, E], or an error naming k and where E comes from (``source``)."""
    k = check_int("k", k, low=1)
    if k > n_experts:
        raise ValueError(f"k: expected at most E = {n_experts} experts ({source}), got {k}")
    return k


def check_expert_ids(expert, n_experts: int, source: str) -> None:
    """TypeError or ValueError naming ``expert`` unless it holds integer ids in [0, E) (``source``: E's name)."""
    if getattr(expert.dtype, "kind", None) not in "iu":
        raise TypeError(f"expert: expected integer expert ids, got dtype {expert.dtype}")
    if expert.size and not 0 <= int(expert.min()) <= int(expert.max()) < n_experts:
        raise ValueError(f"expert: expected ids in [0, {source} = {n_experts}), got ids from {int(expert.min())} "
                         f"to {int(expert.max())}")


class TopKCache(NamedTuple):
    expert: object        # (N, k) the chosen expert ids, best first
    n_experts: int        # E, the width of dp
    dtype: object         # p's dtype, the gates' and dgate's


class LoadBalancingCache(NamedTuple):
    f: object             # (E,) fraction of assignments per expert: a constant for the backward
    p_shape: tuple        # (N, E), the shape of dp
    dtype: object         # p's dtype


def top_k_forward(p, k: int):
    """g_{n,j} = p_{n, e_{n,j}}, e_{n,1..k} the k largest entries of row n (ties: the lower id).

    Inputs: p (N, E) floating, router probabilities; k, 1 <= k <= E.
    Returns: gate g (N, k), TopKCache(expert (N, k) integer ids, best first, E).
    """
    xp = get_xp(p)
    check_ndim("p", p, 2, "(N, E)")
    check_float("p", p)
    E = p.shape[1]
    if E < 1:
        raise ValueError(f"p: expected at least one expert (a column), got shape {tuple(p.shape)}")
    k = check_top_k(k, E, "the columns of p")
    order = xp.argsort(-p, axis=1, kind="stable")                  # (N, E) best first, ties by id
    expert = order[:, :k]                                          # (N, k)
    token = xp.arange(p.shape[0])[:, None]                         # (N, 1)
    gate = p[token, expert]                                        # (N, k)
    return gate, TopKCache(expert, E, p.dtype)


def top_k_backward(dgate, cache: TopKCache):
    """dp_{n,e} = dg_{n,j} where e = e_{n,j}, 0 elsewhere. Inputs: dgate (N, k). Returns: dp (N, E)."""
    expert, E, dtype = cache
    check_upstream("dgate", dgate, expert.shape, dtype)            # the gates' shape and dtype
    xp = get_xp(dgate)
    dp = xp.zeros((expert.shape[0], E), dtype=dgate.dtype)        # (N, E)
    token = xp.arange(expert.shape[0])[:, None]                    # (N, 1)
    dp[token, expert] = dgate                                      # reverses: gate = p[token, expert] (k distinct ids)
    return dp


def expert_capacity(n_tokens: int, n_experts: int, k: int, capacity_factor) -> int:
    """c = ⌈capacity_factor · N · k / E⌉ slots per expert, at most N; capacity_factor None: N (no limit).

    Inputs: n_tokens N >= 0, n_experts E >= 1, k >= 1, capacity_factor > 0 or None.
    """
    N = check_int("n_tokens", n_tokens, low=0)
    E = check_int("n_experts", n_experts, low=1)
    k = check_top_k(k, E, "n_experts")
    if capacity_factor is None:
        return N                                                   # each token reaches an expert once at most
    factor = check_number("capacity_factor", capacity_factor, low=0.0, low_open=True, finite=True)
    slots = factor * N * k / E
    return N if slots >= N else math.ceil(slots)                   # more than N slots are never used


def capacity_mask(expert, n_experts: int, capacity: int):
    """kept_{n,j}: assignment (n, j) holds one of its expert's ``capacity`` slots.

    Slots go in order of choice rank j, then of token n (the module docstring).
    Inputs: expert (N, k) integer ids in [0, E); n_experts E; capacity c >= 0.
    Returns: kept (N, k) booleans.
    """
    xp = get_xp(expert)
    check_ndim("expert", expert, 2, "(N, k)")
    E = check_int("n_experts", n_experts, low=1)
    c = check_int("capacity", capacity, low=0)
    check_expert_ids(expert, E, "n_experts")
    check_size("expert, n_experts", (expert.size, E))              # the (k N, E) queue below
    queue = expert.T.reshape(-1)                                   # (k N,) rank 1 of every token, then rank 2 ...
    one_hot = queue[:, None] == xp.arange(E)[None, :]              # (k N, E)
    place = xp.cumsum(one_hot, axis=0) - 1                         # (k N, E) place in each expert's queue
    own_place = place[xp.arange(queue.shape[0]), queue]           # (k N,) its place in its own expert's queue
    kept = own_place < c                                           # (k N,)
    return kept.reshape(expert.shape[1], expert.shape[0]).T        # (N, k)


def load_balancing_forward(p, expert):
    """aux = E · Σ_e f_e P_e (Switch Transformer's auxiliary loss; the module docstring).

    Inputs: p (N, E) router probabilities; expert (N, k) the chosen ids (top_k_forward's).
    Returns: aux as a 0-d array of p's dtype (0 for N = 0), LoadBalancingCache.
    """
    xp = get_xp(p)
    check_ndim("p", p, 2, "(N, E)")
    check_float("p", p)
    check_ndim("expert", expert, 2, "(N, k)")
    if expert.shape[0] != p.shape[0]:
        raise ValueError(f"expert: expected {p.shape[0]} rows (N, the rows of p), got shape {tuple(expert.shape)}")
    N, E = p.shape
    check_expert_ids(expert, E, "E, the columns of p")             # an id past E would count for no expert
    counts = (expert.reshape(-1)[:, None] == xp.arange(E)[None, :]).sum(axis=0)   # (E,)
    f = counts.astype(p.dtype) / max(expert.size, 1)               # (E,) fraction of assignments
    P = p.sum(axis=0) / max(N, 1)                                  # (E,) mean probability
    aux = E * (f * P).sum()                                        # ()
    return aux, LoadBalancingCache(f, tuple(p.shape), p.dtype)


def load_balancing_backward(daux, cache: LoadBalancingCache):
    """dp_{n,e} = daux · E · f_e / N (f held constant). Inputs: daux, a real number. Returns: dp (N, E)."""
    xp = get_xp(cache.f)
    daux = check_number("daux", daux, finite=True)
    N, E = cache.p_shape
    dP = daux * E * cache.f                                        # (E,) reverses: aux = E Σ f_e P_e
    dp = xp.broadcast_to(dP / max(N, 1), (N, E)).astype(cache.dtype)   # (N, E) reverses: P = Σ_n p / N
    return dp
