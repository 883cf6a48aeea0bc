"""Generation: the KV cache changes nothing but the cost; each strategy means what it says;
beam search is exact when the beam holds every prefix; the command's errors are clear.

Tolerances. Cached and uncached logits agree to 1e-12: the same float64 products
in a different grouping differ by ~1e-15. Sampling frequencies are compared with
hand-computed probabilities within 5 binomial standard deviations.
"""
import argparse
import re

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from minitransformer.training.checkpoint import save_checkpoint
from minitransformer.cli.generate import add_generate_arguments, run_generate
from minitransformer.generation.generate import (LogitsStep, beam_seq2seq, filter_logits, generate, generate_seq2seq,
                                      greedy_seq2seq, outside_nucleus, sample_tokens)
from minitransformer.models import GPT, GPTConfig, Seq2Seq, Seq2SeqConfig
from minitransformer.tokenizers import CharTokenizer
from strategies import integer_ids, seeds

F64 = np.float64
LOGIT_TOL = 1e-12
# init_std 0.4: peaked distributions, so the strategies make different, meaningful choices.
TINY = dict(vocab_size=11, block_size=10, n_layer=2, n_head=4, d_model=16, d_ff=24, init_std=0.4)
POSITIONS = ["learned", "sinusoidal", "rope", "alibi", "shaw", "t5", "none"]
decoder_variants = st.fixed_dictionaries({
    "position": st.sampled_from(POSITIONS),
    "n_kv_head": st.sampled_from([None, 2, 1]),             # MHA, grouped-query, multi-query
    "window": st.sampled_from([None, 3]),
    "norm_position": st.sampled_from(["pre", "post"]),
})


def tiny_gpt(seed=0, **overrides):
    return GPT(GPTConfig(**{**TINY, **overrides}), rng=seed, dtype=F64)


def tiny_seq2seq(seed=0, **overrides):
    return Seq2Seq(Seq2SeqConfig(**{**TINY, **overrides}), rng=seed, dtype=F64)


def first_eos_then_eos(row, eos):
    """True when every position after the first EOS of ``row`` holds EOS too."""
    hits = np.flatnonzero(row == eos)
    return hits.size == 0 or bool((row[hits[0]:] == eos).all())


# ------------------------------------------------------------------ the KV cache
@pytest.mark.parametrize("position", POSITIONS)   # each for sure: the draws had missed 'rope' and 'shaw'
@settings(max_examples=3)
@given(v=decoder_variants, seed=seeds)
def test_cached_step_logits_equal_the_full_rerun(position, v, seed):
    """Every next-token distribution, not only the argmax, is the same with the cache."""
    model = tiny_gpt(seed % 100, **{**v, "position": position}).eval()
    ids = integer_ids(seed, (2, TINY["block_size"]), TINY["vocab_size"])
    cached, rerun = LogitsStep(model, use_cache=True), LogitsStep(model, use_cache=False)
    np.testing.assert_allclose(cached(ids[:, :3]), rerun(ids[:, :3]), rtol=LOGIT_TOL, atol=LOGIT_TOL)
    for t in range(3, ids.shape[1]):
        np.testing.assert_allclose(cached(ids[:, t:t + 1]), rerun(ids[:, t:t + 1]),
                                   rtol=LOGIT_TOL, atol=LOGIT_TOL)


@settings(max_examples=10)
@given(v=decoder_variants, strategy=st.sampled_from(["greedy", "sample", "beam"]), seed=seeds)
def test_cached_and_uncached_generation_give_the_same_tokens(v, strategy, seed):
    model = tiny_gpt(seed % 100, **v)
    prompt = integer_ids(seed, (2, 3), TINY["vocab_size"])
    kwargs = dict(strategy=strategy, beam_size=3, eos_id=4 if strategy == "beam" else None)
    runs = [generate(model, prompt, 7, use_cache=c, rng=np.random.default_rng(seed), **kwargs)
            for c in (True, False)]
    np.testing.assert_array_equal(runs[0], runs[1])


