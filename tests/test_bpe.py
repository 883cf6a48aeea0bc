"""ByteBPETokenizer: lossless round trips (surrogates too), merges worked by hand and
against a naive trainer, vocabulary size, special tokens, JSON state, errors."""
import json
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from minitransformer.training.data import default_corpus
from minitransformer.tokenizers.bpe import PRETOKEN_PATTERN, ByteBPETokenizer, merge_pair

EOT = "<|endoftext|>"
SMALL_TEXT = default_corpus()[:20_000]
TOK = ByteBPETokenizer.train(SMALL_TEXT, vocab_size=600, special_tokens=(EOT, "<|pad|>"))
CORPUS_WORDS = sorted(set(SMALL_TEXT.split()))[:500]

# Any Unicode: ordinary text, lone surrogates (category Cs), corpus words so merges fire,
# the special tokens and pieces of them.
unicode_text = st.lists(st.one_of(
    st.text(max_size=8), st.characters(categories=["Cs"]), st.sampled_from(CORPUS_WORDS),
    st.sampled_from([EOT, "<|pad|>", "<|", "|>", " ", "\n    "])), max_size=30).map("".join)


@given(text=unicode_text)
def test_decode_encode_is_the_identity_on_any_text(text):
    ids = TOK.encode(text)
    assert all(0 <= i < TOK.vocab_size for i in ids)
    assert TOK.decode(ids) == text
    assert TOK.decode(np.array(ids, dtype=np.int64)) == text      # arrays decode too
    assert TOK.decode(TOK.encode(text, allowed_special="none")) == text


@given(text=unicode_text)
def test_encoding_is_deterministic_and_survives_json(text):
    again = ByteBPETokenizer.train(SMALL_TEXT, vocab_size=600, special_tokens=(EOT, "<|pad|>"))
    restored = ByteBPETokenizer.from_dict(json.loads(json.dumps(TOK.to_dict())))
    assert again == TOK and restored == TOK
    assert again.encode(text) == TOK.encode(text) == restored.encode(text)


def test_save_load_round_trip(tmp_path):
    path = tmp_path / "bpe.json"
    TOK.save(path)
    loaded = ByteBPETokenizer.load(path)
    text = SMALL_TEXT[:2000] + EOT + "\ud800 é"
    assert loaded == TOK and loaded.encode(text) == TOK.encode(text)
    assert all(isinstance(pair, list) for pair in json.loads(path.read_text())["merges"])


def test_merges_worked_by_hand():
    # "aaabdaaabac", bytes a=97 b=98 c=99 d=100, adjacent pairs counted at every position:
    #   (a,a) 4 times                          -> merge 0: (97, 97) = 256 "aa"
    #   [256 a b d 256 a b a c]: (a,b) 2, (256,a) 2, the rest 1: tie, the smaller pair wins
    #                                          -> merge 1: (97, 98) = 257 "ab"
    #   [256 257 d 256 257 a c]: (256,257) 2   -> merge 2: (256, 257) = 258 "aaab"
    #   [258 d 258 a c]: every pair once       -> stop, though 1000 ids were asked
    tok = ByteBPETokenizer.train("aaabdaaabac", vocab_size=1000)
    assert tok.merges == [(97, 97), (97, 98), (256, 257)]
    assert tok.vocab_size == 259 and tok.vocab[258] == b"aaab"
    assert tok.encode("aaabdaaabac") == [258, 100, 258, 97, 99]
    assert tok.encode("aaaa") == [256, 256] and tok.encode("aaa") == [256, 97]   # left to right


def test_verbose_prints_one_line_per_merge(capsys):
    ByteBPETokenizer.train("aaabdaaabac", vocab_size=1000, verbose=True)
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 3 and lines[2].startswith("merge 3/744: (256, 257) -> 258 b'aaab' (2 times)")


def test_merge_pair_goes_left_to_right():
    assert merge_pair([1, 1, 1], (1, 1), 9) == [9, 1]
    assert merge_pair([1, 2, 1, 2, 3], (1, 2), 9) == [9, 9, 3]
    assert merge_pair([2, 1], (1, 2), 9) == [2, 1]


def naive_merges(text, n, pattern):
    """Reference trainer: recount every pair of every piece before each merge."""
    import re
    pieces = re.findall(pattern, text) if pattern else [text]
    words = Counter(tuple(p.encode("utf-8", "surrogatepass")) for p in pieces if p)
    merges = []
    for new_id in range(256, 256 + n):
        counts = Counter()
        for word, f in words.items():
            for pair in zip(word, word[1:]):
                counts[pair] += f
        if not counts or max(counts.values()) < 2:
            break
        best = min(counts, key=lambda p: (-counts[p], p))
        merges.append(best)
        words = {tuple(merge_pair(list(w), best, new_id)): f for w, f in words.items()}
    return merges


@given(text=st.text(alphabet="ab c\n.é", max_size=80), n=st.integers(0, 30),
       pattern=st.sampled_from([PRETOKEN_PATTERN, None]))
def test_incremental_counts_give_the_merges_of_a_full_recount(text, n, pattern):
    tok = ByteBPETokenizer.train(text, vocab_size=256 + n, pattern=pattern)
    assert tok.merges == naive_merges(text, n, pattern)


