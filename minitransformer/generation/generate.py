"""Generation: greedy decoding, sampling and beam search, with or without the KV cache.

The model gives the next-token distribution; a strategy picks from it:

    p(v | x_1..x_t) = softmax(logits_t)_v                    logits_t (V,): the last position
    greedy   x_{t+1} = argmax_v logits_t[v]
    sample   x_{t+1} ~ softmax(filter(logits_t / τ))          τ: temperature; τ = 0 means greedy
             filter: top-k keeps the k largest logits (ties at the k-th value all stay), then
             top-p keeps the nucleus: the smallest set of most probable tokens whose probability
             sums to >= p (ties broken by the lower token id); every other logit becomes -inf
    beam     keep the W prefixes of highest Σ log p. An EOS extension that ranks among the
             W best extensions of its step is set aside as a finished hypothesis (so a beam
             of 1 with α = 0 is greedy decoding; with α > 0 the live beam goes on past
             greedy's EOS and a longer hypothesis can outscore it); the W live beams are the best extensions without EOS.
             Hypotheses are ranked by  score(y) = Σ_t log p(y_t | y_<t) / |y|^α,
             α = length_penalty, |y| = the number of generated tokens, EOS included (the
             simple form; GNMT divides by ((5 + |y|) / 6)^α instead). α = 0: the raw sum,
             which favours short outputs; α = 1: the mean log-probability per token.

Everything model-specific sits in one step function, ``LogitsStep``: fed the tokens
that are new since its last call, it returns the logits of the next token. Two
loops, token by token (greedy, sampling) and beams, drive GPT and the
encoder-decoder alike through it.

KV cache. With ``use_cache`` the prompt is fed once and every new token costs one
position: each attention layer keeps the keys and values of the positions seen
(models/decoder.py). Without it, every step re-runs the whole prefix, the
textbook way: the same tokens, about T times the work.

Context length (block_size positions). Without the cache, a longer sequence is
cropped to its last block_size tokens. With the cache, positions are absolute
(learned, sinusoidal, RoPE, ALiBi) and cannot slide: a prompt of T0 tokens has room
for at most block_size - T0 + 1 new tokens (the last one is predicted, never fed).
Asking for more is a ValueError that says how many fit; use_cache=False goes on
with a cropped context. ``cache_window`` (with ``n_sink``) switches to a rolling
cache (StreamingLLM, Xiao et al. 2023): it keeps the first n_sink positions
("attention sinks") and the cache_window most recent, with positions by cache
slot, so generation goes on past block_size for RoPE, ALiBi or no positions
(learned and sinusoidal positions are refused: they have no rows past block_size).

End of sequence. With ``eos_id``, a row that has produced it is finished: it keeps
receiving eos_id, so the rows stay aligned, and the loop ends once every row has
finished. Beam search stops when no live beam can still beat the W finished
hypotheses of its row: a live beam only loses log-probability, so its best final
score is bounded by its current sum over the most favourable length penalty.

Host and device. The tokens are chosen on the host from a NumPy generator: the
(B, V) logits of the last position come to the host each step (a view on the
CPU), the chosen ids go back to the model's device. Results are NumPy int64.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import NamedTuple

import numpy as np

from ..backend import device_of, to_device, to_numpy
from ..functional.softmax import log_softmax_forward, softmax_forward
from ..models import GPT, Seq2Seq
from ..validate import (check_choice, check_flag, check_float, check_generator, check_int, check_integer_ids,
                       check_ndim, check_number)
from .sink_cache import rolling_cache

STRATEGIES = ("greedy", "sample", "beam")
TRACE_TOP = 5        # candidates recorded per row and step in a trace


class TraceStep(NamedTuple):
    """What one decoding step did; ``trace`` lists collect one per step.

    Rows are the batch rows, or for beam search the B·W beams (row b·W + j is beam j of prompt b).
    """
    tokens: list         # per row, the token appended at this step
    candidates: list     # per row (before beams are re-ranked), the TRACE_TOP most probable
    #                      (token id, probability) of the distribution the choice was made from
    parents: list | None  # beam search: the row each new beam extends; None otherwise
    scores: list | None   # beam search: each beam's Σ log p after this step; None otherwise


class DecodingOptions(NamedTuple):
    """The checked strategy settings (see _check_options)."""
    strategy: str
    temperature: float
    top_k: int | None
    top_p: float | None
    beam_size: int
    length_penalty: float
    rng: object


# ------------------------------------------------------------------ public entrances
def generate(model, prompt_ids, max_new_tokens, strategy="greedy", temperature=1.0, top_k=None,
             top_p=None, beam_size=4, length_penalty=1.0, eos_id=None, rng=None, use_cache=True,
             trace=None, cache_window=None, n_sink=4):
    """Continue each prompt with a GPT.

    Inputs: model, a GPT; prompt_ids (B, T0) integer ids, T0 >= 1; max_new_tokens >= 0;
    strategy "greedy" | "sample" | "beam"; temperature >= 0 (finite), top_k >= 1, top_p in (0, 1]
    (top_p <= 0 is a ValueError, never read as greedy)
    (sampling only; ``rng``, a numpy Generator, is required for "sample"); beam_size W,
    length_penalty α (beam only); eos_id: the end-of-sequence id or None; use_cache;
    trace: None or a list that receives one TraceStep per step; cache_window: None, or the
    recent positions a rolling cache keeps besides its n_sink first ones (attention sinks,
    StreamingLLM's 4 by default; n_sink=0: a plain sliding window), n_sink + cache_window <=
    block_size, use_cache required.
    Returns: ids (B, T0 + n) NumPy int64, the prompt then n new tokens; n < max_new_tokens
    only when every row has finished (eos_id). With use_cache and no cache_window,
    max_new_tokens may be at most block_size - T0 + 1 (ValueError otherwise: the cache
    cannot slide); with a cache_window it is unbounded.
    """
    if not isinstance(model, GPT):
        raise TypeError(f"model: expected a GPT (a Seq2Seq decodes with generate_seq2seq), "
                        f"got {type(model).__name__}")
    config = model.config
    prompt = _check_prompt(prompt_ids, config.vocab_size)
    n = check_int("max_new_tokens", max_new_tokens, low=0)
    options = _check_options(strategy, temperature, top_k, top_p, beam_size, length_penalty, rng)
    eos_id = _check_eos(eos_id, config.vocab_size)
    _check_trace(trace)
    T0 = prompt.shape[1]
    use_cache = check_flag("use_cache", use_cache)
    streaming = _check_streaming(model, cache_window, n_sink, use_cache)
    if use_cache:
        if T0 > config.block_size:
            raise ValueError(f"prompt_ids: with use_cache the prompt must fit the context, expected at most "
                             f"block_size={config.block_size} tokens, got {T0} (use_cache=False crops)")
        room = config.block_size - T0 + 1                  # the last new token is never fed
        if n > room and streaming is None:
            raise ValueError(f"max_new_tokens: with use_cache a prompt of {T0} tokens leaves room for at most "
                             f"{room} new tokens (block_size={config.block_size}), got {n}; ask for at most "
                             f"{room}, or use_cache=False to go on with the context cropped")
    with _inference(model):
        step = LogitsStep(model, use_cache=use_cache, streaming=streaming)
        new = _decode(step, prompt, n, options, eos_id, trace)
    return np.concatenate([prompt, new], axis=1)          # (B, T0 + n)


def _check_streaming(model, cache_window, n_sink, use_cache):
    """None, or the rolling cache's arguments {n_sink, window}, checked (rolling_cache checks the rest)."""
    if cache_window is None:
        return None
    if not use_cache:
        raise ValueError(f"cache_window: a rolling cache needs use_cache=True, got use_cache=False "
                         f"with cache_window={cache_window}")
    streaming = dict(n_sink=check_int("n_sink", n_sink, low=0),
                     window=check_int("cache_window", cache_window, low=1))
    block_size = model.config.block_size
    if streaming["n_sink"] + streaming["window"] > block_size:
        raise ValueError(f"cache_window: the cache slots n_sink + cache_window must fit block_size={block_size}, "
                         f"got n_sink={n_sink} + cache_window={cache_window}")
    rolling_cache(model, **streaming)                  # refuses learned positions, a window too large
    return streaming


def generate_seq2seq(model, src, max_len, bos_id, eos_id, strategy="greedy", src_mask=None,
                     temperature=1.0, top_k=None, top_p=None, beam_size=4, length_penalty=1.0,
                     rng=None, use_cache=True, trace=None):
    """Decode a target for each source row with an encoder-decoder, starting from BOS.

    Inputs: model, a Seq2Seq; src (N, S) source ids; max_len <= block_size target tokens;
    bos_id, eos_id; src_mask (N, S) True = real token (None: src != pad_id); the strategy
    settings as in ``generate``.
    Returns: (N, max_len) NumPy int64, the predicted tokens after BOS; every position after
    a row's EOS holds EOS too (the rows of a batch finish at different times).
    """
    if not isinstance(model, Seq2Seq):
        raise TypeError(f"model: expected a Seq2Seq (a GPT generates with generate), "
                        f"got {type(model).__name__}")
    config = model.config
    check_ndim("src", src, 2, "(N, S)")
    check_integer_ids("src", src, config.src_vocab_size or config.vocab_size)
    n = check_int("max_len", max_len, low=0)
    if n > config.block_size:                           # BOS and max_len - 1 tokens are fed
        raise ValueError(f"max_len: the decoder has block_size={config.block_size} positions, "
                         f"expected at most {config.block_size} target tokens, got {n}")
    bos_id = check_int("bos_id", bos_id, low=0, high=config.vocab_size - 1)
    eos_id = check_int("eos_id", eos_id, low=0, high=config.vocab_size - 1)
    options = _check_options(strategy, temperature, top_k, top_p, beam_size, length_penalty, rng)
    _check_trace(trace)
    device = _device(model)
    src = to_device(src, device)
    bos = np.full((src.shape[0], 1), bos_id, dtype=np.int64)            # (N, 1)
    with _inference(model):
        mask = model.source_mask(src, None if src_mask is None else to_device(src_mask, device))
        memory = model.encode(src, mask)                                # (N, S, C)
        step = LogitsStep(model.decoder, memory, mask, use_cache=use_cache)
        new = _decode(step, bos, n, options, eos_id, trace)             # (N, n') n' <= n
    out = np.full((src.shape[0], n), eos_id, dtype=np.int64)            # rows that all ended early
    out[:, :new.shape[1]] = new
    return out


def greedy_seq2seq(model, src, max_len, bos_id, eos_id, use_cache=True):
    """Greedy decoding with an encoder-decoder: (N, max_len) int64, EOS after EOS."""
    return generate_seq2seq(model, src, max_len, bos_id, eos_id, strategy="greedy", use_cache=use_cache)


def beam_seq2seq(model, src, max_len, bos_id, eos_id, beam_size=4, length_penalty=1.0, use_cache=True,
                 trace=None):
    """Beam search with an encoder-decoder: the best hypothesis per row, (N, max_len) int64."""
    return generate_seq2seq(model, src, max_len, bos_id, eos_id, strategy="beam", beam_size=beam_size,
                            length_penalty=length_penalty, use_cache=use_cache, trace=trace)


# ------------------------------------------------------------- the step function
class LogitsStep:
    """The next-token logits of a decoder stack, fed only the tokens new since the last call.

        step(new_ids (B, t) host ints) -> logits (B, V) of the last position, on the host
        step.reorder(index (B',))      -> keep rows ``index`` (beams re-ranked, or B -> B·W)

    With the cache, the new tokens are the whole input; without it, they join the
    history and the last block_size tokens of it are run again.
    """

    def __init__(self, decoder, memory=None, memory_mask=None, use_cache=True, streaming=None):
        self.decoder, self.memory, self.memory_mask = decoder, memory, memory_mask
        self.block_size = decoder.config.block_size
        self.device = _device(decoder)
        self.cache = None
        if use_cache:
            self.cache = rolling_cache(decoder, **streaming) if streaming else decoder.new_cache()
        self.history = None                       # uncached: every token so far (B, t), host

    def __call__(self, new_ids):
        if self.cache is None:
            self.history = new_ids if self.history is None else np.concatenate([self.history, new_ids], axis=1)
            context = self.history[:, -self.block_size:]          # (B, ≤ block_size): crop
        else:
            context = new_ids                                     # the cache holds the rest
        memory = () if self.memory is None else (self.memory, self.memory_mask)
        logits = self.decoder.forward(to_device(context, self.device), *memory, cache=self.cache)  # (B, t, V)
        last = to_numpy(logits[:, -1])                            # (B, V)
        if not np.isfinite(last).all():   # NaN logits would argmax to token 0 forever, silently
            raise ValueError(f"model: the next-token logits are not finite ({int((~np.isfinite(last)).sum())} "
                             f"NaN or inf of {last.size}); the weights hold NaN/inf or overflowed: "
                             f"check model.state_dict() and the training run that produced it")
        return last

    def reorder(self, index) -> None:
        """Keep rows ``index`` (host ints) of every per-row state: caches, history, memory."""
        on_device = to_device(index, self.device)
        if self.cache is not None:
            reorder_cache(self.cache, on_device)
        if self.history is not None:
            self.history = self.history[index]                    # (B', t)
        if self.memory is not None:
            self.memory, self.memory_mask = self.memory[on_device], self.memory_mask[on_device]


def reorder_cache(cache, index) -> None:
    """Keep batch rows ``index`` of every KVCache of a DecoderCache, along axis 0 of k and v.

    Beam search calls it when beams are re-ranked (row r becomes old row index[r]) and
    to expand B prompts into B·W beams. The cross-attention caches are indexed too: all
    beams of a source hold the same memory, but the batch axes must stay aligned.
    """
    for kv in cache.self_attn + cache.cross_attn:
        if kv is not None:
            kv.reorder(index)


# ----------------------------------------------------------- choosing one token
def filter_logits(logits, temperature=1.0, top_k=None, top_p=None):
    """logits / τ with every token outside the top-k and outside the nucleus set to -inf.

    Inputs: logits (B, V); temperature τ > 0; top_k >= 1 or None; top_p in (0, 1] or None.
    top_p <= 0 is refused (ValueError), not read as greedy: a nucleus of probability 0
    would hold no token at all; ask for strategy="greedy" (or temperature 0) instead.
    Returns: z (B, V), a new array of logits' dtype, shifted so each row's max is 0.
    """
    check_ndim("logits", logits, 2, "(B, V)")
    check_float("logits", logits)
    if logits.shape[1] == 0:
        raise ValueError(f"logits: expected at least one token per row, got shape {logits.shape}")
    temperature = check_number("temperature", temperature, low=0.0, low_open=True, finite=True)
    if top_k is not None:
        top_k = check_int("top_k", top_k, low=1)
    if top_p is not None:
        top_p = check_number("top_p", top_p, low=0.0, high=1.0, low_open=True)
    top = logits.max(axis=-1, keepdims=True)                  # (B, 1)
    if np.isnan(logits).any() or not np.isfinite(top).all():
        raise ValueError("logits: expected finite numbers or -inf (a token ruled out), at least one finite "
                         "in every row; got NaN, +inf or a row of -inf")
    z = logits - top                                          # (B, V): max 0, so z / τ never gives inf - inf
    tau = max(temperature, float(np.finfo(z.dtype).tiny))     # a smaller τ rounds to 0 in z's dtype: 0 / 0 at the max
    with np.errstate(over="ignore"):                           # z ≪ 0 over a small τ is -inf: its probability's limit, 0
        z /= tau
    V = z.shape[-1]
    if top_k is not None and top_k < V:
        kth = np.partition(z, V - top_k, axis=-1)[:, V - top_k, None]   # (B, 1) the k-th largest
        z[z < kth] = -np.inf
    if top_p is not None and top_p < 1.0:
        z[outside_nucleus(softmax_forward(z)[0], top_p)] = -np.inf
    return z


def outside_nucleus(p, top_p):
    """True for the tokens outside the nucleus: the smallest set of most probable tokens
    whose probability sums to >= top_p (a token stays iff the more probable ones sum to < top_p).

    Inputs: p (B, V) probabilities; top_p in (0, 1]. Returns: (B, V) bool.
    """
    check_ndim("p", p, 2, "(B, V)")
    check_float("p", p)
    check_number("top_p", top_p, low=0.0, high=1.0, low_open=True)   # 0 would keep no token at all
    order = np.argsort(-p, axis=-1, kind="stable")           # (B, V) most probable first, ties by id
    p_sorted = np.take_along_axis(p, order, axis=-1)           # (B, V)
    total = np.cumsum(p_sorted, axis=-1)                       # (B, V)
    before = np.concatenate([np.zeros_like(total[:, :1]), total[:, :-1]], axis=-1)  # mass ranked above
    outside = np.empty(p.shape, dtype=bool)
    np.put_along_axis(outside, order, before >= top_p, axis=-1)
    return outside


def sample_tokens(probs, rng):
    """One token per row, drawn by inverse CDF: u ~ U[0, Σp), the first token whose
    cumulative probability exceeds u.

    u is scaled by the row total (float32 sums drift from 1). Rounding can still give
    u = cdf[-1] (the count of cdf values <= u would then be V, outside the vocabulary),
    so the index is capped at the last token of nonzero probability: a token of
    probability 0 is never drawn, and the id is always in [0, V).
    Inputs: probs (B, V) finite, >= 0, each row summing to > 0; rng, a numpy Generator.
    Returns: (B,) int64.
    """
    check_generator("rng", rng)
    check_ndim("probs", probs, 2, "(B, V)")
    check_float("probs", probs)
    if probs.shape[1] == 0:
        raise ValueError(f"probs: expected at least one token per row, got shape {probs.shape}")
    positive = probs > 0                                       # (B, V)
    if not (np.isfinite(probs).all() and (probs >= 0).all() and positive.any(axis=-1).all()):
        raise ValueError("probs: expected finite probabilities >= 0 with a positive sum in every row")
    cdf = np.cumsum(probs, axis=-1)                            # (B, V)
    u = rng.random(probs.shape[0]) * cdf[:, -1]                # (B,) in [0, Σp]
    drawn = (cdf <= u[:, None]).sum(axis=-1)                   # (B,) tokens below u, = the index drawn
    last = probs.shape[1] - 1 - positive[:, ::-1].argmax(axis=-1)   # (B,) the last token with p > 0
    return np.minimum(drawn, last).astype(np.int64)


def _softmax(logits):
    return softmax_forward(logits)[0]                          # (B, V); the cache is not needed


def _chooser(options: DecodingOptions):
    """(pick, distribution): logits (B, V) -> tokens (B,), and -> the probabilities picked from."""
    o = options
    if o.strategy == "greedy" or o.temperature == 0.0:       # τ -> 0 puts all the mass on the argmax
        return (lambda logits: logits.argmax(axis=-1)), _softmax

    def distribution(logits):
        return _softmax(filter_logits(logits, o.temperature, o.top_k, o.top_p))

    return (lambda logits: sample_tokens(distribution(logits), o.rng)), distribution


# ---------------------------------------------------------------- the two loops
def _decode(step, prompt, n, options, eos_id, trace):
    """New tokens (B, n') for ``prompt`` (B, T0): beams, or token by token."""
    if options.strategy == "beam":
        return _beam_search(step, prompt, n, options.beam_size, options.length_penalty, eos_id, trace)
    return _token_by_token(step, prompt, n, _chooser(options), eos_id, trace)


def _token_by_token(step, prompt, n, chooser, eos_id, trace):
    """Feed the prompt, then each chosen token; stops after n tokens or when all rows ended."""
    pick, distribution = chooser
    out = np.empty((prompt.shape[0], n), dtype=np.int64)      # (B, n)
    finished = np.zeros(prompt.shape[0], dtype=bool)          # (B,) rows past their EOS
    logits = step(prompt) if n else None                      # (B, V)
    for t in range(n):
        tokens = pick(logits).astype(np.int64)                # (B,)
        if eos_id is not None:
            tokens[finished] = eos_id                         # a finished row repeats EOS
            finished |= tokens == eos_id
        out[:, t] = tokens
        if trace is not None:
            trace.append(TraceStep(tokens.tolist(), _top_candidates(distribution(logits)), None, None))
        if t + 1 == n or finished.all():
            return out[:, :t + 1]
        logits = step(tokens[:, None])                        # (B, V): one new position per row
    return out


class _Finished(NamedTuple):
    """Finished hypotheses of beam search, the W best per prompt, best first."""
    scores: np.ndarray   # (B, W) normalised scores Σ log p / |y|^α; -inf = empty slot
    seqs: np.ndarray     # (B, W, n) tokens, EOS after the end


def _beam_search(step, prompt, n, W, alpha, eos_id, trace):
    """Beam search; returns the best hypothesis per prompt, (B, n') with EOS after its end."""
    B = prompt.shape[0]
    if n == 0:
        return np.empty((B, 0), dtype=np.int64)
    rows = np.repeat(np.arange(B), W)                          # (B·W,) prompt b -> beams b·W .. b·W+W-1
    logits = step(prompt)[rows]                                # (B·W, V)
    step.reorder(rows)
    V = logits.shape[-1]
    scores = np.full((B, W), -np.inf, dtype=logits.dtype)      # (B, W) Σ log p of each live beam
    scores[:, 0] = 0                                           # one live beam at first: no W copies
    seqs = np.full((B * W, n), 0 if eos_id is None else eos_id, dtype=np.int64)   # (B·W, n)
    done = _Finished(np.full((B, W), -np.inf, dtype=logits.dtype), seqs.reshape(B, W, n).copy())
    for t in range(n):
        logp = log_softmax_forward(logits)[0]                  # (B·W, V)
        candidates = _top_candidates(np.exp(logp)) if trace is not None else None
        total = (scores[:, :, None] + logp.reshape(B, W, V)).reshape(B, W * V)   # (B, W·V) every extension
        if eos_id is not None:
            done = _set_aside(done, seqs, total, t, alpha, eos_id)
            total.reshape(B, W, V)[:, :, eos_id] = -np.inf     # live beams go on without EOS
        best = np.argsort(-total, axis=-1, kind="stable")[:, :W]                  # (B, W)
        scores = np.take_along_axis(total, best, axis=-1)                          # (B, W)
        tokens = (best % V).reshape(-1)                                            # (B·W,)
        rows = (np.arange(B)[:, None] * W + best // V).reshape(-1)                 # (B·W,) parent rows
        seqs = seqs[rows]
        seqs[:, t] = tokens
        if trace is not None:
            trace.append(TraceStep(tokens.tolist(), candidates, rows.tolist(), scores.reshape(-1).tolist()))
        if t + 1 == n or _no_beam_can_win(done, scores, t + 1, n, alpha):
            return _best(done, seqs.reshape(B, W, n), scores, t + 1, alpha)[:, :t + 1]
        step.reorder(rows)
        logits = step(tokens[:, None])                         # (B·W, V)


def _set_aside(done: _Finished, seqs, total, t, alpha, eos_id) -> _Finished:
    """The EOS extensions among the W best extensions (B, W·V) of step t join the finished
    pool, which keeps its W best. (Only those: so a beam of 1 with α = 0 is exactly greedy decoding.)"""
    B, W = done.scores.shape
    V = total.shape[1] // W
    wth_best = np.partition(total, -W, axis=-1)[:, -W, None]                       # (B, 1)
    eos_total = total.reshape(B, W, V)[:, :, eos_id]                                # (B, W)
    eos_scores = np.where(eos_total >= wth_best, eos_total / (t + 1) ** alpha, -np.inf)
    ended = seqs.reshape(B, W, -1).copy()                                           # (B, W, n)
    ended[:, :, t] = eos_id
    scores = np.concatenate([done.scores, eos_scores], axis=1)                      # (B, 2W)
    keep = np.argsort(-scores, axis=-1, kind="stable")[:, :W]                       # (B, W)
    seqs_all = np.concatenate([done.seqs, ended], axis=1)                           # (B, 2W, n)
    return _Finished(np.take_along_axis(scores, keep, axis=-1),
                     np.take_along_axis(seqs_all, keep[:, :, None], axis=1))


def _no_beam_can_win(done: _Finished, scores, length, n, alpha) -> bool:
    """True when, for every prompt, no live beam can end above its worst finished hypothesis.

    A live sum s <= 0 only decreases; its final length L lies in [length + 1, n], and s / L^α
    is largest at one end of that range, so max over both ends bounds its final score.
    """
    if length >= n:
        return True
    bound = np.maximum(scores / (length + 1) ** alpha, scores / n ** alpha).max(axis=1)   # (B,)
    return bool((done.scores[:, -1] >= bound).all())


def _best(done: _Finished, seqs, scores, length, alpha):
    """The best of the finished and the live hypotheses (normalised at ``length``), per prompt: (B, n)."""
    B, W, _ = seqs.shape
    all_scores = np.concatenate([done.scores, scores / length ** alpha], axis=1)    # (B, 2W)
    winner = all_scores.argmax(axis=1)                                              # (B,) finished first on ties
    return np.concatenate([done.seqs, seqs], axis=1)[np.arange(B), winner]          # (B, n)


def _top_candidates(probs):
    """Per row, the TRACE_TOP most probable (token id, probability), most probable first."""
    order = np.argsort(-probs, axis=-1, kind="stable")[:, :TRACE_TOP]              # (B, k)
    top = np.take_along_axis(probs, order, axis=-1)                                 # (B, k)
    return [list(zip(ids, ps)) for ids, ps in zip(order.tolist(), top.tolist())]


# ----------------------------------------------------------------------- checks
def _check_options(strategy, temperature, top_k, top_p, beam_size, length_penalty, rng) -> DecodingOptions:
    check_choice("strategy", strategy, STRATEGIES)
    temperature = check_number("temperature", temperature, low=0.0, finite=True)
    if top_k is not None:
        top_k = check_int("top_k", top_k, low=1)
    if top_p is not None:
        top_p = check_number("top_p", top_p, low=0.0, high=1.0, low_open=True)
    if strategy != "sample" and (top_k is not None or top_p is not None or temperature != 1.0):
        raise ValueError(f"temperature, top_k, top_p: they shape the distribution strategy='sample' draws "
                         f"from; expected the defaults (1.0, None, None) with strategy={strategy!r}, "
                         f"got ({temperature}, {top_k}, {top_p})")
    if strategy == "sample":
        check_generator("rng", rng)
    beam_size = check_int("beam_size", beam_size, low=1)
    length_penalty = check_number("length_penalty", length_penalty, finite=True)
    return DecodingOptions(strategy, temperature, top_k, top_p, beam_size, length_penalty, rng)


def _check_prompt(prompt_ids, vocab_size: int):
    prompt = to_numpy(prompt_ids)
    check_ndim("prompt_ids", prompt, 2, "(B, T0)")
    check_integer_ids("prompt_ids", prompt, vocab_size)
    if 0 in prompt.shape:
        raise ValueError(f"prompt_ids: expected at least one row and one token (the next token is "
                         f"predicted from the last one), got shape {prompt.shape}")
    return prompt.astype(np.int64, copy=False)


def _check_eos(eos_id, vocab_size: int):
    return None if eos_id is None else check_int("eos_id", eos_id, low=0, high=vocab_size - 1)


def _check_trace(trace) -> None:
    if trace is not None and not isinstance(trace, list):
        raise TypeError(f"trace: expected None or a list to append TraceSteps to, got {type(trace).__name__}")


def _device(module) -> str:
    return device_of(next(module.parameters())[1])


@contextmanager
def _inference(model):
    """Eval mode (no dropout) while generating; then the previous mode back and the
    forward caches dropped: generation runs no backward."""
    was_training = model.training
    model.eval()
    try:
        yield
    finally:
        model.release_caches()
        model.train(was_training)