@pytest.mark.parametrize("position", POSITIONS[:-1])   # each for sure: the draws had missed 'shaw', 'sinusoidal'
@settings(max_examples=2)
@given(n_kv_head=st.sampled_from([None, 2]), seed=seeds)
def test_seq2seq_cached_equals_uncached(position, n_kv_head, seed):
    model = tiny_seq2seq(seed % 100, position=position, n_kv_head=n_kv_head)
    src = integer_ids(seed, (3, 5), TINY["vocab_size"] - 3) + 3      # ids 3.. (0 is PAD)
    src[1, 3:] = 0                                                   # a padded source row
    for decode in (greedy_seq2seq, beam_seq2seq):
        np.testing.assert_array_equal(decode(model, src, 8, 1, 2, use_cache=True),
                                      decode(model, src, 8, 1, 2, use_cache=False))
    memory = model.encode(src)
    mask = model.source_mask(src)
    cached = LogitsStep(model.decoder, memory, mask, use_cache=True)
    rerun = LogitsStep(model.decoder, memory, mask, use_cache=False)
    tgt = integer_ids(seed + 1, (3, 6), TINY["vocab_size"])
    for t in range(6):
        np.testing.assert_allclose(cached(tgt[:, t:t + 1]), rerun(tgt[:, t:t + 1]),
                                   rtol=LOGIT_TOL, atol=LOGIT_TOL)


def test_the_cache_stops_at_the_context_and_the_rerun_crops():
    """block_size 10, prompt 3: the cache allows 10 - 3 + 1 = 8 new tokens, and asking for more
    is an error that says so (never a silently short result). Without the cache, every
    token is the argmax of the model run on (at most) the last 10 tokens before it."""
    model = tiny_gpt(1).eval()
    prompt = integer_ids(1, (2, 3), TINY["vocab_size"])
    with pytest.raises(ValueError, match="room for at most 8 new tokens .* got 9"):
        generate(model, prompt, 9)
    cached = generate(model, prompt, 8)
    cropped = generate(model, prompt, 20, use_cache=False)
    assert cached.shape == (2, 3 + 8) and cropped.shape == (2, 3 + 20)
    np.testing.assert_array_equal(cached, cropped[:, :11])
    for t in range(3, cropped.shape[1]):
        context = cropped[:, max(0, t - 10):t]
        np.testing.assert_array_equal(cropped[:, t], model.forward(context)[:, -1].argmax(-1))


# --------------------------------------------------------- strategies, by meaning
def test_beam_of_one_top_k_of_one_and_tiny_temperatures_are_greedy():
    model = tiny_gpt(2)
    prompt = integer_ids(2, (3, 2), TINY["vocab_size"])
    greedy = generate(model, prompt, 7)
    rng = np.random.default_rng(0)
    np.testing.assert_array_equal(generate(model, prompt, 7, strategy="beam", beam_size=1), greedy)
    for settings_ in (dict(top_k=1), dict(temperature=0.0), dict(temperature=1e-6)):
        np.testing.assert_array_equal(generate(model, prompt, 7, strategy="sample", rng=rng, **settings_), greedy)


def test_beam_of_one_is_greedy_with_eos_and_no_length_penalty():
    """A finished hypothesis enters the pool only when EOS ranks among the W best extensions: with
    W = 1, when greedy would pick it; with α = 0 it then beats the live beam it outscored."""
    model = tiny_gpt(3)
    prompt = integer_ids(3, (3, 2), TINY["vocab_size"])
    eos = int(generate(model, prompt, 3)[0, -1])                    # a token greedy does produce
    beam = generate(model, prompt, 7, strategy="beam", beam_size=1, length_penalty=0.0, eos_id=eos)
    np.testing.assert_array_equal(beam, generate(model, prompt, 7, eos_id=eos))
    s2s = tiny_seq2seq(3)
    src = integer_ids(3, (4, 5), TINY["vocab_size"] - 1) + 1
    np.testing.assert_array_equal(beam_seq2seq(s2s, src, 8, 1, 2, beam_size=1, length_penalty=0.0),
                                  greedy_seq2seq(s2s, src, 8, 1, 2))


def test_the_same_seed_gives_the_same_sample():
    model = tiny_gpt(4)
    prompt = integer_ids(4, (2, 2), TINY["vocab_size"])
    a, b = (generate(model, prompt, 8, strategy="sample", top_p=0.9, rng=np.random.default_rng(7))
            for _ in range(2))
    np.testing.assert_array_equal(a, b)


@settings(max_examples=6)
@given(alpha=st.sampled_from([0.0, 0.5, 1.0]), with_eos=st.booleans(), seed=seeds)
def test_beam_search_finds_the_best_hypothesis_when_the_beam_holds_every_prefix(alpha, with_eos, seed):
    """Vocabulary 4, 3 new tokens, beam 36: every extension of every prefix (at most 3² · 4)
    ranks among the beam's best, so beam search must return the best of all hypotheses,
    scored here by brute force from full (uncached) forwards."""
    model = GPT(GPTConfig(**{**TINY, "vocab_size": 4}), rng=seed % 100, dtype=F64).eval()
    prompt = integer_ids(seed, (2, 2), 4)
    eos = 3 if with_eos else None
    beam = generate(model, prompt, 3, strategy="beam", beam_size=36, length_penalty=alpha, eos_id=eos)
    for b in range(2):
        best = max(_all_hypotheses(4, 3, eos), key=lambda y: _score(model, prompt[b], y, alpha))
        expected = best + [eos] * (beam.shape[1] - 2 - len(best))
        assert beam[b, 2:].tolist() == expected


