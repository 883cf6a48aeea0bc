"""WordPiece tokenizer: BERT's uncased pipeline, id for id.

    tok = WordPieceTokenizer.from_vocab_file(minilm_path() / "vocab.txt")
    tok.tokenize("Café naïve")        # ['cafe', 'naive']
    tok.encode("Hello!")               # [101, 7592, 999, 102]: [CLS] hello ! [SEP]
    ids, mask = tok.encode_batch(["a b", "a"])   # (2, 4) int64 each, padded with [PAD]

The pipeline (the one of BERT's reference code, which Hugging Face's
BertTokenizer with do_lower_case=True reproduces):

1. Special tokens written in the text ("[MASK]", "[SEP]", ...) are split off
   first and kept whole, as their own ids.
2. Clean: drop NUL, U+FFFD and control characters (Unicode category C*, except
   tab, newline and carriage return); every whitespace character becomes a space.
3. Put spaces around each CJK ideograph, so each one is a word of its own.
4. Normalise to NFC and split on whitespace.
5. With ``lowercase``: lowercase, then strip accents (decompose to NFD and drop
   the combining marks, category Mn): "Café" -> "cafe".
6. Split off every punctuation character as a word of its own. Punctuation is
   BERT's definition: the ASCII ranges 33-47, 58-64, 91-96, 123-126 (so "$",
   "+", "^", "`" count, which Unicode calls symbols) plus Unicode category P*.
7. WordPiece each word, greedy longest match first: take the longest prefix in
   the vocabulary, then the longest "##"-prefixed continuation of the rest, and
   so on. A word with any unmatched remainder, or longer than 100 characters,
   becomes a single [UNK] (never a partial match).

``encode`` adds [CLS] ... [SEP] and truncates to ``max_length`` tokens, keeping
[SEP] last. (all-MiniLM-L6-v2 was trained and is used with 256, not BERT's 512:
pass ``max_length=256`` for it.) ``decode`` is lossy by construction: lowercase,
no accents, a space around punctuation, "##" pieces glued to their word.

Reference: the ids equal those of Hugging Face's pure-Python BERT tokenizer
(``BertTokenizer`` before transformers 5, ``BertTokenizerLegacy`` since) on the
golden sentences of tests/data/minilm_golden.json and on 20,000 random texts.
The Rust tokenizer (``BertTokenizerFast``) differs on rare inputs: Python's
``str.lower`` turns a word-final "Σ" into "ς" where Rust gives "σ", the two
Unicode tables disagree on a few recently assigned code points, and Rust does
not keep a special token whole when a zero-width character sits inside it.
"""
from __future__ import annotations

import functools
import re
import unicodedata

import numpy as np

from ..validate import check_flag, check_int, check_items, check_path, check_token_ids

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")   # BERT's, all but [MASK] required
CONTINUATION = "##"          # prefix of a piece that continues a word
MAX_CHARS_PER_WORD = 100     # longer words become [UNK] without a match being tried

# The CJK ideograph blocks of BERT's reference tokenizer (unified ideographs, extensions A-E,
# compatibility ideographs and their supplement). Hangul and kana are not among them.
CJK_RANGES = ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
              (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F))
ASCII_PUNCTUATION = ((33, 47), (58, 64), (91, 96), (123, 126))


def _is_cjk(cp: int) -> bool:
    return any(lo <= cp <= hi for lo, hi in CJK_RANGES)


def _is_whitespace(ch: str) -> bool:
    return ch in " \t\n\r" or unicodedata.category(ch) == "Zs"


def _is_control(ch: str) -> bool:
    return ch not in "\t\n\r" and unicodedata.category(ch).startswith("C")


def _is_punctuation(ch: str) -> bool:
    cp = ord(ch)
    return any(lo <= cp <= hi for lo, hi in ASCII_PUNCTUATION) or unicodedata.category(ch).startswith("P")


@functools.lru_cache(maxsize=1 << 16)
def char_class(ch: str) -> str:
    """What the pipeline does with one character: "drop", "space", "cjk", "punct" or "keep".

    Cached: a text repeats few distinct characters, and looking each one up in the
    Unicode tables again was most of the tokenizer's time.
    """
    cp = ord(ch)
    if cp == 0 or cp == 0xFFFD or _is_control(ch):
        return "drop"
    if _is_whitespace(ch):
        return "space"
    if _is_cjk(cp):
        return "cjk"
    return "punct" if _is_punctuation(ch) else "keep"


def clean_text(text: str) -> str:
    """Step 2 and 3: drop NUL, U+FFFD and controls; whitespace -> " "; spaces around CJK."""
    out = []
    for ch in text:
        kind = char_class(ch)
        if kind == "space":
            out.append(" ")
        elif kind == "cjk":
            out.append(f" {ch} ")
        elif kind != "drop":
            out.append(ch)
    return "".join(out)


