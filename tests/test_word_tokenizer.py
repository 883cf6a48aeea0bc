"""The word tokenizer: pieces that join back to the text, round trips, the frequency-ranked
vocabulary, unknown words as <unk>, to_dict / from_dict, errors."""
import json

import pytest
from hypothesis import given, strategies as st

from minitransformer.tokenizers import WordTokenizer, tokenizer_from_dict
from minitransformer.tokenizers.word import UNK, split_words

TEXT = "the cat sat on the mat.\nthe dog sat, too!"


def test_pieces_are_words_punctuation_and_whitespace_runs():
    assert split_words("Hello, world!\n\n  ok") == ["Hello", ",", " ", "world", "!", "\n\n  ", "ok"]


@given(text=st.text(max_size=60))
def test_pieces_join_back_to_any_text_and_known_text_round_trips(text):
    assert "".join(split_words(text)) == text
    if text:
        tok = WordTokenizer.from_text(text)
        assert tok.decode(tok.encode(text)) == text
        assert tok.unknown_rate(text) == 0.0


def test_vocabulary_is_ranked_by_count_with_unk_first():
    tok = WordTokenizer.from_text(TEXT)
    # counts: " " 8, "the" 3, "sat" 2, then the ones seen once by code point: "\n" "!" "," "." "cat" ...
    assert tok.words[:4] == [UNK, " ", "the", "sat"]
    assert tok.words[4:8] == ["\n", "!", ",", "."]
    assert tok.vocab_size == 1 + len(set(split_words(TEXT)))
    small = WordTokenizer.from_text(TEXT, max_size=4)
    assert small.words == [UNK, " ", "the", "sat"]
    assert WordTokenizer.from_text(TEXT, min_count=2).words == [UNK, " ", "the", "sat"]


def test_unknown_words_encode_as_unk_and_decode_as_its_name():
    tok = WordTokenizer.from_text(TEXT)
    ids = tok.encode("the bird sat")
    assert ids == [tok.ids["the"], tok.ids[" "], 0, tok.ids[" "], tok.ids["sat"]]
    assert tok.decode(ids) == "the <unk> sat"
    assert tok.unknown_rate("the bird sat") == pytest.approx(1 / 5)


def test_to_dict_round_trips_through_json_and_the_common_loader():
    tok = WordTokenizer.from_text(TEXT, max_size=6)
    again = tokenizer_from_dict(json.loads(json.dumps(tok.to_dict())))
    assert isinstance(again, WordTokenizer) and again == tok
    assert again.encode(TEXT) == tok.encode(TEXT)


def test_errors_name_the_argument():
    with pytest.raises(ValueError, match="words: expected '<unk>' first"):
        WordTokenizer(["a", UNK])
    with pytest.raises(ValueError, match=r"words\[1\]: expected one piece"):
        WordTokenizer([UNK, "two words"])
    with pytest.raises(ValueError, match="words: expected distinct pieces"):
        WordTokenizer([UNK, "a", "a"])
    with pytest.raises(ValueError, match="text: expected at least one character"):
        WordTokenizer.from_text("")
    with pytest.raises(TypeError, match="text: expected str"):
        WordTokenizer.from_text(b"bytes")
    with pytest.raises(ValueError, match=r"max_size: expected an integer in \[1"):
        WordTokenizer.from_text(TEXT, max_size=0)
    with pytest.raises(ValueError, match="ids"):
        WordTokenizer.from_text(TEXT).decode([10_000])
    with pytest.raises(ValueError, match=r"d\['type'\]: expected 'word'"):
        WordTokenizer.from_dict({"type": "char", "chars": "ab"})