def _all_hypotheses(V, n, eos):
    """Every token sequence of length n, or with eos: sequences ended by eos, or of length n."""
    words = [[]]
    for _ in range(n):
        words = [w + [v] for w in words for v in range(V) if v != eos]
    if eos is None:
        return words
    return words + [w[:k] + [eos] for w in words for k in range(n)]


def _score(model, prompt, y, alpha):
    """Σ log p(y_t | prompt, y_<t) / |y|^α from one forward over the whole sequence."""
    ids = np.concatenate([prompt, y])[None]
    logits = model.forward(ids)[0, len(prompt) - 1:-1]                  # (|y|, V) predictions of y
    logp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))       # the oracle: no shared code
    return logp[np.arange(len(y)), y].sum() / len(y) ** alpha


@pytest.mark.parametrize("strategy", ["greedy", "beam"])   # sampling draws one uniform per row
def test_each_row_is_decoded_as_if_alone(strategy):
    model = tiny_gpt(5)
    prompt = integer_ids(5, (3, 3), TINY["vocab_size"])
    kwargs = dict(strategy=strategy, beam_size=3, eos_id=6)
    together = generate(model, prompt, 6, **kwargs)
    for b in range(3):
        alone = generate(model, prompt[b:b + 1], 6, **kwargs)
        np.testing.assert_array_equal(together[b, :alone.shape[1]], alone[0])
        assert (together[b, alone.shape[1]:] == 6).all()


def test_eos_ends_a_row_and_the_loop_ends_when_all_rows_have():
    model = tiny_gpt(6)
    prompt = integer_ids(6, (2, 2), TINY["vocab_size"])
    free = generate(model, prompt, 8)                                # no EOS
    eos = int(free[0, 4])
    ended = generate(model, prompt, 8, eos_id=eos)
    stops = [np.flatnonzero(free[b, 2:] == eos) for b in range(2)]
    last = max(s[0] if s.size else 7 for s in stops)                 # the last row to finish
    assert ended.shape == (2, 2 + last + 1)
    for b in range(2):
        assert first_eos_then_eos(ended[b, 2:], eos)
        k = stops[b][0] + 1 if stops[b].size else ended.shape[1] - 2
        np.testing.assert_array_equal(ended[b, :2 + k], free[b, :2 + k])


def test_seq2seq_returns_max_len_tokens_with_eos_after_eos():
    model = tiny_seq2seq(7)
    src = integer_ids(7, (5, 4), TINY["vocab_size"] - 1) + 1
    for decode in (greedy_seq2seq, beam_seq2seq):
        out = decode(model, src, 9, 1, 2)
        assert out.shape == (5, 9) and out.dtype == np.int64
        assert all(first_eos_then_eos(row, 2) for row in out)
    sampled = generate_seq2seq(model, src, 9, 1, 2, strategy="sample", rng=np.random.default_rng(0))
    assert sampled.shape == (5, 9) and all(first_eos_then_eos(row, 2) for row in sampled)


# ------------------------------------------------------ the sampling filters, by hand
def test_top_p_keeps_the_smallest_set_reaching_p():
    p = np.array([[0.1, 0.6, 0.3]])
    assert outside_nucleus(p, 0.6).tolist() == [[True, False, True]]     # 0.6 alone reaches 0.6
    assert outside_nucleus(p, 0.65).tolist() == [[True, False, False]]   # 0.6 + 0.3
    assert outside_nucleus(p, 1.0).tolist() == [[False, False, False]]


@pytest.mark.parametrize("top_p, drawable, share_of_0", [(0.5, {0}, 1.0), (0.75, {0, 1}, 2 / 3),
                                                         (0.8, {0, 1, 2}, 4 / 7), (1.0, {0, 1, 2, 3, 4}, 0.5)])
def test_top_p_draws_only_from_the_nucleus(top_p, drawable, share_of_0):
    """p = (1/2, 1/4, 1/8, 1/16, 1/16): the nucleus of 0.75 is {0, 1}, renormalised to (2/3, 1/3)."""
    n = 4000
    logits = np.tile(np.log([0.5, 0.25, 0.125, 0.0625, 0.0625]), (n, 1))
    z = filter_logits(logits, top_p=top_p)
    tokens = sample_tokens(np.exp(z) / np.exp(z).sum(-1, keepdims=True), np.random.default_rng(0))
    assert set(tokens.tolist()) == drawable
    assert abs(np.mean(tokens == 0) - share_of_0) <= 5 * np.sqrt(share_of_0 * (1 - share_of_0) / n) + 1e-12