@settings(max_examples=10)
@given(n_merges=st.integers(0, 300), n_special=st.integers(0, 2))
def test_vocab_size_is_what_was_asked(n_merges, n_special):
    specials = (EOT, "<|pad|>")[:n_special]
    tok = ByteBPETokenizer.train(SMALL_TEXT, 256 + n_merges + n_special, special_tokens=specials)
    assert tok.vocab_size == 256 + n_merges + n_special == len(tok.vocab)
    assert len(tok.merges) == n_merges


def test_a_tiny_text_runs_out_of_pairs():
    tok = ByteBPETokenizer.train("abcabd", vocab_size=1000, special_tokens=(EOT,))
    assert tok.merges == [(97, 98)]             # "ab" twice; then every pair occurs once
    assert tok.vocab_size == 256 + 1 + 1 and tok.special_ids == {EOT: 257}
    assert ByteBPETokenizer.train("", vocab_size=300).vocab_size == 256


def test_merges_never_cross_pretoken_boundaries():
    # With the pattern, "a", ".", "a", ... are separate pieces: no pair inside any of them.
    assert ByteBPETokenizer.train("a.a.a.a.", vocab_size=300).merges == []
    assert ByteBPETokenizer.train("a.a.a.a.", vocab_size=300, pattern=None).merges != []


def test_special_tokens_are_single_ids_and_round_trip():
    eot, pad = TOK.special_ids[EOT], TOK.special_ids["<|pad|>"]
    assert (eot, pad) == (TOK.vocab_size - 2, TOK.vocab_size - 1)      # after the merges
    assert TOK.encode(EOT) == [eot]
    ids = TOK.encode(f"the end{EOT}<|pad|><|pad|>")
    assert ids[-3:] == [eot, pad, pad] and eot not in ids[:-3]
    assert TOK.decode(ids) == f"the end{EOT}<|pad|><|pad|>"
    as_text = TOK.encode(EOT, allowed_special="none")                  # plain bytes, merged
    assert eot not in as_text and TOK.decode(as_text) == EOT
    only_pad = TOK.encode(f"{EOT}<|pad|>", allowed_special={"<|pad|>"})
    assert eot not in only_pad and only_pad[-1] == pad


def test_special_tokens_in_the_training_text_are_not_merged():
    tok = ByteBPETokenizer.train(f"xy{EOT}" * 50, vocab_size=300, special_tokens=(EOT,))
    assert tok.merges == [(120, 121)]           # only "xy": "<|", "|>" never become pairs
    assert tok.encode(f"xy{EOT}") == [256, 257]


def test_decode_of_bytes_that_are_not_utf8():
    half = [0xC3]                               # the first of the two bytes of "é" (ids 0..255 are bytes)
    assert TOK.decode(half) == "\ufffd"         # what a half-trained model may emit
    assert TOK.decode([0xC3, 0xA9]) == "é"
    with pytest.raises(ValueError, match="not UTF-8"):
        TOK.decode(half, errors="strict")
    assert TOK.decode(TOK.encode("\udc80x"), errors="strict") == "\udc80x"


def test_errors_name_the_argument(tmp_path):
    with pytest.raises(ValueError, match=r"vocab_size: expected at least 257 .* got 256"):
        ByteBPETokenizer.train("abc", vocab_size=256, special_tokens=(EOT,))
    with pytest.raises(TypeError, match="vocab_size: expected an integer"):
        ByteBPETokenizer.train("abc", vocab_size=300.0)
    with pytest.raises(ValueError, match=rf"ids: expected ids in \[0, {TOK.vocab_size}\), got 600 at position"):
        TOK.decode([5, 600])
    with pytest.raises(ValueError, match=r"got -1 at position 0"):
        TOK.decode([-1])                        # must not wrap around to the last id
    with pytest.raises(TypeError, match="text: expected str, got bytes"):
        TOK.encode(b"abc")
    with pytest.raises(ValueError, match="allowed_special: expected special tokens"):
        TOK.encode("x", allowed_special={"<|unknown|>"})
    with pytest.raises(ValueError, match=r"merges\[0\]: expected a pair of ids in \[0, 256\)"):
        ByteBPETokenizer(merges=[(97, 256)])
    with pytest.raises(ValueError, match="pattern: expected no capturing groups"):
        ByteBPETokenizer(pattern=r"(\w+)|\W")
    with pytest.raises(ValueError, match="pattern: .* skips 2 of 5 characters"):
        ByteBPETokenizer(pattern=r"\w+").encode("ab, c")     # a lossy split is refused


def test_a_corrupt_file_is_named(tmp_path):
    broken, wrong = tmp_path / "broken.json", tmp_path / "wrong.json"
    broken.write_text('{"type": "bpe", "merges": [[97, 9')
    wrong.write_text(json.dumps({"type": "bpe", "merges": [[1, 2, 3]], "special_tokens": [],
                                 "pattern": None}))
    for path in (broken, wrong):
        with pytest.raises(ValueError, match=f"path: '{path}' is not a saved ByteBPETokenizer"):
            ByteBPETokenizer.load(path)
