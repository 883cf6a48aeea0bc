"""CharTokenizer: round trips, id order, errors that name the character, JSON state."""
import json

import numpy as np
import pytest
from hypothesis import given, strategies as st

from minitransformer.training.data import default_corpus
from minitransformer.tokenizers.char import CharTokenizer

CORPUS_TOKENIZER = CharTokenizer.from_text(default_corpus())


@given(text=st.text(alphabet=CORPUS_TOKENIZER.chars, max_size=200))
def test_round_trip_over_the_corpus_alphabet(text):
    ids = CORPUS_TOKENIZER.encode(text)
    assert len(ids) == len(text) and all(0 <= i < CORPUS_TOKENIZER.vocab_size for i in ids)
    assert CORPUS_TOKENIZER.decode(ids) == text


@given(text=st.text(min_size=1, max_size=100))
def test_vocabulary_of_any_text_is_its_sorted_characters(text):
    tok = CharTokenizer.from_text(text)
    assert tok.chars == sorted(set(text)) and tok.vocab_size == len(set(text))
    assert tok.decode(tok.encode(text)) == text
    assert tok.decode(np.array(tok.encode(text))) == text        # arrays decode too


def test_ids_follow_code_point_order():
    tok = CharTokenizer.from_text("cab a")
    assert tok.encode("  abc") == [0, 0, 1, 2, 3]
    assert tok.vocab_size == 4


def test_unknown_character_is_named_with_its_position():
    tok = CharTokenizer.from_text("hello")
    with pytest.raises(ValueError, match=r"character 'x' \(U\+0078\) at position 2 is not in the vocabulary"):
        tok.encode("hex")


def test_bad_ids_are_named_with_their_position():
    tok = CharTokenizer.from_text("ab")
    with pytest.raises(ValueError, match=r"ids: expected ids in \[0, 2\), got -1 at position 1"):
        tok.decode([0, -1])           # a negative id must not wrap around to the last character
    with pytest.raises(ValueError, match=r"got 2 at position 0"):
        tok.decode(np.array([2]))
    with pytest.raises(TypeError, match=r"ids: expected integer token ids, got 1.0"):
        tok.decode([1.0])


def test_to_dict_is_json_and_restores_the_same_tokenizer():
    tok = CharTokenizer.from_text("Grüße, 世界!\n\t")
    restored = CharTokenizer.from_dict(json.loads(json.dumps(tok.to_dict())))
    assert restored == tok and restored.encode("世界") == tok.encode("世界")
    with pytest.raises(ValueError, match=r"d\['type'\]: expected 'char', got 'bpe'"):
        CharTokenizer.from_dict({"type": "bpe", "chars": "ab"})


def test_constructor_errors():
    with pytest.raises(ValueError, match="expected at least one character"):
        CharTokenizer.from_text("")
    with pytest.raises(ValueError, match="expected distinct characters"):
        CharTokenizer("aba")
    with pytest.raises(TypeError, match="text: expected str"):
        CharTokenizer.from_text(b"bytes")