def test_top_k_and_temperature_filter():
    z = filter_logits(np.array([[1.0, 3.0, 2.0, 0.0]]), temperature=0.5, top_k=2)
    np.testing.assert_array_equal(z, [[-np.inf, 0.0, -2.0, -np.inf]])   # (x - max) / τ, then the two largest


def test_samples_follow_the_probabilities_and_skip_zero_ones():
    n = 20000
    probs = np.tile(np.array([0.0, 0.5, 0.0, 0.3, 0.2, 0.0], dtype=np.float32), (n, 1))
    tokens = sample_tokens(probs, np.random.default_rng(1))
    counts = np.bincount(tokens, minlength=6) / n
    assert counts[[0, 2, 5]].sum() == 0
    for v, p in ((1, 0.5), (3, 0.3), (4, 0.2)):
        assert abs(counts[v] - p) <= 5 * np.sqrt(p * (1 - p) / n)


# ----------------------------------------------------------- bookkeeping and errors
def test_generation_runs_in_eval_mode_and_leaves_no_caches():
    model = tiny_gpt(8, p_drop=0.5).train()
    prompt = integer_ids(8, (2, 2), TINY["vocab_size"])
    a, b = generate(model, prompt, 5), generate(model, prompt, 5)
    np.testing.assert_array_equal(a, b)                              # no dropout while generating
    assert model.training and all(m.training for _, m in model.named_modules())
    assert all(m._cache is None for _, m in model.named_modules())


def test_float32_models_generate_in_float32():
    model = GPT(GPTConfig(**TINY), rng=9)                            # float32
    prompt = integer_ids(9, (2, 3), TINY["vocab_size"])
    assert LogitsStep(model.eval())(prompt).dtype == np.float32
    np.testing.assert_array_equal(generate(model, prompt, 6, strategy="beam"),
                                  generate(model, prompt, 6, strategy="beam", use_cache=False))


def test_trace_records_the_choice_and_its_candidates():
    model = tiny_gpt(10)
    prompt = integer_ids(10, (2, 2), TINY["vocab_size"])
    trace = []
    out = generate(model, prompt, 4, trace=trace)
    assert len(trace) == 4
    for t, step in enumerate(trace):
        assert step.tokens == out[:, 2 + t].tolist() and step.parents is None
        for row, candidates in zip(step.tokens, step.candidates):
            probs = [p for _, p in candidates]
            assert candidates[0][0] == row and probs == sorted(probs, reverse=True) and sum(probs) <= 1 + 1e-12
    beam_trace = []
    generate(model, prompt, 3, strategy="beam", beam_size=2, trace=beam_trace)
    assert len(beam_trace) == 3 and all(len(s.tokens) == len(s.parents) == len(s.scores) == 4 for s in beam_trace)


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(strategy="nucleus"), ValueError, "strategy: expected one of"),
    (dict(strategy="sample"), TypeError, "rng: expected a numpy.random.Generator"),
    (dict(strategy="sample", rng=np.random.default_rng(0), top_p=0.0), ValueError, r"top_p: .*\(0.0, 1.0\]"),
    (dict(strategy="sample", rng=np.random.default_rng(0), top_p=1.5), ValueError, "top_p"),
    (dict(strategy="sample", rng=np.random.default_rng(0), temperature=-1.0), ValueError, "temperature"),
    (dict(strategy="sample", rng=np.random.default_rng(0), top_k=0), ValueError, "top_k"),
    (dict(strategy="greedy", top_k=3), ValueError, "strategy='sample'"),
    (dict(strategy="beam", beam_size=0), ValueError, "beam_size"),
    (dict(max_new_tokens=-1), ValueError, "max_new_tokens"),
    (dict(eos_id=11), ValueError, "eos_id"),
    (dict(prompt_ids=np.array([[1, 11]])), ValueError, r"prompt_ids: expected ids in \[0, 11\)"),
    (dict(prompt_ids=np.array([1, 2])), ValueError, r"prompt_ids: expected 2 dimensions"),
    (dict(prompt_ids=np.zeros((1, 11), dtype=np.int64)), ValueError, "block_size=10"),
    (dict(trace=()), TypeError, "trace"),
])
def test_errors_name_the_argument(kwargs, error, match):
    call = {"model": tiny_gpt(), "prompt_ids": np.array([[1, 2]]), "max_new_tokens": 3, **kwargs}
    with pytest.raises(error, match=match):
        generate(**call)


