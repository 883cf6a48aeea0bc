"""Data: the default corpus, the split, batches, synthetic sequence tasks, MLM masking."""
import sys

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from minitransformer.training.data import (BOS, EOS, IGNORE_INDEX, PAD, default_corpus, load_text, make_sequence_task,
                                  mlm_mask, random_batch, train_val_split)
from strategies import seeds


# ---------------------------------------------------------------------- corpus
@pytest.mark.skipif(sys.version_info[:3] != (3, 11, 7), reason="figures measured on Python 3.11.7; "
                    "the pydoc topics change between Python releases")
def test_default_corpus_size_on_the_reference_python():
    text = default_corpus()
    assert len(text) == 464_970 and len(set(text)) == 103


def test_default_corpus_is_the_pydoc_topics_in_sorted_key_order():
    from pydoc_data.topics import topics
    text, keys = default_corpus(), sorted(topics)
    assert text.startswith(topics[keys[0]]) and text.endswith(topics[keys[-1]])
    assert len(text) == sum(len(v) for v in topics.values())
    assert "the" in text and 300_000 < len(text) and 80 < len(set(text)) < 200   # English prose, any Python


def test_load_text(tmp_path):
    assert load_text() == default_corpus()
    path = tmp_path / "t.txt"
    path.write_bytes("héllo\r\nwörld\n".encode("utf-8"))
    assert load_text(path) == "héllo\nwörld\n"          # universal newlines
    with pytest.raises(FileNotFoundError, match="path: expected a UTF-8 text file, no file at"):
        load_text(tmp_path / "missing.txt")
    (tmp_path / "latin1.txt").write_bytes("abc\xe9".encode("latin-1"))
    with pytest.raises(ValueError, match=r"is not UTF-8 text: byte 0xe9 at offset 3"):
        load_text(tmp_path / "latin1.txt")


# ----------------------------------------------------------------------- split
@given(n=st.integers(0, 200), val_fraction=st.sampled_from([0.0, 0.05, 0.1, 0.5, 0.9]))
def test_split_is_a_contiguous_prefix_and_suffix(n, val_fraction):
    ids = np.arange(n)
    train, val = train_val_split(ids, val_fraction)
    assert len(val) == round(n * val_fraction)
    assert np.array_equal(np.concatenate([train, val]), ids)     # prefix then suffix, nothing lost


def test_split_of_the_default_corpus():
    train, val = train_val_split(default_corpus())
    assert len(train) + len(val) == len(default_corpus())
    assert len(val) == round(len(default_corpus()) * 0.1)
    with pytest.raises(ValueError, match="val_fraction"):
        train_val_split([1, 2, 3], 1.0)


# --------------------------------------------------------------------- batches
@given(n=st.integers(2, 60), T=st.integers(1, 8), B=st.integers(1, 6), seed=seeds)
def test_batches_are_windows_with_targets_shifted_by_one(n, T, B, seed):
    T = min(T, n - 1)                                   # the data holds T + 1 tokens at least
    # Distinct values: x[b, 0] then tells where window b starts.
    data = np.random.default_rng(seed).permutation(n).astype(np.uint16)
    x, y = random_batch(data, T, B, np.random.default_rng(seed))
    assert x.shape == y.shape == (B, T) and x.dtype == y.dtype == np.int64
    starts = [int(np.flatnonzero(data == x[b, 0])[0]) for b in range(B)]
    for b, o in enumerate(starts):
        assert list(x[b]) == list(data[o:o + T]) and list(y[b]) == list(data[o + 1:o + T + 1])


def test_same_generator_state_same_batch_and_every_offset_reachable():
    data = np.arange(10)
    x1, y1 = random_batch(data, 4, 500, np.random.default_rng(3))
    x2, y2 = random_batch(data, 4, 500, np.random.default_rng(3))
    assert np.array_equal(x1, x2) and np.array_equal(y1, y2)
    # Offsets 0 .. n - T - 1 = 5 all occur in 500 draws (each misses with probability (5/6)^500).
    assert set(x1[:, 0]) == set(range(6))


def test_batch_errors_name_the_argument():
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match=r"data: expected at least block_size \+ 1 = 5 tokens, got 4"):
        random_batch(np.arange(4), 4, 2, rng)
    with pytest.raises(TypeError, match="data: expected an integer array"):
        random_batch(np.zeros(10), 4, 2, rng)
    with pytest.raises(TypeError, match="rng: expected a numpy.random.Generator"):
        random_batch(np.arange(10), 4, 2, 0)
    with pytest.raises(ValueError, match="block_size"):
        random_batch(np.arange(10), 0, 2, rng)


# -------------------------------------------------------------- sequence tasks
@given(task=st.sampled_from(["copy", "reverse", "sort"]), n=st.integers(1, 8),
       lo=st.integers(1, 4), extra=st.integers(0, 4), vocab=st.integers(4, 12), seed=seeds)
