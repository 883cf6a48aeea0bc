"""Character tokenizer: one token per character, ids in sorted character order.

The interface every tokenizer of the package shares:

    tok = CharTokenizer.from_text(text)
    ids = tok.encode("hello")        # list[int]
    tok.decode(ids) == "hello"
    tok.vocab_size
    CharTokenizer.from_dict(tok.to_dict())   # a JSON-able dict, stored inside checkpoints

There is no unknown-character token: a character outside the vocabulary is an
error (ValueError naming it and its position), never silently dropped or replaced.
"""
from __future__ import annotations


from ..validate import check_token_ids


class CharTokenizer:
    """Maps the i-th character of ``chars`` to id i, and back."""

    kind = "char"   # the "type" entry of to_dict, so a loader can tell tokenizers apart

    def __init__(self, chars):
        if not isinstance(chars, (str, list, tuple)):     # a dict's ids or a set's order would be lost
            raise TypeError(f"chars: expected a str, list or tuple of characters (id i = chars[i]), "
                            f"got {type(chars).__name__} {chars!r:.60}")
        chars = list(chars)
        if not chars:
            raise ValueError("chars: expected at least one character, got none")
        for i, c in enumerate(chars):
            if not (isinstance(c, str) and len(c) == 1):
                raise ValueError(f"chars[{i}]: expected a single character, got {c!r}")
        if len(set(chars)) != len(chars):
            raise ValueError(f"chars: expected distinct characters, got {len(chars)} with "
                             f"{len(chars) - len(set(chars))} repeated")
        self.chars = chars                                        # id -> character
        self.ids = {c: i for i, c in enumerate(chars)}            # character -> id

    @classmethod
    def from_text(cls, text: str) -> "CharTokenizer":
        """The vocabulary of ``text``: its distinct characters, sorted by code point."""
        if not isinstance(text, str):
            raise TypeError(f"text: expected str, got {type(text).__name__}")
        if not text:
            raise ValueError("text: expected at least one character, got an empty str")
        return cls(sorted(set(text)))

    @property
    def vocab_size(self) -> int:
        return len(self.chars)

    def encode(self, text: str) -> list[int]:
        """The id of each character of ``text``."""
        if not isinstance(text, str):
            raise TypeError(f"text: expected str, got {type(text).__name__}")
        try:
            return [self.ids[c] for c in text]
        except KeyError:
            position = next(i for i, c in enumerate(text) if c not in self.ids)
            c = text[position]
            raise ValueError(f"text: character {c!r} (U+{ord(c):04X}) at position {position} is not "
                             f"in the vocabulary of {self.vocab_size} characters") from None

    def decode(self, ids) -> str:
        """The characters of ``ids``: a list of ints or a 1-D integer array."""
        ids = check_token_ids("ids", ids, self.vocab_size)
        return "".join([self.chars[i] for i in ids])

    def to_dict(self) -> dict:
        """A JSON-able description: {"type": "char", "chars": the vocabulary in id order}."""
        return {"type": self.kind, "chars": "".join(self.chars)}

    @classmethod
    def from_dict(cls, d: dict) -> "CharTokenizer":
        if not isinstance(d, dict):
            raise TypeError(f"d: expected a tokenizer's to_dict() (a dict), got {type(d).__name__}")
        if d.get("type") != cls.kind:
            raise ValueError(f"d['type']: expected {cls.kind!r}, got {d.get('type')!r}")
        if not isinstance(d.get("chars"), str):
            raise ValueError(f"d['chars']: expected the vocabulary as a str, got {d.get('chars')!r}")
        return cls(d["chars"])

    def __eq__(self, other) -> bool:
        return isinstance(other, CharTokenizer) and self.chars == other.chars

    def __repr__(self) -> str:
        return f"CharTokenizer(vocab_size={self.vocab_size})"