def test_seq2seq_errors_name_the_argument():
    with pytest.raises(TypeError, match="model: expected a GPT"):
        generate(tiny_seq2seq(), np.array([[1]]), 2)
    with pytest.raises(TypeError, match="model: expected a Seq2Seq"):
        greedy_seq2seq(tiny_gpt(), np.array([[3]]), 2, 1, 2)
    with pytest.raises(ValueError, match="max_len: the decoder has block_size=10"):
        greedy_seq2seq(tiny_seq2seq(), np.array([[3]]), 11, 1, 2)


# ------------------------------------------------------------------ the command
@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    """A tiny GPT checkpoint over the characters of "hello world", and a seq2seq one."""
    folder = tmp_path_factory.mktemp("ckpt")
    tok = CharTokenizer.from_text("hello world")
    cfg = GPTConfig(vocab_size=tok.vocab_size, block_size=12, n_layer=1, n_head=2, d_model=8)
    gpt_path, s2s_path = folder / "gpt.npz", folder / "s2s.npz"
    save_checkpoint(gpt_path, GPT(cfg, rng=0), meta={"family": "gpt", "config": cfg.to_dict(),
                                                     "tokenizer": tok.to_dict()})
    s2s_cfg = Seq2SeqConfig(vocab_size=8, block_size=6, n_layer=1, n_head=2, d_model=8)
    save_checkpoint(s2s_path, Seq2Seq(s2s_cfg, rng=0), meta={"family": "seq2seq", "config": s2s_cfg.to_dict()})
    (folder / "corrupt.npz").write_bytes(b"not a zip file")
    return folder


def _args(path, **overrides):
    parser = argparse.ArgumentParser()
    add_generate_arguments(parser)
    args = parser.parse_args(["--checkpoint", str(path), "--prompt", "hello"])
    for key, value in overrides.items():
        setattr(args, key, value)
    return args


@pytest.mark.parametrize("strategy", ["greedy", "sample", "beam"])
def test_command_prints_the_prompt_and_its_continuation(checkpoints, strategy, capsys):
    assert run_generate(_args(checkpoints / "gpt.npz", strategy=strategy, max_new_tokens=5)) == 0
    out = capsys.readouterr().out
    assert out.startswith("hello") and len(out.rstrip("\n")) == 5 + 5


def test_command_notes_when_the_cache_is_full(checkpoints, capsys):
    assert run_generate(_args(checkpoints / "gpt.npz", max_new_tokens=30)) == 0
    captured = capsys.readouterr()
    assert len(captured.out.rstrip("\n")) == 12 + 1 and "stopped after 8 new tokens" in captured.err
    assert run_generate(_args(checkpoints / "gpt.npz", max_new_tokens=30, no_cache=True)) == 0
    assert len(capsys.readouterr().out.rstrip("\n")) == 5 + 30


@pytest.mark.parametrize("overrides, match", [
    (dict(strategy="nucleus"), "--strategy"),
    (dict(top_p=0.0), "--top-p"), (dict(top_p=1.5), "--top-p"),
    (dict(temperature=-0.5), "--temperature"), (dict(top_k=0), "--top-k"),
    (dict(strategy="greedy", top_k=3), "--top-k: applies to --strategy sample only"),
    (dict(prompt="hello hello w"), "--prompt: expected 1 to block_size=12 tokens"),
    (dict(prompt="hélló"), "--prompt: .*'é'"), (dict(prompt=""), "--prompt"),
    (dict(checkpoint="missing.npz"), "no file at"),
    (dict(checkpoint="corrupt.npz"), "not a readable .npz checkpoint"),
    (dict(checkpoint="s2s.npz"), "expected a GPT checkpoint .* got family 'seq2seq'"),
])
def test_command_errors_are_one_line_and_nonzero(checkpoints, overrides, match, capsys):
    if "checkpoint" in overrides:
        overrides = {**overrides, "checkpoint": checkpoints / overrides["checkpoint"]}
    assert run_generate(_args(checkpoints / "gpt.npz", **overrides)) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.startswith("error: ") and captured.err.count("\n") == 1
    assert re.search(match, captured.err)


def test_command_is_wired_into_main(checkpoints, capsys):
    from minitransformer.cli import main
    assert main(["generate", "--checkpoint", str(checkpoints / "gpt.npz"), "--prompt", "he",
                 "--strategy", "greedy", "--max-new-tokens", "3"]) == 0
    assert capsys.readouterr().out.startswith("he")