def test_sequence_tasks_layout_and_meaning(task, n, lo, extra, vocab, seed):
    src, lengths, tgt_in, tgt_out = make_sequence_task(task, n, (lo, lo + extra), vocab,
                                                       np.random.default_rng(seed))
    S = lo + extra
    assert src.shape == (n, S) and tgt_in.shape == tgt_out.shape == (n, S + 1) and lengths.shape == (n,)
    for i in range(n):
        L = int(lengths[i])
        source = list(src[i, :L])
        assert lo <= L <= S and all(3 <= s < vocab for s in source) and all(src[i, L:] == PAD)
        target = {"copy": source, "reverse": source[::-1], "sort": sorted(source)}[task]
        assert list(tgt_in[i]) == [BOS] + target + [PAD] * (S - L)
        assert list(tgt_out[i]) == target + [EOS] + [IGNORE_INDEX] * (S - L)


def test_sequence_task_draws_every_length_and_symbol():
    src, lengths, _, _ = make_sequence_task("copy", 400, (2, 5), 7, np.random.default_rng(0))
    assert set(lengths) == {2, 3, 4, 5} and set(src[src != PAD]) == {3, 4, 5, 6}


def test_sequence_task_errors():
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match=r"task: expected one of \('copy', 'reverse', 'sort'\), got 'shuffle'"):
        make_sequence_task("shuffle", 2, (1, 3), 10, rng)
    with pytest.raises(ValueError, match=r"vocab: expected an integer in \[4, inf\], got 3"):
        make_sequence_task("copy", 2, (1, 3), 3, rng)
    with pytest.raises(ValueError, match=r"length_range\[1\]"):
        make_sequence_task("copy", 2, (4, 3), 10, rng)


# ------------------------------------------------------------------ MLM masking
def test_mlm_proportions_and_labels():
    # 200 000 positions, 10% special. Bounds are 6 binomial standard deviations:
    # chosen ≈ 0.15 of 180 000 (σ ≈ 0.0008), mask ≈ 0.8 of 27 000 chosen (σ ≈ 0.0024).
    V, MASK, special = 1000, 4, [0, 1, 2, 3, 4]
    rng = np.random.default_rng(0)
    ids = rng.integers(5, V, size=(400, 500))
    ids[:, ::10] = 0                                    # a special id on every tenth position
    inputs, labels = mlm_mask(ids, rng, V, MASK, p=0.15, special_ids=special)
    chosen = labels != IGNORE_INDEX
    assert not chosen[:, ::10].any()                    # special positions are never chosen
    assert np.array_equal(labels[chosen], ids[chosen])  # labels: the original tokens
    assert np.array_equal(inputs[~chosen], ids[~chosen])
    assert abs(chosen.sum() / 180_000 - 0.15) < 6 * 0.0008
    masked = inputs[chosen] == MASK
    kept = inputs[chosen] == ids[chosen]                # includes random draws of the same token
    replaced = ~masked & ~kept
    n_replacements = V - len(special)
    assert abs(masked.mean() - 0.8) < 6 * 0.0024
    assert abs(kept.mean() - (0.1 + 0.1 / n_replacements)) < 6 * 0.0018
    assert abs(replaced.mean() - 0.1 * (1 - 1 / n_replacements)) < 6 * 0.0018
    assert not np.isin(inputs[chosen][replaced], special).any()    # random tokens are never special


@given(seed=seeds, p=st.sampled_from([0.0, 0.5, 1.0]))
@settings(max_examples=10)
def test_mlm_extremes_and_determinism(seed, p):
    ids = np.random.default_rng(seed).integers(0, 8, size=(3, 7))
    inputs, labels = mlm_mask(ids, np.random.default_rng(seed), 8, 7, p=p, special_ids=[0])
    again = mlm_mask(ids, np.random.default_rng(seed), 8, 7, p=p, special_ids=[0])
    assert np.array_equal(inputs, again[0]) and np.array_equal(labels, again[1])
    expected_chosen = (ids != 0) if p == 1.0 else np.zeros_like(ids, bool) if p == 0.0 else None
    if expected_chosen is not None:
        assert np.array_equal(labels != IGNORE_INDEX, expected_chosen)
    assert inputs.dtype == labels.dtype == np.int64


def test_mlm_errors():
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match=r"ids: expected ids in \[0, 5\)"):
        mlm_mask(np.array([1, 5]), rng, 5, 4)
    with pytest.raises(ValueError, match="mask_id"):
        mlm_mask(np.array([1, 2]), rng, 5, 5)
    with pytest.raises(ValueError, match="special_ids: no id left"):
        mlm_mask(np.array([1, 2]), rng, 3, 2, special_ids=[0, 1])
