"""Word tokenizer: one id per word, the unit of the n-gram and word2vec era and of the
original Transformer's word-level baselines, next to characters, BPE and WordPiece.

A text is cut into pieces, each a run of letters/digits/underscore (a word), one punctuation
mark, or a run of whitespace; the pieces of a text, joined, are the text again:

    "Hello, world!\\n"  ->  ["Hello", ",", " ", "world", "!", "\\n"]

The vocabulary keeps the ``max_size`` - 1 most frequent pieces of the training text (ties by
code-point order), after the unknown token ``<unk>`` at id 0; pieces seen fewer than
``min_count`` times are left out. A piece outside the vocabulary encodes as ``<unk>``, so
encode never fails, and decode writes ``<unk>`` back: decode(encode(text)) == text exactly
when every piece is known. That loss is the word level's weakness (an open vocabulary
needs subwords: bpe.py, wordpiece.py), and ``unknown_rate`` measures it.

The interface every tokenizer of the package shares (char.py): ``encode``, ``decode``,
``vocab_size``, ``to_dict`` / ``from_dict``.
"""
from __future__ import annotations

import re
from collections import Counter

from ..validate import check_int, check_items, check_token_ids

UNK = "<unk>"
PIECE = re.compile(r"\w+|[^\w\s]|\s+")     # a word, one punctuation mark, or a run of whitespace


def split_words(text: str) -> list[str]:
    """The pieces of ``text`` (words, punctuation marks, whitespace runs); "".join gives text back."""
    if not isinstance(text, str):
        raise TypeError(f"text: expected str, got {type(text).__name__}")
    return PIECE.findall(text)


class WordTokenizer:
    """Maps the i-th piece of ``words`` to id i; words[0] must be ``<unk>``."""

    kind = "word"   # the "type" entry of to_dict

    def __init__(self, words):
        words = check_items("words", words)
        if not words or words[0] != UNK:
            raise ValueError(f"words: expected {UNK!r} first (id 0), got {words[:1]}")
        for i, w in enumerate(words[1:], start=1):
            if not isinstance(w, str) or split_words(w) != [w]:
                raise ValueError(f"words[{i}]: expected one piece (a word, a punctuation mark or a "
                                 f"whitespace run), got {w!r}")
        if len(set(words)) != len(words):
            raise ValueError(f"words: expected distinct pieces, got {len(words) - len(set(words))} repeated")
        self.words = words                                       # id -> piece
        self.ids = {w: i for i, w in enumerate(words)}           # piece -> id
        self.unk_id = 0

    @classmethod
    def from_text(cls, text: str, max_size: int | None = None, min_count: int = 1) -> "WordTokenizer":
        """The vocabulary of ``text``: <unk>, then its pieces by falling count (at most max_size in all)."""
        pieces = split_words(text)
        if not pieces:
            raise ValueError("text: expected at least one character, got an empty str")
        if max_size is not None:
            max_size = check_int("max_size", max_size, low=1)
        min_count = check_int("min_count", min_count, low=1)
        counts = Counter(pieces)
        ranked = sorted((w for w, n in counts.items() if n >= min_count), key=lambda w: (-counts[w], w))
        keep = ranked if max_size is None else ranked[:max_size - 1]
        return cls([UNK] + keep)

    @property
    def vocab_size(self) -> int:
        return len(self.words)

    def encode(self, text: str) -> list[int]:
        """The id of each piece of ``text``; an unknown piece gives <unk> (id 0)."""
        return [self.ids.get(w, self.unk_id) for w in split_words(text)]

    def decode(self, ids) -> str:
        """The pieces of ``ids`` joined (id 0 writes "<unk>")."""
        ids = check_token_ids("ids", ids, self.vocab_size)
        return "".join([self.words[i] for i in ids])

    def unknown_rate(self, text: str) -> float:
        """The fraction of the pieces of ``text`` outside the vocabulary (0.0 for an empty text)."""
        pieces = split_words(text)
        return sum(w not in self.ids for w in pieces) / len(pieces) if pieces else 0.0

    def to_dict(self) -> dict:
        """A JSON-able description: {"type": "word", "words": the vocabulary in id order}."""
        return {"type": self.kind, "words": list(self.words)}

    @classmethod
    def from_dict(cls, d: dict) -> "WordTokenizer":
        if not isinstance(d, dict):
            raise TypeError(f"d: expected a tokenizer's to_dict() (a dict), got {type(d).__name__}")
        if d.get("type") != cls.kind:
            raise ValueError(f"d['type']: expected {cls.kind!r}, got {d.get('type')!r}")
        if not isinstance(d.get("words"), list):
            raise ValueError(f"d['words']: expected the vocabulary as a list, got {type(d.get('words')).__name__}")
        return cls(d["words"])

    def __eq__(self, other) -> bool:
        return isinstance(other, WordTokenizer) and self.words == other.words

    def __repr__(self) -> str:
        return f"WordTokenizer(vocab_size={self.vocab_size})"