def strip_accents(word: str) -> str:
    """Step 5's second half: NFD, then drop the combining marks (category Mn)."""
    if word.isascii():   # nothing to strip; the common case, skipped quickly
        return word
    return "".join(ch for ch in unicodedata.normalize("NFD", word) if unicodedata.category(ch) != "Mn")


def split_punctuation(word: str) -> list[str]:
    """Step 6: "don't!" -> ["don", "'", "t", "!"]."""
    pieces, current = [], []
    for ch in word:
        if char_class(ch) == "punct":
            if current:
                pieces.append("".join(current))
                current = []
            pieces.append(ch)
        else:
            current.append(ch)
    if current:
        pieces.append("".join(current))
    return pieces


class WordPieceTokenizer:
    """BERT's WordPiece tokenizer over a vocabulary given in id order.

    ``vocab`` must hold [PAD], [UNK], [CLS] and [SEP] ([MASK] is optional).
    ``lowercase`` selects the uncased pipeline (lowercase and strip accents);
    ``max_length`` is the default truncation length, special tokens included.
    """

    kind = "wordpiece"   # the "type" entry of to_dict, so a loader can tell tokenizers apart

    def __init__(self, vocab, lowercase: bool = True, max_length: int = 512):
        vocab = check_items("vocab", vocab)
        for i, token in enumerate(vocab):
            if not isinstance(token, str):
                raise TypeError(f"vocab[{i}]: expected a str token, got {token!r}")
        self.vocab = vocab                                         # id -> token
        self.ids = {token: i for i, token in enumerate(vocab)}     # token -> id
        if len(self.ids) != len(vocab):
            raise ValueError(f"vocab: expected distinct tokens, got {len(vocab)} with "
                             f"{len(vocab) - len(self.ids)} repeated")
        missing = [t for t in SPECIAL_TOKENS[:4] if t not in self.ids]
        if missing:
            raise ValueError(f"vocab: expected the special tokens {SPECIAL_TOKENS[:4]}, missing {missing}")
        if not isinstance(lowercase, bool):
            raise TypeError(f"lowercase: expected a bool, got {lowercase!r}")
        self.lowercase = lowercase
        self.max_length = check_int("max_length", max_length, low=2)
        self.pad_id, self.unk_id = self.ids["[PAD]"], self.ids["[UNK]"]
        self.cls_id, self.sep_id = self.ids["[CLS]"], self.ids["[SEP]"]
        self.special = [t for t in SPECIAL_TOKENS if t in self.ids]
        self._special_pattern = re.compile("(" + "|".join(re.escape(t) for t in self.special) + ")")
        # Matching never tries a piece longer than the longest token: it could not be in the vocabulary.
        self._longest = max(len(t) for t in vocab)

    @classmethod
    def from_vocab_file(cls, path, lowercase: bool = True, max_length: int = 512) -> "WordPieceTokenizer":
        """A vocabulary file with one token per line, line i holding the token of id i (BERT's vocab.txt).

        Lines end in \\n or \\r\\n (a file saved on Windows reads the same); a lone \\r inside a line
        is refused, since reading it as a line break would shift every later id by one.
        """
        path = check_path("path", path)
        try:
            with open(path, encoding="utf-8", newline="") as f:      # no newline translation: \r seen as is
                lines = f.read().split("\n")
            if lines[-1] == "":
                lines.pop()                                            # the last line's own \n
            vocab = [line.removesuffix("\r") for line in lines]
        except UnicodeDecodeError as err:
            raise ValueError(f"{path}: expected a UTF-8 vocabulary file, one token a line ({err.reason} "
                             f"at byte {err.start})") from None
        for i, token in enumerate(vocab):
            if "\r" in token:
                raise ValueError(f"{path}: line {i + 1} holds a carriage return inside {token!r}; expected "
                                 f"one token a line, lines ending in \\n or \\r\\n")
        try:
            return cls(vocab, lowercase=lowercase, max_length=max_length)
        except (TypeError, ValueError) as err:
            raise type(err)(f"{path}: {err}") from None

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    # ---- text -> tokens ---------------------------------------------------------------

    def tokenize(self, text: str) -> list[str]:
        """The WordPiece tokens of ``text``, without [CLS]/[SEP]."""
        if not isinstance(text, str):
            raise TypeError(f"text: expected str, got {type(text).__name__}")
        tokens = []
        for part in self._special_pattern.split(text):   # odd positions hold the special tokens
            if part in self.special:
                tokens.append(part)
            else:
                for word in self._words(part):
                    tokens.extend(self._wordpiece(word))
        return tokens

    def _words(self, text: str) -> list[str]:
        """Steps 2-6: the words and punctuation marks that WordPiece splits further."""
        words = []
        for word in unicodedata.normalize("NFC", clean_text(text)).split():
            if word in self.special:     # a special token that cleaning brought together: kept whole
                words.append(word)
                continue
            if self.lowercase:
                word = strip_accents(word.lower())
            words.extend(split_punctuation(word))
        return words

    def _wordpiece(self, word: str) -> list[str]:
        """Step 7: greedy longest-match-first pieces of one word, or ["[UNK]"]."""
        if len(word) > MAX_CHARS_PER_WORD:
            return ["[UNK]"]
        pieces, start = [], 0
        while start < len(word):
            prefix = CONTINUATION if start > 0 else ""
            for end in range(min(len(word), start + self._longest - len(prefix)), start, -1):
                piece = prefix + word[start:end]
                if piece in self.ids:
                    break
            else:                        # no prefix of the rest is in the vocabulary
                return ["[UNK]"]
            pieces.append(piece)
            start = end
        return pieces

    # ---- tokens -> ids -----------------------------------------------------------------

    def encode(self, text: str, add_special_tokens: bool = True, max_length: int | None = None,
               truncation: bool = True) -> list[int]:
        """The ids of ``text``: [CLS] tokens [SEP] (without them if not ``add_special_tokens``).

        With ``truncation`` the result has at most ``max_length`` ids (default: the
        tokenizer's ``max_length``); the tokens at the end are dropped, [SEP] stays last.
        """
        max_length = self.max_length if max_length is None else check_int("max_length", max_length, low=2)
        add_special_tokens = check_flag("add_special_tokens", add_special_tokens)
        truncation = check_flag("truncation", truncation)
        ids = [self.ids[token] for token in self.tokenize(text)]
        if add_special_tokens:
            if truncation:
                ids = ids[:max_length - 2]
            return [self.cls_id] + ids + [self.sep_id]
        return ids[:max_length] if truncation else ids

    def encode_batch(self, texts, max_length: int | None = None,
                     pad_to_max_length: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """Encode, truncate and pad a list of texts into one batch.

        Inputs:  texts  N strings; max_length: truncation length (default: the tokenizer's)
        Returns: ids (N, L) int64: [CLS] tokens [SEP] then [PAD]s;
                 attention_mask (N, L) int64: 1 at real tokens, 0 at padding.
                 L is the longest encoded text (at most max_length), or
                 max_length itself with ``pad_to_max_length``.
        """
        if isinstance(texts, str):
            raise TypeError("texts: expected a list of str, got one str")
        texts = check_items("texts", texts)
        for n, t in enumerate(texts):
            if not isinstance(t, str):
                raise TypeError(f"texts[{n}]: expected str, got {type(t).__name__}")
        if not texts:
            raise ValueError("texts: expected at least one text, got an empty list")
        max_length = self.max_length if max_length is None else check_int("max_length", max_length, low=2)
        rows = [self.encode(t, max_length=max_length) for t in texts]
        L = max_length if pad_to_max_length else max(len(r) for r in rows)
        ids = np.full((len(rows), L), self.pad_id, dtype=np.int64)        # (N, L)
        attention_mask = np.zeros((len(rows), L), dtype=np.int64)         # (N, L)
        for n, row in enumerate(rows):   # a loop over texts: their lengths differ
            ids[n, :len(row)] = row
            attention_mask[n, :len(row)] = 1
        return ids, attention_mask

    def decode(self, ids, skip_special_tokens: bool = True) -> str:
        """Text from ids: pieces joined, "##" continuations glued to the piece before.

        [CLS], [SEP] and [PAD] are left out unless ``skip_special_tokens`` is False;
        [UNK] and [MASK] always show, so a reader sees where text was lost.
        """
        skip_special_tokens = check_flag("skip_special_tokens", skip_special_tokens)
        words = []
        for i in check_token_ids("ids", ids, self.vocab_size):
            if skip_special_tokens and i in (self.cls_id, self.sep_id, self.pad_id):
                continue
            token = self.vocab[i]
            if token.startswith(CONTINUATION) and words:
                words[-1] += token[len(CONTINUATION):]
            else:
                words.append(token)
        return " ".join(words)

    # ---- serialisation -----------------------------------------------------------------

    def to_dict(self) -> dict:
        """A JSON-able description: the vocabulary in id order and the two options."""
        return {"type": self.kind, "vocab": list(self.vocab), "lowercase": self.lowercase,
                "max_length": self.max_length}

    @classmethod
    def from_dict(cls, d: dict) -> "WordPieceTokenizer":
        if d.get("type") != cls.kind:
            raise ValueError(f"d['type']: expected {cls.kind!r}, got {d.get('type')!r}")
        if not isinstance(d.get("vocab"), list):
            raise ValueError(f"d['vocab']: expected the vocabulary as a list of str, "
                             f"got {type(d.get('vocab')).__name__}")
        return cls(d["vocab"], lowercase=d.get("lowercase", True), max_length=d.get("max_length", 512))

    def __eq__(self, other) -> bool:
        return (isinstance(other, WordPieceTokenizer) and self.vocab == other.vocab
                and self.lowercase == other.lowercase and self.max_length == other.max_length)

    def __repr__(self) -> str:
        return (f"WordPieceTokenizer(vocab_size={self.vocab_size}, lowercase={self.lowercase}, "
                f"max_length={self.max_length})")
